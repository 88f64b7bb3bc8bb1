"""The user side of the REST API: token, boards, exports, jobs (submit, status, events,
result, bundle, log, cancel)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from sqlalchemy import select

from aidge_deploy.errors import DeployError
from aidge_deploy.farm.auth import Principal, authenticate, issue_user_token
from aidge_deploy.farm.db import Job, JobEvent
from aidge_deploy.farm.jobs import (
    FarmRequestError,
    QueuePositions,
    board_views,
    export_for,
    job_events_page,
    job_for,
    job_status,
    job_view,
    record_export,
    resolve_board,
    set_state,
)
from aidge_deploy.farm.service import FarmState, StateDep, UserDep
from aidge_deploy.farm.states import TERMINAL, JobState
from aidge_deploy.farm.store import StoredExport

router = APIRouter()


class TokenRequest(BaseModel):
    username: str = Field(max_length=64)
    password: str = Field(max_length=1024)
    #: seconds; capped by the service (default 12 h)
    expires_in: float | None = Field(default=None, gt=0)


class SubmitRequest(BaseModel):
    export: str = Field(min_length=64, max_length=64)
    board: str | None = Field(default=None, max_length=64)
    target: str | None = Field(default=None, max_length=64)
    config: dict[str, Any] = Field(default_factory=dict)
    priority: float = Field(default=0.0, ge=-100, le=100)


@router.get("/health", tags=["service"])
def health(state: StateDep) -> dict[str, Any]:
    return {"status": "ok", "coordinator": state.dispatcher.coordinator_connected}


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.post("/token", tags=["auth"])
def token(body: TokenRequest, request: Request, state: StateDep) -> dict[str, Any]:
    """A bearer token for a user's name and password (failed attempts are rate limited:
    HTTP 429 with ``Retry-After``)."""
    address = client_address(request)
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
    return {"access_token": value, "token_type": "bearer", "expires_at": expires}


@router.get("/boards", tags=["boards"])
def boards(who: UserDep, state: StateDep) -> list[dict[str, Any]]:
    with state.db.session() as s:
        return [b.as_dict() for b in board_views(s)]


def _ingest_export(state: FarmState, path: Path, who: Principal, name: str) -> StoredExport:
    """Check and store an uploaded archive, and record it for ``who``."""
    stored = state.store.ingest(path)
    with state.db.session() as s:
        record_export(s, stored, who, name)
    return stored


@router.post("/exports", tags=["exports"], status_code=201)
async def upload_export(request: Request, who: UserDep, state: StateDep) -> dict[str, Any]:
    """Upload an export as a ``.tar.gz`` request body (``Content-Type: application/gzip``)."""
    store = state.store
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > store.max_upload_bytes:
        store.check_size(int(length))  # refused before reading the body
    fd, tmp = store.new_upload()
    path = Path(tmp)
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
        stored = await run_in_threadpool(_ingest_export, state, path, who, name)
    finally:
        path.unlink(missing_ok=True)
    return {
        "id": stored.content_hash,
        "target": stored.target,
        "application": stored.application,
        "protocol": stored.protocol,
        "size": stored.size,
    }


@router.get("/exports/{content_hash}", tags=["exports"])
def get_export(content_hash: str, who: UserDep, state: StateDep) -> dict[str, Any]:
    with state.db.session() as s:
        e = export_for(s, who, content_hash)
        return {
            "id": e.hash,
            "target": e.target,
            "application": e.application,
            "protocol": e.protocol,
            "size": e.size,
        }


@router.post("/jobs", tags=["jobs"], status_code=201)
def submit(body: SubmitRequest, who: UserDep, state: StateDep) -> dict[str, Any]:
    from aidge_deploy.farm.jobconfig import decode_config

    try:
        values = decode_config(body.config)
    except DeployError as exc:
        raise FarmRequestError(400, exc.message, exc.hint or "") from None
    with state.db.session() as s:
        export = export_for(s, who, body.export)
        target = resolve_board(s, body.board, body.target, export)
        _check_counters(values, target)
        job = Job(
            user_id=who.user_id,
            export_hash=export.hash,
            target=target,
            requested_board=body.board,
            priority=body.priority,
            config_json=json.dumps(body.config),
            state=JobState.QUEUED.value,
        )
        s.add(job)
        s.flush()
        s.add(JobEvent(job_id=job.id, at=job.queued_at, kind="state", state="queued"))
        view = job_view(s, job)
    state.dispatcher.wake()
    return view


def _check_counters(values: dict[str, Any], target: str) -> None:
    """Counters the board's target cannot count fail at submit time, not on the board."""
    counters = values.get("counters")
    if not counters:
        return
    from aidge_deploy.profiling.capability import check_counter_request
    from aidge_deploy.registry import get_deploy_target_class

    try:
        cls = get_deploy_target_class(target, "local")
        check_counter_request(tuple(counters), cls, target, "local")
    except DeployError as exc:
        raise FarmRequestError(400, exc.message, exc.hint or "") from None


