"""What agents do on the service: register boards, show signs of life, take, claim and
report jobs (sync, one session per call).

Every report carries the job's ``lease`` (bumped at each claim): a report from an agent
that lost the job (declared lost, then came back) changes nothing, and a report on a job
that already ended changes nothing — so a job ends exactly once. A claim is the
compare-and-set ``reserved → building``: it loses to a cancel, and the agent then frees
the board at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import Agent, Board, Job, JobPhase, now
from aidge_deploy.farm.failures import record_attempt, retry_or_fail
from aidge_deploy.farm.jobs import (
    add_event,
    forward_states,
    load_config,
    requeue,
    transition,
)
from aidge_deploy.farm.models import (
    EventsRequest,
    FinishRequest,
    JobOffer,
    RegisterRequest,
)
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.states import ON_BOARD, STAGE_STATES, FailureKind, JobState


@dataclass(frozen=True)
class Release:
    """A reservation to cancel and a board to unlock, once a job no longer needs them."""

    token: str | None
    board: str | None


def register_agent(
    s: Session, who: Principal, body: RegisterRequest, *, retries: int = 0
) -> list[Release]:
    """An agent (re)starting: its boards become farm boards; the jobs it ran before it
    restarted are lost with it — an infrastructure failure, retried up to ``retries``
    times (what they held is returned, to free)."""
    name = who.name
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
    s.flush()
    freed = []
    for job_id in list(s.scalars(select(Job.id).where(Job.agent_name == name))):
        lost = retry_or_fail(
            s,
            job_id,
            f"agent lost: agent {name} restarted during the job",
            FailureKind.AGENT_LOST,
            retries=retries,
            hint="Resubmit the job.",
            where=[Job.agent_name == name],
        )
        if lost is not None:
            freed.append(Release(lost.row.token, lost.row.board))
    return freed


def touch_agent(s: Session, name: str) -> bool:
    """Record a sign of life; True when the agent was offline (its boards come back)."""
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


def heartbeat_answer(s: Session, name: str, running: list[int]) -> tuple[list[int], list[int]]:
    """Jobs of the agent to cancel (their owner asked), and those it runs that are no
    longer its own (ended, or taken away)."""
    cancel = list(
        s.scalars(
            select(Job.id).where(
                Job.agent_name == name,
                Job.cancel_requested.is_(True),
                Job.state.in_([st.value for st in ON_BOARD]),
            )
        )
    )
    live = set(
        s.scalars(
            select(Job.id).where(
                Job.id.in_(running),
                Job.agent_name == name,
                Job.state.in_([st.value for st in (*ON_BOARD, JobState.RESERVED)]),
            )
        )
    )
    return cancel, [j for j in running if j not in live]


def cancels(s: Session, agent: str, running: list[int], stopping: list[int]) -> list[int]:
    """Jobs the agent runs (``running``, but not those it is ``stopping`` already) that
    their owner asked to cancel."""
    wanted = [j for j in running if j not in set(stopping)]
    if not wanted:
        return []
    return list(
        s.scalars(
            select(Job.id).where(
                Job.id.in_(wanted),
                Job.agent_name == agent,
                Job.cancel_requested.is_(True),
                Job.state.in_([st.value for st in ON_BOARD]),
            )
        )
    )


def offers(s: Session, agent: str, skip: list[int]) -> list[JobOffer]:
    """Jobs reserved on this agent's boards, but those it runs already."""
    q = select(Job).where(Job.agent_name == agent, Job.state == JobState.RESERVED.value)
    if skip:
        q = q.where(Job.id.not_in(skip))
    return [
        JobOffer(
            id=j.id,
            board=str(j.board),
            token=str(j.token),
            export=j.export_hash,
            target=j.target,
            config=load_config(j),
        )
        for j in s.scalars(q.order_by(Job.id))
    ]


def claim_job(s: Session, who: Principal, job_id: int) -> int:
    """The agent holds the board's labgrid lock: the job is its own; the new lease.
    Refused (409) when the job is no longer reserved for it — cancelled meanwhile: the
    agent then frees the board at once."""
    # the compare-and-set that a cancel races (``jobs.cancel_job``): from reserved only,
    # for this agent, and not once its owner asked to cancel it
    row = transition(
        s,
        job_id,
        JobState.BUILDING,
        expected=(JobState.RESERVED,),
        message=f"on its board ({who.name})",
        values={"lease": Job.lease + 1},
        where=[Job.agent_name == who.name, Job.cancel_requested.is_(False)],
    )
    if row is None:
        state = s.scalar(select(Job.state).where(Job.id == job_id))
        raise FarmRequestError(
            409,
            f"job {job_id} is {state or 'unknown'}, not reserved for agent {who.name}",
            "Free the board: the job will not run.",
            release=True,
        )
    return int(row.lease)


def _own_job(s: Session, who: Principal, job_id: int, lease: int | None = None) -> Job:
    job = s.get(Job, job_id)
    if job is None or job.agent_name != who.name:
        raise FarmRequestError(404, f"job {job_id} is not assigned to agent {who.name}")
    if lease is not None and job.lease != lease:
        raise FarmRequestError(409, f"job {job_id}: stale lease {lease} (now {job.lease})")
    return job


