"""A history's records as series: one per identity and figure, with the points where it
stepped (``regression.steps``). What ``aidge-deploy history`` lists and charts, and what
the farm's history page shows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aidge_deploy.history import changepoint, regression
from aidge_deploy.history.identity import RunIdentity
from aidge_deploy.history.store import HistoryRecord
from aidge_deploy.report.compare import TOTAL_KEYS

#: figures shown first, in this order (the rest follow by name)
LEADING = (*TOTAL_KEYS[:1], "emulated_instructions", "cycles", *TOTAL_KEYS[1:])


@dataclass(frozen=True)
class Step:
    """A point where a figure's series left its earlier level."""

    record_id: int
    metric: str
    before: float
    after: float
    unit: str
    provenance: str

    @property
    def pct(self) -> float | None:
        return None if not self.before else 100.0 * (self.after - self.before) / abs(self.before)

    def describe(self) -> str:
        arrow = "↑" if self.after > self.before else "↓"
        pct = f" {self.pct:+.1f}%" if self.pct is not None else ""
        return f"{self.metric} {arrow}{pct}"


@dataclass(frozen=True)
class Series:
    """One figure of one identity across its records (oldest first)."""

    identity: RunIdentity
    metric: str
    unit: str
    provenance: str
    records: tuple[HistoryRecord, ...]
    values: tuple[float | None, ...]
    steps: tuple[Step, ...]
    #: its noise over its last ``regression.WINDOW`` values, and whether it can be gated
    noise: changepoint.SeriesNoise | None = None
    #: record ids where change-point detection (PELT) finds a new level
    change_points: tuple[int, ...] = ()

    @property
    def stepped_ids(self) -> frozenset[int]:
        return frozenset(s.record_id for s in self.steps)


def _order(metric: str) -> tuple[int, str]:
    return (LEADING.index(metric) if metric in LEADING else len(LEADING), metric)


def by_identity(records: Iterable[HistoryRecord]) -> dict[RunIdentity, list[HistoryRecord]]:
    out: dict[RunIdentity, list[HistoryRecord]] = {}
    for record in records:
        out.setdefault(record.identity, []).append(record)
    return out


def series_of(identity: RunIdentity, records: Sequence[HistoryRecord]) -> list[Series]:
    """Every figure of ``identity``'s records (in record order) as a series, with its steps.

    A figure is judged by the provenance of its latest value; a point is judged only
    against earlier points of the same provenance (an emulated count is not the
    continuation of a host time).
    """
    names = sorted({k for r in records for k in r.figures}, key=_order)
    out = []
    for metric in names:
        figs = [r.figures.get(metric) for r in records]
        latest = next(f for f in reversed(figs) if f is not None)
        values = tuple(
            f.value if f is not None and f.provenance == latest.provenance else None for f in figs
        )
        if all(v is None for v in values):
            continue
        marks = regression.steps(list(values), latest.provenance, latest.resolution)
        steps = []
        for i in marks:
            before = next(v for v in reversed(values[:i]) if v is not None)
            after = values[i]
            if after is not None:
                steps.append(
                    Step(records[i].id, metric, before, after, latest.unit, latest.provenance)
                )
        present = [(r.id, v) for r, v in zip(records, values, strict=True) if v is not None]
        levels = [v for _, v in present]
        found = changepoint.change_points(levels, latest.provenance, resolution=latest.resolution)
        out.append(
            Series(
                identity,
                metric,
                latest.unit,
                latest.provenance,
                tuple(records),
                values,
                tuple(steps),
                # the noise now: of the window a new value is judged against (``gate``)
                changepoint.series_noise(
                    levels[-regression.WINDOW :], latest.provenance, resolution=latest.resolution
                ),
                tuple(present[i][0] for i in found),
            )
        )
    return out


def all_series(records: Iterable[HistoryRecord]) -> list[Series]:
    return [s for ident, recs in by_identity(records).items() for s in series_of(ident, recs)]


def steps_by_record(series: Iterable[Series]) -> dict[int, list[Step]]:
    out: dict[int, list[Step]] = {}
    for s in series:
        for step in s.steps:
            out.setdefault(step.record_id, []).append(step)
    return out
