"""``/campaigns``: the farm cells of each campaign, as the campaign's live view shows them.

A campaign (``aidge-deploy campaign``, ``profile --targets``) tags each farm job it submits
with the campaign, the cell and the job's step in the cell (``db.CampaignJob``): a cell
validated on a labelled set is two farm jobs, its run and then its accuracy run, and a cell
run again (the campaign re-run after a crash) has the jobs of each attempt. ``/campaigns``
counts cells, not jobs — a cell is where its latest job is, and done once its last step is
— queued, running, done and failed, the rate at which they finish and the time left at that
rate: what the campaign's terminal view shows for its farm cells. ``/campaigns/{id}``
lists its jobs: cell, step, state, board, stage, times, each a link to its job.
A user sees their own campaigns, an admin all; a page with cells still to finish reloads
itself (no script: the pages' Content-Security-Policy allows none inline).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from sqlalchemy import select

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import CampaignJob, Job, User
from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.refusals import not_found
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.states import ON_BOARD, WAITING, JobState
from aidge_deploy.farm.web.params import CampaignPath
from aidge_deploy.farm.web.session import PageUser
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)
#: seconds between two reloads of a page whose campaign still has cells to finish
REFRESH_S = 5


@dataclass(frozen=True)
class CellRow:
    """One farm job of a cell."""

    job: int
    cell: str
    state: str
    stage: str
    board: str | None
    queued_at: float | None
    finished_at: float | None
    step: int = 1
    steps: int = 1


class CellPhase(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


def cell_phase(latest: CellRow) -> CellPhase:
    """Where a cell is, from its latest job: a done job that is not the cell's last step
    leaves the cell running (its client prepares the next step)."""
    state = JobState(latest.state)
    if state in WAITING:
        return CellPhase.QUEUED
    if state in ON_BOARD:
        return CellPhase.RUNNING
    if state is JobState.DONE:
        return CellPhase.DONE if latest.step >= latest.steps else CellPhase.RUNNING
    return CellPhase.FAILED


@dataclass
class CampaignRow:
    id: str
    name: str
    user: str
    #: the campaign's farm cells, as its client counted them (some may not be submitted yet)
    cells: int
    #: cells with a job, by the phase of their latest job
    queued: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    started: float | None = None
    last: float | None = None
    #: farm cells finished per minute, and the time left at that rate (None: none yet)
    rate_per_min: float | None = None
    remaining_s: float | None = None
    rows: list[CellRow] = field(default_factory=list)

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def active(self) -> bool:
        return self.finished < self.cells

    @property
    def boards(self) -> list[str]:
        """The boards running a cell now."""
        return sorted({r.board for r in self.rows if r.board and JobState(r.state) in ON_BOARD})


def _finished_at(job: Job) -> float | None:
    return job.done_at or job.failed_at or job.cancelled_at


def campaigns(state: FarmState, who: Principal, campaign: str | None = None) -> list[CampaignRow]:
    """The campaigns ``who`` may see (one, with ``campaign``), newest first."""
    query = (
        select(CampaignJob, Job, User.name)
        .join(Job, Job.id == CampaignJob.job_id)
        .join(User, User.id == Job.user_id)
        .order_by(Job.id)
    )
    if not who.is_admin:
        query = query.where(Job.user_id == who.user_id)
    if campaign is not None:
        query = query.where(CampaignJob.campaign == campaign)
    found: dict[tuple[str, str], CampaignRow] = {}
    with state.db.session() as s:
        for tag, job, user in s.execute(query).all():
            row = found.setdefault(
                (tag.campaign, user), CampaignRow(tag.campaign, tag.name, user, tag.cells)
            )
            row.cells = max(row.cells, tag.cells)
            row.started = min(filter(None, (row.started, job.queued_at)), default=None)
            row.rows.append(
                CellRow(
                    job=job.id,
                    cell=tag.cell,
                    state=job.state,
                    stage=job.stage,
                    board=job.board,
                    queued_at=job.queued_at,
                    finished_at=_finished_at(job),
                    step=tag.step,
                    steps=tag.steps,
                )
            )
    rows = list(found.values())
    for row in rows:
        _count(row)
        _rate(row)
    return sorted(rows, key=lambda r: -(r.started or 0))


def _count(row: CampaignRow) -> None:
    """The campaign's cells by the phase of their latest job (``row.rows`` in job order);
    ``last``: when its last finished cell finished."""
    latest: dict[str, CellRow] = {}
    for job in row.rows:
        latest[job.cell] = job
    phases = {cell: cell_phase(job) for cell, job in latest.items()}
    counts = Counter(phases.values())
    row.queued, row.running = counts[CellPhase.QUEUED], counts[CellPhase.RUNNING]
    row.done, row.failed = counts[CellPhase.DONE], counts[CellPhase.FAILED]
    ends = [
        latest[cell].finished_at
        for cell, phase in phases.items()
        if phase in (CellPhase.DONE, CellPhase.FAILED)
    ]
    row.last = max(filter(None, ends), default=None)


def _rate(row: CampaignRow) -> None:
    """Cells finished per minute since the first was queued; the time left at that rate."""
    if not row.finished or row.started is None:
        return
    end = row.last if not row.active else time.time()
    elapsed = max(1e-3, (end or time.time()) - row.started)
    row.rate_per_min = row.finished / elapsed * 60
    left = max(0, row.cells - row.finished)
    row.remaining_s = left / row.rate_per_min * 60 if left else 0.0


@router.get("/campaigns")
async def campaigns_page(request: Request, who: PageUser, state: StateDep) -> HTMLResponse:
    rows = await run_in_threadpool(campaigns, state, who)
    refresh = REFRESH_S if any(r.active for r in rows) else None
    return render(request, "campaigns.html", who, rows=rows, campaign=None, refresh=refresh)


@router.get("/campaigns/{campaign_id}")
async def campaign_page(
    campaign_id: CampaignPath, request: Request, who: PageUser, state: StateDep
) -> HTMLResponse:
    rows = await run_in_threadpool(campaigns, state, who, campaign_id)
    if not rows:
        raise not_found("campaign", campaign_id)
    refresh = REFRESH_S if any(r.active for r in rows) else None
    context: dict[str, Any] = {"rows": rows, "campaign": rows[0], "refresh": refresh}
    return render(request, "campaigns.html", who, **context)


__all__ = ["REFRESH_S", "CampaignRow", "CellPhase", "CellRow", "campaigns", "cell_phase", "router"]
