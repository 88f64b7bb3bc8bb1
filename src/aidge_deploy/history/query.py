"""Reading the history back: the records a filter selects, and one record as plain data.

Why this module exists: ``aidge-deploy history list --json`` and the MCP server's history
tool answer the same question with the same fields (every figure with its unit, provenance,
resolution or reason, and where its series stepped); a history that does not exist is a
clear error, never a new empty file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.errors import ConfigError
from aidge_deploy.history.series import Series, Step, all_series, steps_by_record
from aidge_deploy.history.store import HistoryRecord, HistoryStore


@dataclass(frozen=True)
class RecordFilter:
    """Which records: each field a filter (``name`` and ``commit`` are prefixes)."""

    name: str | None = None
    target: str | None = None
    board: str | None = None
    branch: str | None = None
    source: str | None = None
    commit: str | None = None


def existing_history(location: str | Path) -> HistoryStore:
    """The history at ``location`` (a file that exists, or a database URL)."""
    if "://" not in str(location) and not Path(location).is_file():
        raise ConfigError(
            f"--history {location}: no such results history",
            hint="Pass the file given to --history / --aidge-history (or a database URL).",
        )
    return HistoryStore(location)


def select_records(location: str | Path, which: RecordFilter) -> list[HistoryRecord]:
    """The records of the history at ``location`` that ``which`` selects, oldest first."""
    with existing_history(location) as store:
        return store.records(
            name=which.name,
            target=which.target,
            board=which.board,
            branch=which.branch,
            source=which.source,
            commit=which.commit,
        )


@dataclass(frozen=True)
class Listing:
    """Records, each with where its series stepped (judged over each whole series)."""

    records: list[HistoryRecord]
    steps: dict[int, list[Step]]
    #: every series of the selection (its noise and change points: ``history.changepoint``)
    series: tuple[Series, ...] = ()


def list_records(
    location: str | Path,
    which: RecordFilter,
    *,
    limit: int | None = None,
) -> Listing:
    """The newest ``limit`` records ``which`` selects; steps are judged over each whole
    series, the commit filter and the limit only select rows."""
    records = select_records(location, RecordFilter(**{**which.__dict__, "commit": None}))
    series = all_series(records)
    steps = steps_by_record(series)
    if which.commit is not None:
        records = [r for r in records if (r.vcs.commit or "").startswith(which.commit)]
    if limit is not None:
        records = records[-limit:]
    return Listing(records, steps, tuple(series))


def record_dict(record: HistoryRecord, steps: list[Step]) -> dict[str, Any]:
    """One record as ``history list --json`` prints it."""
    return {
        "id": record.id,
        "recorded_at": record.recorded_at,
        "source": record.source,
        "accepted": record.accepted,
        "identity": record.identity.as_dict(),
        "commit": record.vcs.commit,
        "branch": record.vcs.branch,
        "ci": record.vcs.ci,
        "comparability": record.comparability.as_dict(),
        "figures": {
            k: {
                "value": f.value,
                "unit": f.unit,
                "provenance": f.provenance,
                "resolution": f.resolution,
                "unavailable_reason": f.unavailable_reason,
                "band": None if f.band is None else f.band.as_dict(f.value),
            }
            for k, f in record.figures.items()
        },
        "bundle": None if record.bundle is None else str(record.bundle),
        "stepped": [
            {"metric": s.metric, "before": s.before, "after": s.after, "unit": s.unit}
            for s in steps
        ],
    }


__all__ = [
    "Listing",
    "RecordFilter",
    "existing_history",
    "list_records",
    "record_dict",
    "select_records",
]
