"""Running a campaign: the cells still missing, side by side where they can be, then its report.

Why this module exists: a campaign is interrupted, extended and re-run. Each run here finds
the cells the folder already holds a record for (by key) and runs only the others, each under
its own ``RunControl`` so that Ctrl-C (or one cell's caller cancelling) stops every running
cell's processes and leaves no record for them; a failed cell records its error and the
others go on. Whatever happened, the campaign's report is written from the records there
are, so a stopped campaign still shows what it measured.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.campaign.cell import CellOutcome, run_cell
from aidge_deploy.campaign.folder import (
    CampaignFolder,
    CellStatus,
    FolderLease,
    cell_record_base,
    hold_folder,
    plan_document,
    write_json_atomic,
)
from aidge_deploy.campaign.plan import CampaignPlan, Cell

if TYPE_CHECKING:
    from aidge_deploy.campaign.history_record import CellHistory
from aidge_deploy.campaign.progress import CampaignProgress
from aidge_deploy.errors import ConfigError
from aidge_deploy.runcontrol import RunControl, RunInterrupted, shielded

REPORT_HTML = "report.html"
CELLS_CSV = "cells.csv"
CELLS_JSON = "cells.json"


@dataclass
class CampaignResult:
    plan: CampaignPlan
    folder: Path
    records: list[dict[str, Any]]
    #: cells run by this call, and cells whose earlier record was kept
    ran: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    interrupted: RunInterrupted | None = None
    #: ids of the results-history records this run added (one per cell it finished)
    history_records: list[int] = field(default_factory=list)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("status") == CellStatus.FAILED]

    @property
    def missing(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("status") is None]

    @property
    def report(self) -> Path:
        return self.folder / REPORT_HTML


def _reference_accuracies(plan: CampaignPlan) -> dict[str, float]:
    """Each labelled model's own accuracy (the ONNX model run by the reference engine)."""
    from aidge_deploy.validation.accuracy import reference_accuracy
    from aidge_deploy.validation.matrix import reference_engine

    out: dict[str, float] = {}
    engine = reference_engine()
    for model in plan.models:
        if model.dataset is not None and model.kind.value == "onnx":
            out[model.name] = reference_accuracy(
                model.path, model.dataset.arrays, model.dataset.labels, engine
            )
    return out


class CampaignRun:
    """One run of a campaign into its folder: which cells it keeps, which it runs.

    The cells the folder holds a record for (by key) are kept — failed ones too, unless
    ``retry_failed`` — and the others run. ``progress`` is the live state to show. Each cell
    that finishes is recorded in the results history ``history`` (a SQLite file or a
    database URL; None: none), under ``history_name`` (default: each model's file name).
    """

    def __init__(
        self,
        plan: CampaignPlan,
        root: Path,
        *,
        retry_failed: bool = False,
        history: str | Path | None = None,
        history_name: str | None = None,
    ) -> None:
        self.plan = plan
        self.root = root
        self.history = history
        self.history_name = history_name
        self.folder = CampaignFolder(root)
        # held from here to the end of ``run``: the records read next stay true
        self.lease: FolderLease | None = hold_folder(root, plan.name)
        self.records: dict[str, dict[str, Any]] = {}
        self.pending: list[Cell] = []
        for cell in plan.cells:
            record = self.folder.read_record(cell)
            if record is not None and (record["status"] == CellStatus.DONE or not retry_failed):
                self.records[cell.id] = record
            else:
                self.pending.append(cell)
        labels = {c.id: c.options.label(plan.varying) for c in plan.cells}
        self.progress = CampaignProgress(list(plan.cells), set(self.records), labels)

    def run(self, control: RunControl | None = None) -> CampaignResult:
        """Run the pending cells; write the report whatever happens.

        ``control`` (the command's) cancels every running cell when cancelled; the result
        then carries ``interrupted`` (the report is written all the same) and the caller
        re-raises or exits.
        """
        try:
            return self._run(control)
        finally:
            self.release()

    def release(self) -> None:
        """Give the folder back (``run`` does; a run that is not run again should too)."""
        if self.lease is not None:
            self.lease.release()
            self.lease = None

    def _run(self, control: RunControl | None) -> CampaignResult:
        if self.lease is None:
            raise ConfigError(
                f"this run of {self.plan.name} already ran and gave its folder back",
                hint="Make a new CampaignRun to run the campaign again.",
            )
        plan, root = self.plan, self.root
        root.mkdir(parents=True, exist_ok=True)
        self.folder.write_plan(plan)
        result = CampaignResult(plan, root, [], reused=list(self.records))
        references = _reference_accuracies(plan) if self.pending else {}
        control = control or RunControl()
        records = dict(self.records)
        history = None
        if self.history is not None and self.pending:
            from aidge_deploy.campaign.history_record import CellHistory

            history = CellHistory(self.history, plan, self.folder, name=self.history_name)
        try:
            for outcome in execute_cells(
                self.pending, plan, self.folder, self.progress, control, references, history
            ):
                records[outcome.cell.id] = outcome.record
                result.ran.append(outcome.cell.id)
        except RunInterrupted as exc:
            result.interrupted = exc  # every running cell was stopped, none recorded
        finally:
            with shielded():
                if history is not None:
                    result.history_records = list(history.recorded)
                    history.close()
                for cell in self.pending:
                    record = self.folder.read_record(cell)
                    if record is not None:  # finished before the interruption
                        records[cell.id] = record
                        if cell.id not in result.ran:
                            result.ran.append(cell.id)
                result.records = [
                    records.get(c.id) or {**cell_record_base(c, plan), "status": None}
                    for c in plan.cells
                ]
                write_report(plan, root, result.records)
        return result


