"""The campaign folder: one folder per cell, keyed by content, plus the campaign's report.

Layout::

    DIR/campaign.json          the plan: models, targets, axes, every cell's key and folder
    DIR/cells/<cell>/cell.json the cell's record (written last: its presence means finished)
    DIR/cells/<cell>/bundle/   the cell's result bundle (summary.json, report.html, ...)
    DIR/cells/<cell>/logs/     the run's logs (export, build, captured output)
    DIR/report.html            the campaign report; cells.csv, cells.json: every cell's figures

One run writes a folder at a time: it holds ``.campaign.lock`` (``hold_folder``) and says who
it is in ``.campaign.owner.json``; a second run is refused with the holder's pid, and a run of
another campaign is refused a folder whose plan is not its own.

A cell folder is named after the cell and its key, so a cell whose model, options or target
changed is a new folder and an unchanged one is found again. ``cell.json`` is written
atomically after everything else: a cell killed half-way has none and runs again; a cell that
failed keeps its error and logs and is reported as failed (``retry_failed`` runs it again).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.campaign.plan import CELL_SCHEMA, CELL_SCHEMA_VERSION, CampaignPlan, Cell
from aidge_deploy.errors import ConfigError

if TYPE_CHECKING:
    from filelock import FileLock

PLAN_NAME = "campaign.json"
CELL_RECORD = "cell.json"
CELLS_DIR = "cells"
BUNDLE_DIR = "bundle"
LOGS_DIR = "logs"
PLAN_SCHEMA = "aidge-deploy/campaign"


class CellStatus(StrEnum):
    DONE = "done"
    FAILED = "failed"


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` to ``path`` through a private file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=2, sort_keys=False)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class CampaignFolder:
    root: Path

    def cell_dir(self, cell: Cell) -> Path:
        return self.root / CELLS_DIR / cell.id

    def record_path(self, cell: Cell) -> Path:
        return self.cell_dir(cell) / CELL_RECORD

    def read_record(self, cell: Cell) -> dict[str, Any] | None:
        """The finished cell's record, or None (never run, or stopped before its end)."""
        try:
            doc = json.loads(self.record_path(cell).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("schema") != CELL_SCHEMA:
            return None
        if doc.get("key") != cell.key or doc.get("status") not in {s.value for s in CellStatus}:
            return None
        return doc

    def start_cell(self, cell: Cell) -> Path:
        """A clean folder for a cell about to run (what an interrupted attempt left is
        removed: it never finished, so nothing in it is a result)."""
        folder = self.cell_dir(cell)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        return folder

    def finish_cell(self, cell: Cell, record: Mapping[str, Any]) -> None:
        write_json_atomic(self.record_path(cell), dict(record))

    def write_plan(self, plan: CampaignPlan) -> None:
        write_json_atomic(self.root / PLAN_NAME, plan_document(plan))

    def stale_cells(self, plan: CampaignPlan) -> list[Path]:
        """Cell folders of earlier plans that this plan does not have (left untouched)."""
        cells = self.root / CELLS_DIR
        if not cells.is_dir():
            return []
        current = {c.id for c in plan.cells}
        return sorted(p for p in cells.iterdir() if p.is_dir() and p.name not in current)


#: held by the one campaign run writing the folder (``filelock``: released by the operating
#: system when its process dies, so a killed run never leaves the folder locked)
LOCK_NAME = ".campaign.lock"
#: who holds the lock: pid, host, campaign, since when (what a refused run says)
OWNER_NAME = ".campaign.owner.json"


@dataclass
class FolderLease:
    """The folder held by one campaign run (``hold_folder``); ``release`` gives it back."""

    root: Path
    lock: FileLock

    def release(self) -> None:
        (self.root / OWNER_NAME).unlink(missing_ok=True)
        self.lock.release()


def _holder(root: Path) -> str:
    try:
        owner = json.loads((root / OWNER_NAME).read_text(encoding="utf-8"))
        return (
            f"campaign {owner['campaign']!r}, pid {owner['pid']} on {owner['host']}, "
            f"since {owner['since']}"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "a run that has not said who it is yet"


def hold_folder(root: Path, campaign: str) -> FolderLease:
    """Take the campaign folder ``root`` for the campaign ``campaign`` (``ConfigError`` when
    another run holds it, or when it is the folder of another campaign)."""
    from filelock import FileLock, Timeout

    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(root / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ConfigError(
            f"the campaign folder {root} is in use by another run ({_holder(root)})",
            hint="Wait for it to finish or stop it (one run writes a campaign folder at a "
            "time), or pass another --out.",
        ) from None
    try:
        other = _campaign_of(root)
        if other is not None and other != campaign:
            raise ConfigError(
                f"{root} is the folder of campaign {other!r}, not of {campaign!r}; refusing "
                "to run one campaign in another's folder",
                hint="Pass another --out (or the campaign's own name in its file).",
            )
        owner = {
            "campaign": campaign,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        write_json_atomic(root / OWNER_NAME, owner)
    except BaseException:
        lock.release()
        raise
    return FolderLease(root, lock)


def _campaign_of(root: Path) -> str | None:
    """The name of the campaign whose plan the folder holds (None: no plan yet)."""
    try:
        doc = json.loads((root / PLAN_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "(an unreadable campaign.json)"
    return str(doc.get("name")) if isinstance(doc, dict) else "(an unreadable campaign.json)"


def plan_document(plan: CampaignPlan) -> dict[str, Any]:
    return {
        "schema": PLAN_SCHEMA,
        "schema_version": 1,
        "name": plan.name,
        "source": None if plan.source is None else str(plan.source),
        "models": [
            {
                "name": m.name,
                "path": str(m.path),
                "kind": m.kind.value,
                "calibration": None if m.calibration is None else m.calibration.source,
                "dataset": None if m.dataset is None else m.dataset.source,
                "dataset_samples": None if m.dataset is None else len(m.dataset.arrays),
            }
            for m in plan.models
        ],
        "targets": [t.identity() | {"lane": t.lane.value} for t in plan.targets],
        "varying_options": list(plan.varying),
        "measure": plan.measure.model_dump(mode="json"),
        "cells": [
            {
                "id": c.id,
                "key": c.key,
                "model": c.model.name,
                "target": c.target.label,
                "options": c.options.as_dict(),
            }
            for c in plan.cells
        ],
    }


def cell_record_base(cell: Cell, plan: CampaignPlan) -> dict[str, Any]:
    """The fields every record of ``cell`` starts with (what the cell is)."""
    return {
        "schema": CELL_SCHEMA,
        "schema_version": CELL_SCHEMA_VERSION,
        "campaign": plan.name,
        "id": cell.id,
        "key": cell.key,
        "model": {
            "name": cell.model.name,
            "path": str(cell.model.path),
            "kind": cell.model.kind.value,
        },
        "target": {
            "label": cell.target.label,
            "target": cell.target.target,
            "reach": cell.target.reach.value,
            "board": cell.target.board,
        },
        "options": cell.options.as_dict(),
        "option_label": cell.options.label(plan.varying),
    }


__all__ = [
    "BUNDLE_DIR",
    "CELLS_DIR",
    "CELL_RECORD",
    "LOGS_DIR",
    "PLAN_NAME",
    "CampaignFolder",
    "CellStatus",
    "FolderLease",
    "cell_record_base",
    "hold_folder",
    "plan_document",
    "write_json_atomic",
]
