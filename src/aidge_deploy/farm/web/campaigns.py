"""``/campaigns``: the farm cells of each campaign, as the campaign's live view shows them.

A campaign (``aidge-deploy campaign``, ``profile --targets``) tags each farm job it submits
with the campaign and the cell (``db.CampaignJob``). ``/campaigns`` lists the campaigns:
their farm cells queued, running, done and failed, the rate at which they finish and the
time left at that rate — what the campaign's terminal view shows for its farm cells.
``/campaigns/{id}`` lists its cells: state, board, stage, times, each a link to its job.
A user sees their own campaigns, an admin all; a page with cells still to finish reloads
itself (no script: the pages' Content-Security-Policy allows none inline).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
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
from aidge_deploy.farm.states import ON_BOARD, TERMINAL, WAITING, JobState
from aidge_deploy.farm.web.session import PageUser
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)
#: seconds between two reloads of a page whose campaign still has cells to finish
REFRESH_S = 5


@dataclass(frozen=True)
class CellRow:
    job: int
    cell: str
    state: str
    stage: str
    board: str | None
    queued_at: float | None
    finished_at: float | None


@dataclass
class CampaignRow:
    id: str
    name: str
    user: str
    #: the campaign's farm cells, as its client counted them (some may not be submitted yet)
    cells: int
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
            job_state = JobState(job.state)
            if job_state in WAITING:
                row.queued += 1
            elif job_state in ON_BOARD:
                row.running += 1
            elif job_state is JobState.DONE:
                row.done += 1
            elif job_state in TERMINAL:
                row.failed += 1
            end = _finished_at(job)
            row.started = min(filter(None, (row.started, job.queued_at)), default=None)
            row.last = max(filter(None, (row.last, end)), default=None)
            row.rows.append(
                CellRow(job.id, tag.cell, job.state, job.stage, job.board, job.queued_at, end)
            )
    rows = list(found.values())
    for row in rows:
        _rate(row)
    return sorted(rows, key=lambda r: -(r.started or 0))


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
    campaign_id: str, request: Request, who: PageUser, state: StateDep
) -> HTMLResponse:
    rows = await run_in_threadpool(campaigns, state, who, campaign_id[:100])
    if not rows:
        raise not_found("campaign", campaign_id[:100])
    refresh = REFRESH_S if any(r.active for r in rows) else None
    context: dict[str, Any] = {"rows": rows, "campaign": rows[0], "refresh": refresh}
    return render(request, "campaigns.html", who, **context)


__all__ = ["REFRESH_S", "CampaignRow", "CellRow", "campaigns", "router"]
