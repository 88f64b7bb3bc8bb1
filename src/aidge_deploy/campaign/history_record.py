"""A campaign's cells in the results history: one record per finished cell.

Why this module exists: a campaign's figures join the same history as the pytest plugin's
and ``profile``'s runs, so a model's latency on a board can be followed across commits
whichever tool measured it. A cell is recorded from its own result bundle, as it finishes
(a campaign stopped half-way has recorded what it finished), under the identity of what it
measured: the model (with the export options that are not the defaults), the target and
board, its dtype and iterations. A failed cell measured nothing: it is not recorded.
"""

from __future__ import annotations

import threading
from pathlib import Path

from aidge_deploy.campaign.cell import CellOutcome
from aidge_deploy.campaign.folder import BUNDLE_DIR, CampaignFolder, CellStatus
from aidge_deploy.campaign.plan import CampaignPlan, Cell
from aidge_deploy.modelexport import Heuristic

SOURCE = "campaign"


def identity_name(cell: Cell, name: str | None = None) -> str:
    """``name``, else the model's file name (as ``profile --history`` names its runs), with
    the export options a series must not mix."""
    name = name or cell.model.path.name
    if cell.options.heuristic not in (None, Heuristic.NB_OP):
        name += f" heuristic={cell.options.heuristic}"
    if cell.options.mem_wrap:
        name += " mem_wrap"
    return name


class CellHistory:
    """Records finished cells into a ``HistoryStore`` (thread-safe: cells finish in the
    threads that ran them)."""

    def __init__(
        self,
        location: str | Path,
        plan: CampaignPlan,
        folder: CampaignFolder,
        *,
        name: str | None = None,
    ) -> None:
        from aidge_deploy.history import HistoryStore

        self.store = HistoryStore(location)
        self.name = name
        self.plan = plan
        self.folder = folder
        self._lock = threading.Lock()
        self.recorded: list[int] = []

    def record(self, cell: Cell, outcome: CellOutcome) -> None:
        if outcome.status is not CellStatus.DONE:
            return
        from aidge_deploy.history import RunIdentity

        record = outcome.record
        farm = record.get("farm") or {}
        board = farm.get("board") or cell.target.board
        identity = RunIdentity(
            identity_name(cell, self.name),
            cell.target.target,
            board,
            "benchmark",
            cell.options.dtype.value,
            cell.options.iterations,
        )
        project = self.plan.source.parent if self.plan.source is not None else None
        with self._lock:
            entry = self.store.record(
                self.folder.cell_dir(cell) / BUNDLE_DIR,
                identity,
                board=board,
                source=SOURCE,
                project_dir=project,
            )
            self.recorded.append(entry.id)

    def close(self) -> None:
        self.store.close()


__all__ = ["SOURCE", "CellHistory", "identity_name"]
