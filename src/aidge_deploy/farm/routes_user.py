"""The user side of the REST API: health, token, boards, exports, jobs (submit, status,
events, result, bundle, log, cancel). Thin: each route validates its inputs with the
shared models (``models``) and calls the domain (``jobs``, ``jobviews``, ``boards``)."""

from __future__ import annotations

import os
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse

from aidge_deploy import __version__
from aidge_deploy.farm.actions import cancel, ingest_export, job_view, submit
from aidge_deploy.farm.auth import Principal, authenticate, issue_user_token
from aidge_deploy.farm.boards import board_views
from aidge_deploy.farm.deps import AddressDep, StateDep, UserDep
from aidge_deploy.farm.follow import follow_job
from aidge_deploy.farm.jobs import export_for, job_for
from aidge_deploy.farm.jobviews import list_job_views
from aidge_deploy.farm.models import (
    MAX_ID,
    BoardView,
    EventsPage,
    ExportView,
    Health,
    JobView,
    SubmitRequest,
    TokenAnswer,
    TokenRequest,
)
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.states import TERMINAL, JobState
from aidge_deploy.farm.store import StoredExport

router = APIRouter()

JobIdPath = Annotated[int, PathParam(ge=1, le=MAX_ID)]
ExportIdPath = Annotated[str, PathParam(pattern=r"^[0-9a-f]{64}$")]


@router.get("/health", tags=["service"])
def health(state: StateDep) -> Health:
    return Health(coordinator=state.dispatcher.coordinator_connected, version=str(__version__))


@router.post("/token", tags=["auth"])
def token(body: TokenRequest, address: AddressDep, state: StateDep) -> TokenAnswer:
    """A bearer token for a user's name and password. Failed attempts slow the next ones
    of the same address for that name down (HTTP 429 with ``Retry-After``)."""
    state.logins.check(body.username, address)
    with state.db.session() as s:
        user = authenticate(s, body.username, body.password)
        if user is None:
            state.logins.failed(body.username, address)
            raise FarmRequestError(
                401,
                "wrong username or password",
                "Check AIDGE_DEPLOY_API_PASSWORD (or ask a farm admin to reset it).",
            )
        value, expires = issue_user_token(s, user, body.expires_in)
    state.logins.succeeded(body.username, address)
    return TokenAnswer(access_token=value, expires_at=expires)


@router.get("/boards", tags=["boards"])
def boards(who: UserDep, state: StateDep) -> list[BoardView]:
    """Every board; a board whose labgrid place is locked from outside the farm is
    ``held``, with ``held_by`` naming who holds it."""
    with state.db.session() as s:
        return board_views(s, state.dispatcher.held_outside())


def _export_view(e: StoredExport) -> ExportView:
    return ExportView(
        id=e.content_hash,
        target=e.target,
        application=e.application,
        protocol=e.protocol,
        size=e.size,
    )


@router.post("/exports", tags=["exports"], status_code=201)
async def upload_export(request: Request, who: UserDep, state: StateDep) -> ExportView:
    """Upload an export as a ``.tar.gz`` request body (``Content-Type: application/gzip``).
    Refused with 413 past the farm's limits (the archive's size, then its size once
    uncompressed and its member count, checked while reading)."""
    store = state.store
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > store.max_upload_bytes:
        store.check_size(int(length))  # refused before reading the body
    fd, path = store.new_upload()
    try:
        written = 0
        try:
            async for chunk in request.stream():
                written = store.write_chunk(fd, written, chunk)
        finally:
            os.close(fd)
        name = request.headers.get("x-export-name", "")[:200]
        # in the thread pool: a database write on the event loop would stall every other
        # request while it waits for SQLite's write lock
        stored = await run_in_threadpool(ingest_export, state, path, who, name)
    finally:
        path.unlink(missing_ok=True)
    return _export_view(stored)