def run_campaign(
    plan: CampaignPlan,
    root: Path,
    *,
    retry_failed: bool = False,
    history: str | Path | None = None,
    control: RunControl | None = None,
) -> CampaignResult:
    """Run the cells of ``plan`` that ``root`` holds no record for; write the report."""
    return CampaignRun(plan, root, retry_failed=retry_failed, history=history).run(control)


def execute_cells(
    cells: Sequence[Cell],
    plan: CampaignPlan,
    folder: CampaignFolder,
    progress: CampaignProgress,
    control: RunControl,
    references: dict[str, float],
    history: CellHistory | None = None,
) -> list[CellOutcome]:
    """Run ``cells`` by their targets' lanes (``multitarget``): emulated boards up to
    ``run.jobs`` at once, farm cells as concurrent farm jobs, a physical board's cells one
    at a time, host benchmarks alone. Cancelling ``control`` stops them all."""
    from aidge_deploy.multitarget import TargetJob, run_targets

    def job(cell: Cell) -> TargetJob[CellOutcome]:
        def run(cell_control: RunControl) -> CellOutcome:
            progress.start(cell)
            try:
                with _board_lease(cell):
                    outcome = run_cell(
                        cell,
                        plan,
                        folder,
                        control=cell_control,
                        progress=progress.activity,
                        reference_accuracy=references.get(cell.model.name),
                    )
            except BaseException:
                progress.requeue(cell)
                raise
            if history is not None:
                history.record(cell, outcome)
            progress.finish(cell, failed=outcome.status is CellStatus.FAILED)
            return outcome

        return TargetJob(cell.id, run, cell.target.lane, cell.target.resource)

    outcomes = run_targets(
        [job(c) for c in cells],
        workers=plan.run.jobs,
        remote_workers=plan.run.farm_jobs,
        control=control,
    )
    done = []
    for outcome in outcomes:
        if isinstance(outcome.error, RunInterrupted):
            raise outcome.error
        if outcome.error is not None:  # run_cell records every Exception: this is a bug
            raise outcome.error
        if outcome.value is not None:
            done.append(outcome.value)
    return done


@contextlib.contextmanager
def _board_lease(cell: Cell) -> Iterator[None]:
    """A lab's physical board is held machine-wide while its cell runs (the lock the pytest
    plugin's runs and other campaigns take too)."""
    board = cell.target.lab_board
    if board is None or cell.target.resource is None:
        yield
        return
    from aidge_deploy.testing.locks import lease

    held = lease([board], timeout_s=600.0)
    try:
        yield
    finally:
        held.release()


def write_report(plan: CampaignPlan, root: Path, records: Sequence[dict[str, Any]]) -> None:
    """``report.html``, ``cells.csv`` and ``cells.json`` from the cells' records."""
    from aidge_deploy.campaign.html import render_campaign_html
    from aidge_deploy.campaign.tables import cells_csv, cells_json

    doc = plan_document(plan)
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    write_json_atomic(root / CELLS_JSON, cells_json(doc, records))
    _write_text(root / CELLS_CSV, cells_csv(records))
    _write_text(root / REPORT_HTML, render_campaign_html(doc, records, generated=generated))


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


__all__ = [
    "CELLS_CSV",
    "CELLS_JSON",
    "REPORT_HTML",
    "CampaignResult",
    "CampaignRun",
    "run_campaign",
    "write_report",
]
