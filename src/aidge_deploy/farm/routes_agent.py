"""The agent side of the REST API: register boards, heartbeat, take jobs, report them.

Every report carries the job's ``lease`` (bumped at each claim): a report from an agent
that lost the job (declared lost, then came back) is refused with 409, and a report on a
job that already ended changes nothing — so a job ends exactly once.
"""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from sqlalchemy import select

from aidge_deploy.farm.db import Agent, Board, Export, Job, JobPhase, now
from aidge_deploy.farm.jobhistory import record_job
from aidge_deploy.farm.jobs import FarmRequestError, add_event, fail, load_config, set_state
from aidge_deploy.farm.service import AgentDep, FarmState, StateDep
from aidge_deploy.farm.states import STAGE_STATES, FailureKind, JobState

router = APIRouter(prefix="/agent", tags=["agents"])

RESULT_FILES = {"result.json", "bundle.tar.gz", "log.txt"}
MAX_RESULT_BYTES = 512 * 1024 * 1024


class BoardSpec(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    target: str = Field(min_length=1, max_length=64)
    kind: str = Field(default="emu", pattern=r"^(emu|hw)$")
    description: str = Field(default="", max_length=500)


class RegisterRequest(BaseModel):
    hostname: str = Field(default="", max_length=200)
    version: str = Field(default="", max_length=64)
    boards: list[BoardSpec]


class Heartbeat(BaseModel):
    running: list[int] = Field(default_factory=list)


class StageEvent(BaseModel):
    stage: str = Field(max_length=32)
    kind: str = Field(max_length=16)
    message: str = Field(default="", max_length=2000)


class EventsRequest(BaseModel):
    lease: int
    events: list[StageEvent]


class FinishRequest(BaseModel):
    lease: int
    state: JobState
    error: str | None = Field(default=None, max_length=20000)
    error_hint: str | None = Field(default=None, max_length=5000)
    error_type: str | None = Field(default=None, max_length=64)
    deploy_seconds: float | None = None
    #: seconds each phase took on the agent's host (name -> seconds)
    phases: dict[str, float] = Field(default_factory=dict, max_length=20)


@router.post("/register")
def register(body: RegisterRequest, who: AgentDep, state: StateDep) -> dict[str, Any]:
    """An agent (re)starting: its boards become farm boards (labgrid places)."""
    name = who.name
    with state.db.session() as s:
        agent = s.get(Agent, name) or Agent(name=name)
        agent.hostname = body.hostname or name
        agent.version = body.version
        agent.last_seen = now()
        agent.online = True
        s.add(agent)
        s.flush()
        for spec in body.boards:
            board = s.get(Board, spec.name)
            if board is not None and board.agent_name != name:
                other = s.get(Agent, board.agent_name)
                if other is not None and other.online:
                    raise FarmRequestError(
                        409,
                        f"board {spec.name!r} is already served by agent {board.agent_name!r}",
                        "Board names are farm-wide: rename it in this agent's lab file.",
                    )
            board = board or Board(name=spec.name, target=spec.target, agent_name=name)
            board.target = spec.target
            board.agent_name = name
            board.kind = spec.kind
            board.description = spec.description
            board.online = True
            board.offline_since = None
            s.add(board)
        # jobs this agent was running before it restarted are lost with it
        for job in s.scalars(
            select(Job).where(
                Job.agent_name == name, Job.state.in_([st.value for st in JobState if st.on_board])
            )
        ):
            fail(
                s, job, f"agent lost: agent {name} restarted during the job", FailureKind.AGENT_LOST
            )
            state.dispatcher.release_later(job.token, job.board)
    state.dispatcher.boards_changed()
    return {
        "coordinator": state.settings.agent_coordinator or state.settings.coordinator,
        "farm": state.settings.farm_name,
        "heartbeat_interval": state.settings.heartbeat_interval,
    }


def _touch(state: FarmState, name: str) -> bool:
    """Record a sign of life; True when the agent was offline (its boards come back)."""
    with state.db.session() as s:
        agent = s.get(Agent, name)
        if agent is None:
            raise FarmRequestError(409, f"agent {name} is not registered", "Register first.")
        agent.last_seen = now()
        came_back = not agent.online
        agent.online = True
        if came_back:
            for board in s.scalars(select(Board).where(Board.agent_name == name)):
                board.online = True
                board.offline_since = None
        return came_back


@router.post("/heartbeat")
def heartbeat(body: Heartbeat, who: AgentDep, state: StateDep) -> dict[str, Any]:
    if _touch(state, who.name):
        state.dispatcher.boards_changed()
    with state.db.session() as s:
        cancel = [
            j.id
            for j in s.scalars(
                select(Job).where(Job.agent_name == who.name, Job.cancel_requested.is_(True))
            )
            if not j.job_state.terminal
        ]
        gone = []
        for job_id in body.running:
            job = s.get(Job, job_id)
            if job is None or job.agent_name != who.name or job.job_state.terminal:
                gone.append(job_id)
    return {"cancel": cancel, "stop": gone}


def _offers(state: FarmState, agent: str, skip: list[int]) -> list[dict[str, Any]]:
    with state.db.session() as s:
        q = select(Job).where(Job.agent_name == agent, Job.state == JobState.RESERVED.value)
        if skip:
            q = q.where(Job.id.not_in(skip))
        jobs = s.scalars(q.order_by(Job.id))
        return [
            {
                "id": j.id,
                "board": j.board,
                "token": j.token,
                "export": j.export_hash,
                "target": j.target,
                "config": load_config(j),
            }
            for j in jobs
        ]


@router.post("/poll")
async def poll(
    request: Request,
    who: AgentDep,
    state: StateDep,
    wait: float = 20.0,
    skip: Annotated[list[int], Query(max_length=1000)] = [],  # noqa: B006 - FastAPI copies it
) -> dict[str, Any]:
    """Jobs reserved on this agent's boards, but those in ``skip`` (the agent runs them
    already); waits up to ``wait`` s for one (less if the agent goes away)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, min(wait, state.settings.long_poll_max))
    await run_in_threadpool(_touch, state, who.name)
    while True:
        offers = await run_in_threadpool(_offers, state, who.name, skip)
        remaining = deadline - loop.time()
        if offers or remaining <= 0 or await request.is_disconnected():
            return {"jobs": offers}
        await state.notifier.wait(f"agent:{who.name}", remaining)


def _own_job(s: Any, who: Any, job_id: int, lease: int | None = None) -> Job:
    job = s.get(Job, job_id)
    if job is None or job.agent_name != who.name:
        raise FarmRequestError(404, f"job {job_id} is not assigned to agent {who.name}")
    if lease is not None and job.lease != lease:
        raise FarmRequestError(409, f"job {job_id}: stale lease {lease} (now {job.lease})")
    return job


@router.post("/jobs/{job_id}/claim")
def claim(job_id: int, who: AgentDep, state: StateDep) -> dict[str, Any]:
    """The agent holds the board's labgrid lock: the job is its own (a new lease)."""
    with state.db.session() as s:
        job = _own_job(s, who, job_id)
        if job.job_state != JobState.RESERVED:
            raise FarmRequestError(409, f"job {job_id} is {job.state}, not reserved")
        job.lease += 1
        set_state(s, job, JobState.BUILDING, f"on {job.board} ({who.name})")
        lease = job.lease
    state.notifier.notify(f"job:{job_id}")
    return {"lease": lease}


@router.get("/exports/{content_hash}")
def fetch_export(content_hash: str, who: AgentDep, state: StateDep) -> FileResponse:
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
        if visible is None or s.get(Export, content_hash) is None:
            raise FarmRequestError(404, "no such export for this agent's jobs")
    return FileResponse(state.store.path_of(content_hash), media_type="application/gzip")


@router.post("/jobs/{job_id}/events")
def events(job_id: int, body: EventsRequest, who: AgentDep, state: StateDep) -> dict[str, Any]:
    with state.db.session() as s:
        job = _own_job(s, who, job_id, body.lease)
        for ev in body.events:
            if job.job_state.terminal:
                break
            new_state = STAGE_STATES.get(ev.stage)
            if ev.kind == "start" and new_state is not None:
                set_state(s, job, new_state)
                job.stage = ev.stage
            add_event(s, job, "stage", f"{ev.kind} {ev.message}".strip(), stage=ev.stage)
        cancel = job.cancel_requested
    state.notifier.notify(f"job:{job_id}")
    return {"cancel": cancel}


@router.put("/jobs/{job_id}/files/{name}")
async def upload_file(
    job_id: int, name: str, lease: int, request: Request, who: AgentDep, state: StateDep
) -> dict[str, Any]:
    if name not in RESULT_FILES:
        raise FarmRequestError(400, f"unknown result file {name!r}")

    def check() -> None:
        with state.db.session() as s:
            job = _own_job(s, who, job_id, lease)
            if job.job_state.terminal:
                raise FarmRequestError(409, f"job {job_id} already ended ({job.state})")

    await run_in_threadpool(check)
    folder = state.job_dir(job_id)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.{os.getpid()}.{lease}.part"
    size = 0
    with open(tmp, "wb") as f:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_RESULT_BYTES:
                tmp.unlink(missing_ok=True)
                raise FarmRequestError(413, f"{name} is larger than {MAX_RESULT_BYTES} bytes")
            f.write(chunk)
    os.replace(tmp, folder / name)
    return {"size": size}


@router.post("/jobs/{job_id}/finish")
def finish(job_id: int, body: FinishRequest, who: AgentDep, state: StateDep) -> dict[str, Any]:
    """The job ended on the board (done, failed or cancelled); idempotent."""
    if not body.state.terminal:
        raise FarmRequestError(400, "finish takes done, failed or cancelled")
    with state.db.session() as s:
        job = _own_job(s, who, job_id)
        if job.job_state.terminal:
            return {"state": job.state, "already": True}
        if job.lease != body.lease:
            raise FarmRequestError(409, f"job {job_id}: stale lease {body.lease}")
        job.deploy_seconds = body.deploy_seconds
        for name, seconds in body.phases.items():
            if 0 < len(name) <= 32 and 0.0 <= seconds < 1e7:
                s.add(JobPhase(job_id=job.id, name=name, seconds=seconds))
        if body.state == JobState.FAILED:
            fail(
                s,
                job,
                body.error or "the deploy failed",
                FailureKind.DEPLOY,
                hint=body.error_hint or "",
                error_type=body.error_type or "DeployError",
            )
        else:
            if body.state == JobState.CANCELLED:
                job.error = body.error or "cancelled"
                job.error_kind = "cancelled"
            set_state(s, job, body.state)
        token, board = job.token, job.board
        final = job.state
    state.dispatcher.release_later(token, board)
    if final == JobState.DONE:
        record_job(state, job_id)
    state.notifier.notify(f"job:{job_id}")
    return {"state": final, "already": False}
