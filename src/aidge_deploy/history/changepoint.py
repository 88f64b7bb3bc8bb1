"""Where a measured series changed level, how noisy it is, and whether it can be gated at all.

The median + MAD rule (``regression``) judges one new value against a window. Beside it, a
whole series is segmented by **change-point detection**: PELT (``ruptures``, Killick et al.
2012) with the least-squares cost, which places the change points that lower the sum of
squared deviations from each segment's mean by more than a penalty each. The penalty is set
from the series' own **noise**: ``PENALTY_SIGMAS² × σ² × ln n``, σ estimated from the first
differences (``1.4826 × MAD(diff) / √2``), which a step moves once and noise every time, so
a series with steps still has its noise measured right. The noise a series is classed by is
then measured around each level found (``noise_sigma``). That makes the false-alarm rate a
property of the rule, not of the series' scale: ``benchmarks/bench_changepoint.py`` measures
recall and false alarms per 100 runs on synthetic series with known steps.

A series whose noise is more than ``UNSTABLE_PCT`` (5 %) of its median is **unstable**: a
regression threshold of a few percent is inside its noise, so a verdict on it would be a
coin toss. Its figures are said, not gated. Exact figures (emulated counts, static sizes)
have no noise: any change is a change point.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from aidge_deploy.history.regression import MAD_TO_SIGMA, is_exact

#: the penalty of one change point, in squared noise sigmas per ln(n) (tuned by the benchmark)
PENALTY_SIGMAS = 2.0
#: the fewest values a segment holds (a lone outlier is not a level)
MIN_SEGMENT = 3
#: noise above this percentage of the median makes a series too noisy to gate
UNSTABLE_PCT = 5.0
#: fewer values than this: the noise is not known
MIN_VALUES = 4


class Stability(StrEnum):
    EXACT = "exact"  # repeats exactly (emulated, static): any change is a change
    STABLE = "stable"  # measured, noise small enough to gate
    UNSTABLE = "unstable"  # measured, too noisy to gate: said, not failed
    UNKNOWN = "unknown"  # too few values to measure the noise


@dataclass(frozen=True)
class SeriesNoise:
    """A series' noise (its unit) and what that makes of it."""

    sigma: float | None
    #: sigma in percent of the series' median (None: no sigma, or a zero median)
    pct: float | None
    stability: Stability
    values: int

    def describe(self) -> str:
        if self.stability is Stability.EXACT:
            return "exact (no noise)"
        if self.pct is None:
            return f"noise unknown ({self.values} values, {MIN_VALUES} needed)"
        verdict = "too noisy to gate" if self.stability is Stability.UNSTABLE else "gated"
        return f"noise {self.pct:.2g} % of the median over {self.values} runs ({verdict})"


def difference_sigma(values: Sequence[float]) -> float | None:
    """A first estimate of the noise, blind to steps: the MAD of the first differences
    (each a difference of two noises, hence / √2). It sets the detection's penalty."""
    if len(values) < MIN_VALUES:
        return None
    diffs = [b - a for a, b in itertools.pairwise(values)]
    center = statistics.median(diffs)
    mad = statistics.median(abs(d - center) for d in diffs)
    return MAD_TO_SIGMA * mad / math.sqrt(2.0)


def noise_sigma(values: Sequence[float], resolution: float | None = None) -> float | None:
    """The series' noise as a standard deviation, robust to its steps and outliers:
    1.4826 × the MAD of each value from the median of its level (the segments between the
    change points), pooled over the series. On few values the difference estimate alone
    scatters too much to class a series."""
    if len(values) < MIN_VALUES:
        return None
    cuts = [0, *_measured_change_points(values, resolution), len(values)]
    residuals = []
    for start, end in itertools.pairwise(cuts):
        segment = values[start:end]
        level = statistics.median(segment)
        residuals += [abs(v - level) for v in segment]
    return MAD_TO_SIGMA * statistics.median(residuals)


def series_noise(
    values: Sequence[float], provenance: str, *, resolution: float | None = None
) -> SeriesNoise:
    """How noisy ``values`` (oldest first, a measured or exact figure) are."""
    if is_exact(provenance):
        return SeriesNoise(0.0, 0.0, Stability.EXACT, len(values))
    sigma = noise_sigma(values, resolution)
    if sigma is None:
        return SeriesNoise(None, None, Stability.UNKNOWN, len(values))
    median = abs(statistics.median(values))
    pct = None if median == 0 else 100.0 * sigma / median
    unstable = pct is not None and pct > UNSTABLE_PCT
    return SeriesNoise(
        sigma, pct, Stability.UNSTABLE if unstable else Stability.STABLE, len(values)
    )


def change_points(
    values: Sequence[float], provenance: str, *, resolution: float | None = None
) -> list[int]:
    """Indexes where ``values`` starts a new level (the first value of each new segment).

    Exact series: every index whose value differs from the one before. Measured series:
    PELT with the noise-scaled penalty (none before ``2 × MIN_SEGMENT`` values; a noise
    below the timer's ``resolution`` is taken as one step of it).
    """
    if is_exact(provenance):
        return [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    return _measured_change_points(values, resolution)


def _measured_change_points(values: Sequence[float], resolution: float | None) -> list[int]:
    sigma = difference_sigma(values)
    if sigma is None or len(values) < 2 * MIN_SEGMENT:
        return []
    sigma = max(sigma, resolution or 0.0, 1e-12 * max(abs(v) for v in values))
    import numpy as np
    import ruptures

    signal = np.asarray(values, dtype=float).reshape(-1, 1)
    penalty = PENALTY_SIGMAS**2 * sigma**2 * math.log(len(values))
    ends = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(signal).predict(pen=penalty)
    return [int(e) for e in ends[:-1]]  # the last "end" is the series' length


__all__ = [
    "MIN_SEGMENT",
    "PENALTY_SIGMAS",
    "UNSTABLE_PCT",
    "SeriesNoise",
    "Stability",
    "change_points",
    "noise_sigma",
    "series_noise",
]