@router.get("/jobs", tags=["jobs"])
def list_jobs(
    who: UserDep, state: StateDep, job_state: str | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    with state.db.session() as s:
        q = select(Job).order_by(Job.id.desc()).limit(max(1, min(limit, 1000)))
        if not who.is_admin:
            q = q.where(Job.user_id == who.user_id)
        if job_state:
            q = q.where(Job.state == job_state)
        queue = QueuePositions(s)
        return [job_view(s, j, queue=queue) for j in s.scalars(q)]


def _job_status(state: FarmState, who: Principal, job_id: int) -> dict[str, Any]:
    with state.db.reading() as conn:
        return job_status(conn, who, job_id)


@router.get("/jobs/{job_id}", tags=["jobs"])
async def get_job(job_id: int, who: UserDep, state: StateDep) -> dict[str, Any]:
    # the request clients poll: its one read is done on the loop when that is cheaper
    # than the hop to the thread pool (a third of the request's CPU on SQLite)
    if state.db.reads_are_quick:
        return _job_status(state, who, job_id)
    return await run_in_threadpool(_job_status, state, who, job_id)


def read_events_page(state: FarmState, who: Principal, job_id: int, after: int) -> dict[str, Any]:
    with state.db.reading() as conn:
        return job_events_page(conn, who, job_id, after)


async def follow_job(
    state: FarmState,
    who: Principal,
    job_id: int,
    *,
    after: int,
    wait: float,
    request: Request | None = None,
    changed: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """The job and its events after event id ``after`` (``jobs.job_events_page``), waiting
    up to ``wait`` s (capped by ``long_poll_max``) until there is one, the job has ended,
    or ``changed()`` (run in the thread pool) says something else the caller shows
    changed. Stops waiting as soon as the client of ``request`` is gone. The one long poll
    of a job: the REST API's events and the job page's progress."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, min(wait, state.settings.long_poll_max))
    while True:
        page = await run_in_threadpool(read_events_page, state, who, job_id, after)
        remaining = deadline - loop.time()
        if page["events"] or remaining <= 0 or JobState(page["job"]["state"]) in TERMINAL:
            return page
        if changed is not None and await run_in_threadpool(changed):
            return page
        if request is not None and await request.is_disconnected():
            return page
        await state.notifier.wait(f"job:{job_id}", remaining)


@router.get("/jobs/{job_id}/events", tags=["jobs"])
async def job_events(
    job_id: int, request: Request, who: UserDep, state: StateDep, after: int = 0, wait: float = 0.0
) -> dict[str, Any]:
    """Events after event id ``after``; waits up to ``wait`` s for one (long poll)."""
    return await follow_job(state, who, job_id, after=after, wait=wait, request=request)


def _file(state: Any, who: Any, job_id: int, name: str, media: str) -> FileResponse:
    with state.db.session() as s:
        job = job_for(s, who, job_id)
        job_state = job.job_state
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
def job_result(job_id: int, who: UserDep, state: StateDep) -> FileResponse:
    return _file(state, who, job_id, "result.json", "application/json")


@router.get("/jobs/{job_id}/bundle", tags=["jobs"])
def job_bundle(job_id: int, who: UserDep, state: StateDep) -> FileResponse:
    return _file(state, who, job_id, "bundle.tar.gz", "application/gzip")


@router.get("/jobs/{job_id}/log", tags=["jobs"])
def job_log(job_id: int, who: UserDep, state: StateDep) -> FileResponse:
    return _file(state, who, job_id, "log.txt", "text/plain; charset=utf-8")


@router.post("/jobs/{job_id}/cancel", tags=["jobs"])
def cancel(job_id: int, who: UserDep, state: StateDep) -> dict[str, Any]:
    with state.db.session() as s:
        job = job_for(s, who, job_id)
        current = job.job_state
        if current in TERMINAL:
            return job_view(s, job)
        if current in (JobState.QUEUED, JobState.RESERVED):
            set_state(s, job, JobState.CANCELLED, f"cancelled by {who.name}")
            state.dispatcher.release_later(job.token, None)
        else:  # on a board: the agent stops the run and reports
            job.cancel_requested = True
            from aidge_deploy.farm.jobs import add_event

            add_event(s, job, "notice", f"cancel requested by {who.name}")
        view = job_view(s, job)
        agent = job.agent_name
    state.notifier.notify(f"job:{job_id}", f"agent:{agent}")
    return view
