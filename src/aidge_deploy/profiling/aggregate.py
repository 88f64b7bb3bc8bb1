"""Reduce per-iteration samples to one figure, after dropping samples that cannot be true.

A 32-bit hardware counter that wraps between two reads yields a huge value (or, read as a
signed delta, a negative one); a counter block that was never enabled, or a timer that did
not advance, yields rows of zeros. Both would drag a mean — and, when frequent, a median —
far from the truth, so they are rejected first and the rejection is recorded, never hidden.
The reduction itself is the one the user chose (``DeployConfig.aggregation``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from aidge_deploy import stats
from aidge_deploy.config import Aggregation
from aidge_deploy.stats import TRIMMED_MIN_SAMPLES


class RejectReason(StrEnum):
    """Why a sample was left out of the reduction."""

    WRAPPED = "wrapped"  # value >= 2**(bits-1): a uint32 counter wrapped between two reads
    NEGATIVE = "negative"  # a negative delta: the counter wrapped or was reset mid-measure
    NOT_FINITE = "not_finite"  # NaN or infinity (a division by a zero count upstream)
    FROZEN = "frozen"  # every counter of the row is zero while other rows are not


@dataclass(frozen=True)
class Aggregate:
    """One reduced figure and the story of how it was obtained."""

    #: the reduced value; ``None`` when no sample survived the rejection
    value: float | None
    n_used: int
    n_rejected: int
    #: the reduction asked for
    method: Aggregation
    #: the reduction applied (a trimmed mean of fewer than 3 samples falls back to the median)
    method_used: Aggregation
    #: how many samples were rejected for each reason
    rejected: Mapping[RejectReason, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def n_total(self) -> int:
        return self.n_used + self.n_rejected

    def describe(self) -> str:
        """A short human sentence, e.g. ``median of 9 samples (1 rejected: wrapped)``."""
        text = f"{self.method_used.value} of {self.n_used} samples"
        if self.method_used != self.method:
            text += f" ({self.method.value} needs at least {TRIMMED_MIN_SAMPLES})"
        if self.n_rejected:
            reasons = ", ".join(f"{n} {r.value}" for r, n in self.rejected.items())
            text += f" ({self.n_rejected} rejected: {reasons})"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "value": self.value,
            "n_used": self.n_used,
            "n_rejected": self.n_rejected,
            "method": self.method.value,
            "method_used": self.method_used.value,
            "rejected": {r.value: n for r, n in self.rejected.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Aggregate:
        """The inverse of ``as_dict`` (a bundle's figure read back)."""
        value = data.get("value")
        return cls(
            None if value is None else float(value),
            int(data["n_used"]),
            int(data["n_rejected"]),
            Aggregation(data["method"]),
            Aggregation(data["method_used"]),
            MappingProxyType(
                {RejectReason(r): int(n) for r, n in (data.get("rejected") or {}).items()}
            ),
        )


def _reduce(values: Sequence[float], method: Aggregation) -> tuple[float, Aggregation]:
    value, used = stats.reduce(values, method.value)
    return value, Aggregation(used)


def sample_problem(value: float, counter_bits: int | None) -> RejectReason | None:
    if not math.isfinite(value):
        return RejectReason.NOT_FINITE
    if value < 0:
        return RejectReason.NEGATIVE
    if counter_bits is not None and value >= 2 ** (counter_bits - 1):
        return RejectReason.WRAPPED
    return None


def _finish(kept: list[float], rejected: dict[RejectReason, int], method: Aggregation) -> Aggregate:
    n_rejected = sum(rejected.values())
    frozen_counts = MappingProxyType(dict(rejected))
    if not kept:
        return Aggregate(None, 0, n_rejected, method, method, frozen_counts)
    value, used = _reduce(kept, method)
    return Aggregate(value, len(kept), n_rejected, method, used, frozen_counts)


def aggregate_samples(
    samples: Sequence[float],
    method: Aggregation | str = Aggregation.MEDIAN,
    *,
    counter_bits: int | None = None,
) -> Aggregate:
    """Reduce one series (e.g. latency per iteration, cycles per inference).

    ``counter_bits`` marks the series as readings of a counter that wide (32 for DWT
    CYCCNT and the Arm PMU): values at or above ``2**(bits-1)`` are wrapped, and a zero
    among non-zero readings is a frozen counter. Timings pass ``None``: a zero time there
    is the quantisation of a coarse timer, a real (if poor) reading, so it is kept.
    Negative and non-finite samples are always rejected.
    """
    method = Aggregation(method)
    values = [float(raw) for raw in samples]
    check_frozen = counter_bits is not None and any(v != 0.0 for v in values)
    kept: list[float] = []
    rejected: dict[RejectReason, int] = {}
    for value in values:
        problem = sample_problem(value, counter_bits)
        if problem is None and check_frozen and value == 0.0:
            problem = RejectReason.FROZEN
        if problem is None:
            kept.append(value)
        else:
            rejected[problem] = rejected.get(problem, 0) + 1
    return _finish(kept, rejected, method)


def aggregate_rows(
    rows: Sequence[Mapping[str, float]],
    method: Aggregation | str = Aggregation.MEDIAN,
    *,
    counter_bits: int | None,
) -> dict[str, Aggregate]:
    """Reduce per-iteration counter rows (one mapping counter -> value per iteration).

    A row whose counters are all zero is *frozen* (the counters were not running) and is
    rejected, unless every row is zero — then zero is the honest answer. Each remaining
    value is then checked on its own for wrap-around. Returns one ``Aggregate`` per
    counter name seen in any row; a counter missing from a row is simply not sampled there.
    ``counter_bits`` is the width of the counters read (32 for DWT CYCCNT and the Arm PMU;
    None for 64-bit counts, which never wrap in a run): no default, every caller says.
    """
    method = Aggregation(method)
    names: list[str] = []
    for row in rows:
        names.extend(name for name in row if name not in names)
    frozen = [bool(row) and all(float(v) == 0.0 for v in row.values()) for row in rows]
    all_frozen = all(frozen)
    out: dict[str, Aggregate] = {}
    for name in names:
        kept: list[float] = []
        rejected: dict[RejectReason, int] = {}
        for row, is_frozen in zip(rows, frozen, strict=True):
            if name not in row:
                continue
            if is_frozen and not all_frozen:
                rejected[RejectReason.FROZEN] = rejected.get(RejectReason.FROZEN, 0) + 1
                continue
            value = float(row[name])
            problem = sample_problem(value, counter_bits)
            if problem is None:
                kept.append(value)
            else:
                rejected[problem] = rejected.get(problem, 0) + 1
        out[name] = _finish(kept, rejected, method)
    return out


__all__ = [
    "TRIMMED_MIN_SAMPLES",
    "Aggregate",
    "RejectReason",
    "aggregate_rows",
    "aggregate_samples",
    "sample_problem",
]