@router.get("/exports/{content_hash}", tags=["exports"])
def get_export(content_hash: ExportIdPath, who: UserDep, state: StateDep) -> ExportView:
    with state.db.session() as s:
        e = export_for(s, who, content_hash)
        return ExportView(
            id=e.hash, target=e.target, application=e.application, protocol=e.protocol, size=e.size
        )


@router.post("/jobs", tags=["jobs"], status_code=201, summary="Submit a job")
def submit_route(body: SubmitRequest, who: UserDep, state: StateDep) -> JobView:
    return submit(state, who, body)


@router.get("/jobs", tags=["jobs"])
def list_jobs(
    who: UserDep,
    state: StateDep,
    job_state: JobState | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[JobView]:
    with state.db.reading() as conn:
        return list_job_views(conn, who, job_state, limit)


@router.get("/jobs/{job_id}", tags=["jobs"])
async def get_job(job_id: JobIdPath, who: UserDep, state: StateDep) -> JobView:
    # the request clients poll: its one read is done on the loop when that is cheaper
    # than the hop to the thread pool (a third of the request's CPU on SQLite)
    if state.db.reads_are_quick:
        return job_view(state, who, job_id)
    return await run_in_threadpool(job_view, state, who, job_id)


@router.get("/jobs/{job_id}/events", tags=["jobs"])
async def job_events(
    job_id: JobIdPath,
    request: Request,
    who: UserDep,
    state: StateDep,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    wait: Annotated[float, Query(ge=0, le=3600, allow_inf_nan=False)] = 0.0,
) -> EventsPage:
    """Events after event id ``after``; waits up to ``wait`` s for one (long poll)."""
    return await follow_job(state, who, job_id, after=after, wait=wait, request=request)


def _file(state: FarmState, who: Principal, job_id: int, name: str, media: str) -> FileResponse:
    with state.db.session() as s:
        job_state = job_for(s, who, job_id).job_state
    path = state.job_dir(job_id) / name
    if not path.is_file():
        hint = (
            "The job has not finished yet."
            if job_state not in TERMINAL
            else "The job ended without producing it."
        )
        raise FarmRequestError(404, f"job {job_id} has no {name}", hint, state=job_state.value)
    return FileResponse(path, media_type=media, filename=f"job{job_id}-{name}")


@router.get("/jobs/{job_id}/result", tags=["jobs"])
def job_result(job_id: JobIdPath, who: UserDep, state: StateDep) -> FileResponse:
    return _file(state, who, job_id, "result.json", "application/json")


@router.get("/jobs/{job_id}/bundle", tags=["jobs"])
def job_bundle(job_id: JobIdPath, who: UserDep, state: StateDep) -> FileResponse:
    return _file(state, who, job_id, "bundle.tar.gz", "application/gzip")


@router.get("/jobs/{job_id}/log", tags=["jobs"])
def job_log(
    job_id: JobIdPath,
    who: UserDep,
    state: StateDep,
    attempt: Annotated[int | None, Query(ge=1, le=100)] = None,
) -> FileResponse:
    """The board host's logs of the job's current (or last) run, or of its earlier run
    ``attempt`` (one retried after an infrastructure failure)."""
    if attempt is not None:
        with state.db.session() as s:
            current = job_for(s, who, job_id).attempt
        if attempt != current:
            return _file(
                state, who, job_id, f"log.attempt-{attempt}.txt", "text/plain; charset=utf-8"
            )
    return _file(state, who, job_id, "log.txt", "text/plain; charset=utf-8")


@router.post("/jobs/{job_id}/cancel", tags=["jobs"], summary="Cancel a job")
def cancel_route(job_id: JobIdPath, who: UserDep, state: StateDep) -> JobView:
    """A waiting job is cancelled at once and never starts; a job on a board is stopped by
    its agent (``cancel_requested``, then ``cancelled``)."""
    return cancel(state, who, job_id)


__all__ = ["router"]
