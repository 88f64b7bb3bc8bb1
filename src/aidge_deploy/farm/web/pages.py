"""``/boards`` (live) and ``/jobs`` (queue and history, filters, cancel)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from aidge_deploy.farm.actions import cancel
from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.states import JobState
from aidge_deploy.farm.web.forms import NextForm, read_form
from aidge_deploy.farm.web.params import JobIdPath, JobIdQuery, NameQuery
from aidge_deploy.farm.web.queries import (
    HEALTH_WINDOW,
    JobFilters,
    board_rows,
    filter_choices,
    list_jobs,
)
from aidge_deploy.farm.web.session import PageUser, local_path
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)

#: how often the boards page asks for fresh rows (ms)
BOARDS_REFRESH_MS = 1500


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/boards", status_code=303)


@router.get("/boards")
def boards_page(request: Request, who: PageUser, state: StateDep) -> HTMLResponse:
    with state.db.session() as s:
        rows = [r.as_dict(who) for r in board_rows(s, state.dispatcher.held_outside())]
    return render(
        request,
        "boards.html",
        who,
        boards=rows,
        window=HEALTH_WINDOW,
        refresh_ms=BOARDS_REFRESH_MS,
    )


@router.get("/boards/data")
def boards_data(who: PageUser, state: StateDep) -> dict[str, Any]:
    """The boards page's live rows (JSON, read with the session cookie)."""
    with state.db.session() as s:
        return {
            "boards": [r.as_dict(who) for r in board_rows(s, state.dispatcher.held_outside())],
            "coordinator": state.dispatcher.coordinator_connected,
        }


@router.get("/jobs")
def jobs_page(
    request: Request,
    who: PageUser,
    state: StateDep,
    user: NameQuery = "",
    board: NameQuery = "",
    target: NameQuery = "",
    job_state: NameQuery = "",
    before: JobIdQuery = None,
) -> HTMLResponse:
    filters = JobFilters(
        user=user if who.is_admin else "",
        board=board,
        target=target,
        state=job_state if job_state in {s.value for s in JobState} else "",
    )
    with state.db.session() as s:
        rows = list_jobs(s, who, filters, before=before)
        choices = filter_choices(s, who)
    older = rows[-1].id if len(rows) == 100 else None
    return render(
        request,
        "jobs.html",
        who,
        jobs=rows,
        filters=filters,
        choices=choices,
        older=older,
        here=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
    )


@router.post("/jobs/{job_id}/cancel")
async def cancel_job(
    job_id: JobIdPath, request: Request, who: PageUser, state: StateDep
) -> Response:
    """Cancel a job (its owner or an admin): the API's own cancel, behind a CSRF check."""
    form = await read_form(request, NextForm, max_fields=5, max_part_size=2048)
    await run_in_threadpool(cancel, state, who, job_id)
    back = local_path(form.next, default=f"/jobs/{job_id}")
    return RedirectResponse(back, status_code=303)


__all__ = ["router"]
