"""Did a figure change, given its history? Exact figures and measured ones are judged apart.

* **Exact figures** — emulated counts, static sizes and the estimates computed from them —
  come out the same on every run of the same program: any change is a change. A new value
  is compared with the previous comparable one.
* **Measured figures** — host and silicon times — scatter from run to run. A new value is
  judged against the last ``WINDOW`` (10) comparable results of its identity: their
  **median**, with a noise band of ``NOISE_SIGMAS`` (3) robust standard deviations
  (1.4826 × the median absolute deviation), never narrower than ``MIN_BAND_PCT`` (2 %) of the
  median nor than the timer's resolution. Noise stays inside the band; a real step leaves it.
  With fewer than ``MIN_WINDOW`` (3) earlier results the spread is unknown: the previous
  result is the reference and no band is added.

``judge`` gives the reference, the band and whether the value stepped; ``steps`` marks the
points of a series where it stepped (what ``aidge-deploy history`` charts).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from aidge_deploy.metrics import Provenance

#: how many earlier comparable results a measured figure is judged against
WINDOW = 10
#: fewer earlier results than this: no spread is estimated
MIN_WINDOW = 3
#: the noise band, in robust standard deviations
NOISE_SIGMAS = 3.0
#: the noise band's floor, in percent of the median (a window of near-identical times)
MIN_BAND_PCT = 2.0
#: 1.4826 × MAD estimates the standard deviation of normally distributed noise
MAD_TO_SIGMA = 1.4826

EXACT_PROVENANCES = frozenset(
    {Provenance.EMULATED.value, Provenance.STATIC.value, Provenance.ESTIMATED.value}
)


def is_exact(provenance: str) -> bool:
    """Whether figures of ``provenance`` repeat exactly from run to run."""
    return provenance in EXACT_PROVENANCES


@dataclass(frozen=True)
class Judgement:
    """A value against its history."""

    value: float
    #: the previous value (exact figures, short histories) or the window's median
    reference: float
    #: how far from the reference the value may be before it is a step (0: exact)
    band: float
    stepped: bool
    #: what the reference is, for people ("median of the last 10 host results")
    basis: str

    @property
    def change(self) -> float:
        return self.value - self.reference


def judge(
    earlier: Sequence[float],
    value: float,
    provenance: str,
    *,
    resolution: float | None = None,
) -> Judgement | None:
    """``value`` against ``earlier`` values of the same figure (oldest first); None without
    any earlier value."""
    if not earlier:
        return None
    if is_exact(provenance):
        reference = earlier[-1]
        return Judgement(
            value, reference, 0.0, value != reference, f"previous {provenance} value (exact)"
        )
    window = list(earlier[-WINDOW:])
    if len(window) < MIN_WINDOW:
        reference = window[-1]
        return Judgement(
            value,
            reference,
            0.0,
            value != reference,
            f"previous {provenance} value (fewer than {MIN_WINDOW} earlier results: "
            "spread unknown)",
        )
    median = statistics.median(window)
    mad = statistics.median(abs(v - median) for v in window)
    band = max(
        NOISE_SIGMAS * MAD_TO_SIGMA * mad,
        abs(median) * MIN_BAND_PCT / 100.0,
        resolution or 0.0,
    )
    return Judgement(
        value,
        median,
        band,
        abs(value - median) > band,
        f"median of the last {len(window)} {provenance} results ± {NOISE_SIGMAS:g} robust σ",
    )


def steps(
    values: Sequence[float | None], provenance: str, resolution: float | None = None
) -> list[int]:
    """Indexes of ``values`` where the series stepped, each value judged against those
    before it (None values are skipped). A measured series marks nothing until its spread
    is known (``MIN_WINDOW`` values), and after a step starts a new level: a lasting step
    is marked once, where it happened."""
    marked: list[int] = []
    earlier: list[float] = []
    exact = is_exact(provenance)
    for i, value in enumerate(values):
        if value is None:
            continue
        if exact or len(earlier) >= MIN_WINDOW:
            verdict = judge(earlier, value, provenance, resolution=resolution)
            if verdict is not None and verdict.stepped:
                marked.append(i)
                if not exact:
                    earlier = []
        earlier.append(value)
    return marked
