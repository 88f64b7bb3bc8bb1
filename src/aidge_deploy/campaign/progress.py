"""The live state of a campaign: cells queued, running (where, doing what), done, failed.

Why this module exists: the terminal's live view, the final summary line and the farm's
dashboard all show the same counts, rate and remaining time; they read it from one
thread-safe object the runner updates, never each from its own bookkeeping. The library
never prints: the CLI polls ``snapshot()`` (or listens to ``on_change``) and renders it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from aidge_deploy.campaign.plan import Cell
from aidge_deploy.lab import Reach


class CellPhase(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    REUSED = "reused"  # finished in an earlier run of the campaign: not run again


@dataclass(frozen=True)
class RunningCell:
    cell_id: str
    model: str
    target: str
    option: str
    #: where it runs: this machine, QEMU, a lab board, the farm (and its board once known)
    where: str
    activity: str
    started: float


@dataclass(frozen=True)
class ProgressSnapshot:
    total: int
    queued: int
    reused: int
    done: int
    failed: int
    running: tuple[RunningCell, ...]
    elapsed_s: float
    #: cells finished per minute in this run (None before the first one)
    rate_per_min: float | None
    #: at the current rate, until the last queued cell is finished (None: no rate yet)
    remaining_s: float | None

    @property
    def finished(self) -> int:
        return self.done + self.failed


def where_it_runs(cell: Cell) -> str:
    target = cell.target
    if target.reach is Reach.HOST:
        return "this machine"
    if target.reach is Reach.EMULATED:
        return f"QEMU {target.target}"
    if target.reach is Reach.FARM:
        return f"farm board {target.board}" if target.board else f"farm ({target.target})"
    return f"board {target.board or target.target}"


class CampaignProgress:
    """Counts and running cells of one campaign run (every method is thread-safe)."""

    def __init__(self, cells: list[Cell], reused: set[str], option_labels: dict[str, str]) -> None:
        self._lock = threading.Lock()
        self._cells = {c.id: c for c in cells}
        self._labels = option_labels
        self._phase = {
            c.id: CellPhase.REUSED if c.id in reused else CellPhase.QUEUED for c in cells
        }
        self._running: dict[str, RunningCell] = {}
        self._started = time.monotonic()
        self._finished_here = 0
        self.on_change: Callable[[ProgressSnapshot], None] | None = None

    def start(self, cell: Cell) -> None:
        with self._lock:
            self._phase[cell.id] = CellPhase.RUNNING
            self._running[cell.id] = RunningCell(
                cell.id,
                cell.model.name,
                cell.target.label,
                self._labels.get(cell.id, "-"),
                where_it_runs(cell),
                "starting",
                time.monotonic(),
            )
        self._changed()

    def activity(self, cell: Cell, what: str) -> None:
        with self._lock:
            running = self._running.get(cell.id)
            if running is None:
                return
            where = running.where
            if " on " in what and cell.target.reach is Reach.FARM:
                # the farm says which board took the job ("farm job 7: running on an386-2")
                where = "farm board " + what.rsplit(" on ", 1)[1].split(":")[0].strip()
            self._running[cell.id] = RunningCell(
                running.cell_id,
                running.model,
                running.target,
                running.option,
                where,
                what,
                running.started,
            )
        self._changed()

    def finish(self, cell: Cell, failed: bool) -> None:
        with self._lock:
            self._phase[cell.id] = CellPhase.FAILED if failed else CellPhase.DONE
            self._running.pop(cell.id, None)
            self._finished_here += 1
        self._changed()

    def requeue(self, cell: Cell) -> None:
        """A cell stopped before its end (interrupted): it runs again next time."""
        with self._lock:
            self._phase[cell.id] = CellPhase.QUEUED
            self._running.pop(cell.id, None)
        self._changed()

    def snapshot(self) -> ProgressSnapshot:
        with self._lock:
            phases = list(self._phase.values())
            running = tuple(sorted(self._running.values(), key=lambda r: r.started))
            finished = self._finished_here
        elapsed = time.monotonic() - self._started
        queued = phases.count(CellPhase.QUEUED)
        rate = finished / elapsed * 60 if finished and elapsed > 0 else None
        left = queued + len(running)
        remaining = None if rate is None else left / rate * 60
        return ProgressSnapshot(
            total=len(phases),
            queued=queued,
            reused=phases.count(CellPhase.REUSED),
            done=phases.count(CellPhase.DONE),
            failed=phases.count(CellPhase.FAILED),
            running=running,
            elapsed_s=elapsed,
            rate_per_min=rate,
            remaining_s=remaining,
        )

    def _changed(self) -> None:
        callback = self.on_change
        if callback is not None:
            callback(self.snapshot())


__all__ = ["CampaignProgress", "CellPhase", "ProgressSnapshot", "RunningCell", "where_it_runs"]
