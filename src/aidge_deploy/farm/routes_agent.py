"""The agent side of the REST API: register boards, heartbeat, take jobs, report them.
Thin: inputs validated by the shared models, the work done by ``agents``."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse
from sqlalchemy import select

from aidge_deploy.farm.agents import (
    cancels,
    check_own_job,
    claim_job,
    finish_job,
    heartbeat_answer,
    offers,
    register_agent,
    report_events,
    touch_agent,
)
from aidge_deploy.farm.db import ExportRecord, Job
from aidge_deploy.farm.deps import AgentDep, StateDep
from aidge_deploy.farm.fields import JobId
from aidge_deploy.farm.health import known_boards
from aidge_deploy.farm.jobhistory import record_job
from aidge_deploy.farm.models import (
    MAX_ID,
    ClaimAnswer,
    EventsAnswer,
    EventsRequest,
    FinishAnswer,
    FinishRequest,
    Heartbeat,
    HeartbeatAnswer,
    PollAnswer,
    RegisterAnswer,
    RegisterRequest,
    UploadAnswer,
)
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.states import JobState

router = APIRouter(prefix="/agent", tags=["agents"])

RESULT_FILES = ("result.json", "bundle.tar.gz", "log.txt")
MAX_RESULT_BYTES = 512 * 1024 * 1024
JobIdPath = Annotated[int, PathParam(ge=1, le=MAX_ID)]


@router.post("/register")
def register(body: RegisterRequest, who: AgentDep, state: StateDep) -> RegisterAnswer:
    """An agent (re)starting: its boards become farm boards (labgrid places)."""
    with state.db.session() as s:
        restarted = known_boards(s, [b.name for b in body.boards])
        freed = register_agent(s, who, body, retries=state.settings.job_retries)
    state.health.request(restarted, "agent restart")  # a golden run on each (farm.health)
    state.dispatcher.release_later(*freed)
    state.dispatcher.boards_changed()
    return RegisterAnswer(
        coordinator=state.settings.agent_coordinator or state.settings.coordinator,
        farm=state.settings.farm_name,
        heartbeat_interval=state.settings.heartbeat_interval,
    )


def _touch(state: FarmState, name: str) -> None:
    with state.db.session() as s:
        came_back = touch_agent(s, name)
    if came_back:
        state.dispatcher.boards_changed()


@router.post("/heartbeat")
def heartbeat(body: Heartbeat, who: AgentDep, state: StateDep) -> HeartbeatAnswer:
    _touch(state, who.name)
    with state.db.session() as s:
        cancel, stop = heartbeat_answer(s, who.name, body.running)
    return HeartbeatAnswer(cancel=cancel, stop=stop)


def _offers(state: FarmState, agent: str, skip: list[int], stopping: list[int]) -> PollAnswer:
    with state.db.session() as s:
        return PollAnswer(jobs=offers(s, agent, skip), cancel=cancels(s, agent, skip, stopping))


@router.post("/poll")
async def poll(
    request: Request,
    who: AgentDep,
    state: StateDep,
    wait: Annotated[float, Query(ge=0, le=3600, allow_inf_nan=False)] = 20.0,
    skip: Annotated[list[JobId], Query(max_length=1000)] = [],  # noqa: B006 - FastAPI copies it
    stopping: Annotated[list[JobId], Query(max_length=1000)] = [],  # noqa: B006
) -> PollAnswer:
    """Jobs reserved on this agent's boards, but those in ``skip`` (the agent runs them
    already), and those it runs that their owner cancelled (but those it is ``stopping``
    already); waits up to ``wait`` s for either (less if the agent goes away)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(wait, state.settings.long_poll_max)
    await run_in_threadpool(_touch, state, who.name)
    while True:
        answer = await run_in_threadpool(_offers, state, who.name, skip, stopping)
        remaining = deadline - loop.time()
        if answer.jobs or answer.cancel or remaining <= 0 or await request.is_disconnected():
            return answer
        await state.notifier.wait(f"agent:{who.name}", remaining)


