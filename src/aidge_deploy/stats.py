"""The one place where series of samples become summary figures.

The terminal, the result bundle and the HTML report must print the same median of the
same samples: they all reduce through these functions (``profiling.aggregate`` adds the
rejection of impossible samples on top, ``results.LatencyStats`` the descriptive block).
The median of an even number of samples is the mean of the two middle ones, as everywhere
in statistics; the p90 is the nearest-rank percentile (a sample that was really observed).

A leaf module: it imports nothing from the package.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = [
    "MEAN",
    "MEDIAN",
    "TRIMMED",
    "TRIMMED_MIN_SAMPLES",
    "mean",
    "median",
    "percentile",
    "reduce",
    "std",
    "trimmed_mean",
]

MEDIAN = "median"
MEAN = "mean"
TRIMMED = "trimmed"
#: a trimmed mean drops one minimum and one maximum, so it needs at least this many samples
TRIMMED_MIN_SAMPLES = 3


def _floats(values: Sequence[float]) -> list[float]:
    data = [float(v) for v in values]
    if not data:
        raise ValueError("no samples")
    return data


def median(values: Sequence[float]) -> float:
    return float(statistics.median(_floats(values)))


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(_floats(values))


def trimmed_mean(values: Sequence[float]) -> float:
    """Mean without one minimum and one maximum (needs ``TRIMMED_MIN_SAMPLES``)."""
    data = sorted(_floats(values))
    if len(data) < TRIMMED_MIN_SAMPLES:
        raise ValueError(f"a trimmed mean needs at least {TRIMMED_MIN_SAMPLES} samples")
    return statistics.fmean(data[1:-1])


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100]: the smallest sample with ``q`` % at or below it."""
    data = sorted(_floats(values))
    index = max(0, math.ceil(q / 100.0 * len(data)) - 1)
    return data[index]


def std(values: Sequence[float]) -> float:
    """Population standard deviation (0 for one sample)."""
    data = _floats(values)
    return statistics.pstdev(data) if len(data) > 1 else 0.0


def reduce(values: Sequence[float], method: str) -> tuple[float, str]:
    """Reduce ``values`` by ``method`` (median, mean, trimmed); returns (value, method used).

    A trimmed mean of fewer than ``TRIMMED_MIN_SAMPLES`` samples falls back to the median,
    and says so through the method used.
    """
    method = str(method)
    if method == MEAN:
        return mean(values), MEAN
    if method == TRIMMED:
        if len(values) < TRIMMED_MIN_SAMPLES:
            return median(values), MEDIAN
        return trimmed_mean(values), TRIMMED
    if method != MEDIAN:
        raise ValueError(f"unknown reduction {method!r} (median, mean or trimmed)")
    return median(values), MEDIAN