def check_own_job(s: Session, who: Principal, job_id: int, lease: int) -> None:
    """Refuse a report on a job the agent no longer holds, or that has ended."""
    job = _own_job(s, who, job_id, lease)
    if job.job_state.terminal:
        raise FarmRequestError(409, f"job {job_id} already ended ({job.state})")


def report_events(s: Session, who: Principal, job_id: int, body: EventsRequest) -> bool:
    """Record the job's stage events (its state follows its stages); whether its owner
    asked to cancel it."""
    job = _own_job(s, who, job_id, body.lease)
    cancel = bool(job.cancel_requested)
    if job.job_state.terminal:
        return cancel
    mine = [Job.lease == body.lease, Job.agent_name == who.name]
    for ev in body.events:
        new_state = STAGE_STATES.get(ev.stage)
        if ev.kind == "start" and new_state is not None:
            transition(
                s,
                job_id,
                new_state,
                expected=forward_states(new_state),
                values={"stage": ev.stage},
                where=mine,
            )
        add_event(s, job_id, "stage", f"{ev.kind} {ev.message}".strip(), stage=ev.stage)
    return cancel


def finish_job(
    s: Session, who: Principal, job_id: int, body: FinishRequest, *, retries: int = 0
) -> tuple[str, bool, Release]:
    """The job ended on the board (done, failed or cancelled); idempotent. Its state now
    (``queued`` again when it failed for an infrastructure reason and has retries left:
    ``failures.retry_or_fail``), whether it had ended before, and what to free (the board
    unless the agent has freed it itself)."""
    job = _own_job(s, who, job_id)
    if job.job_state.terminal:
        return job.state, True, Release(None, None)
    if job.lease != body.lease:
        raise FarmRequestError(409, f"job {job_id}: stale lease {body.lease}")
    mine = [Job.lease == body.lease, Job.agent_name == who.name]
    if body.state == JobState.FAILED:
        ended = retry_or_fail(
            s,
            job_id,
            body.error or "the deploy failed",
            FailureKind.DEPLOY,
            retries=retries,
            hint=body.error_hint or "",
            error_type=body.error_type or "DeployError",
            where=mine,
            values={"deploy_seconds": body.deploy_seconds},
        )
        if ended is None:
            state = s.scalar(select(Job.state).where(Job.id == job_id)) or ""
            return state, True, Release(None, None)
        _add_phases(s, job_id, body)
        state = JobState.QUEUED if ended.retried else JobState.FAILED
        board = None if body.released else ended.row.board
        return state.value, False, Release(ended.row.token, board)
    values: dict[str, object] = {"deploy_seconds": body.deploy_seconds}
    if body.state == JobState.CANCELLED:
        values.update(error=body.error or "cancelled", error_kind="cancelled")
    row = transition(
        s,
        job_id,
        JobState(body.state),
        expected=ON_BOARD,
        message="" if body.state == JobState.DONE else (body.error or ""),
        values=values,
        where=mine,
    )
    if row is None:  # ended by another writer meanwhile (agent declared lost)
        state = s.scalar(select(Job.state).where(Job.id == job_id)) or ""
        return state, True, Release(None, None)
    record_attempt(s, job_id, JobState(body.state), body.error)
    _add_phases(s, job_id, body)
    return row.state, False, Release(row.token, None if body.released else row.board)


def _add_phases(s: Session, job_id: int, body: FinishRequest) -> None:
    """The phases of the job's (last) run; a retried job's next run reports its own."""
    for name, seconds in body.phases.items():
        s.merge(JobPhase(id=_phase_id(s, job_id, name), job_id=job_id, name=name, seconds=seconds))


def _phase_id(s: Session, job_id: int, name: str) -> int | None:
    return s.scalar(select(JobPhase.id).where(JobPhase.job_id == job_id, JobPhase.name == name))


def mark_agent_lost(
    s: Session, name: str, silent_s: float, limit: float, *, retries: int = 0
) -> list[Release]:
    """An agent silent for too long: its boards go offline, its jobs on a board fail
    "agent lost" (an infrastructure failure: retried up to ``retries`` times on another
    board), its reserved ones wait again; what they held, to free."""
    t = now()
    s.execute(
        update(Agent)
        .where(Agent.name == name)
        .values(online=False)
        .execution_options(synchronize_session=False)
    )
    s.execute(
        update(Board)
        .where(Board.agent_name == name)
        .values(online=False, offline_since=t)
        .execution_options(synchronize_session=False)
    )
    freed = []
    for job_id, state in list(s.execute(select(Job.id, Job.state).where(Job.agent_name == name))):
        if JobState(state) in ON_BOARD:
            lost = retry_or_fail(
                s,
                job_id,
                f"agent lost: agent {name} stopped answering during the job "
                f"(no heartbeat for {limit:.0f} s)",
                FailureKind.AGENT_LOST,
                retries=retries,
                hint="Resubmit the job; the farm runs it on another board.",
                where=[Job.agent_name == name],
            )
            if lost is not None:
                freed.append(Release(lost.row.token, lost.row.board))
        elif state == JobState.RESERVED.value:
            back = requeue(s, job_id, f"agent {name} is gone (silent for {silent_s:.0f} s)")
            if back is not None:
                freed.append(Release(back.token, None))
    return freed


__all__ = [
    "Release",
    "check_own_job",
    "claim_job",
    "finish_job",
    "heartbeat_answer",
    "mark_agent_lost",
    "offers",
    "register_agent",
    "report_events",
    "touch_agent",
]