@router.post("/jobs/{job_id}/claim")
def claim(job_id: JobIdPath, who: AgentDep, state: StateDep) -> ClaimAnswer:
    """The agent holds the board's labgrid lock: the job is its own (a new lease). 409 with
    ``release: true`` when the job was cancelled meanwhile: free the board at once."""
    with state.db.session() as s:
        lease = claim_job(s, who, job_id)
    state.notifier.notify(f"job:{job_id}")
    return ClaimAnswer(lease=lease)


@router.get("/exports/{content_hash}")
def fetch_export(
    content_hash: Annotated[str, PathParam(pattern=r"^[0-9a-f]{64}$")],
    who: AgentDep,
    state: StateDep,
) -> FileResponse:
    with state.db.session() as s:
        visible = s.scalar(
            select(Job.id).where(
                Job.export_hash == content_hash,
                Job.agent_name == who.name,
                Job.state.in_(
                    [st.value for st in JobState if st.on_board or st == JobState.RESERVED]
                ),
            )
        )
        if visible is None or s.get(ExportRecord, content_hash) is None:
            raise FarmRequestError(404, "no such export for this agent's jobs")
    path = state.store.path_of(content_hash)
    if not path.is_file():
        raise FarmRequestError(
            404,
            f"export {content_hash} is recorded but its archive is missing from the store",
            "Upload the export again (its content hash is its name).",
        )
    return FileResponse(path, media_type="application/gzip")


@router.post("/jobs/{job_id}/events")
def events(job_id: JobIdPath, body: EventsRequest, who: AgentDep, state: StateDep) -> EventsAnswer:
    with state.db.session() as s:
        cancel = report_events(s, who, job_id, body)
    state.notifier.notify(f"job:{job_id}")
    return EventsAnswer(cancel=cancel)


@router.put("/jobs/{job_id}/files/{name}")
async def upload_file(
    job_id: JobIdPath,
    name: str,
    lease: Annotated[int, Query(ge=0, le=MAX_ID)],
    request: Request,
    who: AgentDep,
    state: StateDep,
) -> UploadAnswer:
    if name not in RESULT_FILES:
        raise FarmRequestError(400, f"unknown result file {name!r}")

    def check() -> None:
        with state.db.session() as s:
            check_own_job(s, who, job_id, lease)

    await run_in_threadpool(check)
    folder = state.job_dir(job_id)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = folder / f".{name}.{os.getpid()}.{lease}.part"
    size = 0
    with open(tmp, "wb") as f:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_RESULT_BYTES:
                f.close()
                tmp.unlink(missing_ok=True)
                raise FarmRequestError(413, f"{name} is larger than {MAX_RESULT_BYTES} bytes")
            f.write(chunk)
    os.replace(tmp, folder / name)
    return UploadAnswer(size=size)


@router.post("/jobs/{job_id}/finish")
def finish(job_id: JobIdPath, body: FinishRequest, who: AgentDep, state: StateDep) -> FinishAnswer:
    """The job ended on the board (done, failed or cancelled; an infrastructure failure
    with retries left puts it back in the queue); idempotent."""
    with state.db.session() as s:
        final, already, release = finish_job(
            s, who, job_id, body, retries=state.settings.job_retries
        )
    state.dispatcher.release_later(release)
    if final == JobState.QUEUED and not already:
        _keep_attempt_log(state, job_id)
    if final == JobState.DONE and not already:
        record_job(state, job_id)  # the results history (farm.jobhistory)
    state.notifier.notify(f"job:{job_id}")
    return FinishAnswer(state=JobState(final), already=already)


def _keep_attempt_log(state: FarmState, job_id: int) -> None:
    """A job retried after an infrastructure failure: the log of the run that failed is
    kept as ``log.attempt-N.txt`` (``GET /jobs/{id}/log?attempt=N``); the next run writes
    its own ``log.txt``."""
    with state.db.session() as s:
        attempt = s.scalar(select(Job.attempt).where(Job.id == job_id))
    log = state.job_dir(job_id) / "log.txt"
    if attempt is not None and log.is_file():
        os.replace(log, log.with_name(f"log.attempt-{attempt - 1}.txt"))


__all__ = ["router"]
