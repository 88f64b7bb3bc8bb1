"""Failure classes and retries: whose failure a failed job is, and running it again.

A job's run on a board that fails is the lab's (``FailureClass.INFRASTRUCTURE``: the board
unreachable, the flash failed, the agent lost, nothing from the board before the capture
timed out, the emulator crashed, a bug of ours on the board's host) or the user's
(``FailureClass.USER``: the build, the model's run, a budget, the configuration). The
class is read from the failure's kind and the type of the error raised on the board's
host (``classify``): a closed list of the lab's error types, every other one the user's.

Only the lab's failures are retried, at most ``FarmSettings.job_retries`` times (a job may
ask for fewer): the job goes back to the queue (``retry_or_fail``: one compare-and-set, as
every state change) and its next reservation names another board of its target that it
has not failed on (``retry_board``), else any board of its target — the same one once it
is available again. labgrid's coordinator allocates it as any other reservation. Each run
that ended is kept as a ``JobAttempt`` (board, state, class, error).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from aidge_deploy.farm.db import Agent, Board, Job, JobAttempt, now
from aidge_deploy.farm.jobs import ChangedJob, failure, transition
from aidge_deploy.farm.states import ON_BOARD, FailureClass, FailureKind, JobState

#: error types (raised on the board's host, or by the agent) that are the lab's failure
INFRASTRUCTURE_TYPES = frozenset(
    {
        "BoardFault",  # the emulator crashed, nothing came from the board
        "FlashError",
        "FirmwareMismatch",  # the board does not run the firmware it was given
        "TransferError",
        "TransferConnectionLost",
        "ConnectError",  # board, SSH host or GDB server unreachable
        "AuthenticationError",
        "HostKeyError",
        "RspTimeout",
        "CoordinatorLost",
        "PreflightError",  # a tool the board needs is missing on its host
        "AgentError",  # the agent failed while running the job
        "AgentStopped",  # the agent was stopped during the job
        "Interrupted",  # the run was stopped from outside
        "InternalError",  # a bug of ours on the board's host, not the user's doing
        "PipelineError",
    }
)
_INFRASTRUCTURE_KINDS = frozenset({FailureKind.AGENT_LOST, FailureKind.INTERNAL})


def classify(kind: FailureKind | str, error_type: str | None) -> FailureClass:
    """Whose failure it is: the lab's (retried) or the user's."""
    if kind in _INFRASTRUCTURE_KINDS:
        return FailureClass.INFRASTRUCTURE
    if kind == FailureKind.DEPLOY and error_type in INFRASTRUCTURE_TYPES:
        return FailureClass.INFRASTRUCTURE
    return FailureClass.USER


@dataclass(frozen=True)
class Ended:
    """A run on a board that failed: the job's row before the change (its token and board,
    to free) and whether it went back to the queue."""

    row: ChangedJob
    retried: bool
    failure_class: FailureClass


_BEFORE = (
    Job.id,
    Job.state,
    Job.token,
    Job.board,
    Job.agent_name,
    Job.lease,
    Job.user_id,
    Job.attempt,
    Job.retries,
    Job.cancel_requested,
    Job.building_at,
)


def retry_or_fail(
    s: Session,
    job_id: int,
    message: str,
    kind: FailureKind,
    *,
    retries: int,
    hint: str = "",
    error_type: str = "DeployError",
    where: Iterable[ColumnElement[bool]] = (),
    values: dict[str, Any] | None = None,
) -> Ended | None:
    """A job's run on its board failed: back in the queue for another run when the failure
    is the lab's and the job has retries left (``retries``: the farm's; the job may allow
    fewer), else failed with its class; None when another writer ended it first."""
    where = list(where)
    before = s.execute(
        select(*_BEFORE).where(Job.id == job_id, Job.state.in_([st.value for st in ON_BOARD]))
    ).one_or_none()
    if before is None:
        return None
    cls = classify(kind, error_type)
    allowed = retries if before.retries is None else min(before.retries, retries)
    token = Job.token.is_(None) if before.token is None else Job.token == before.token
    if cls is FailureClass.INFRASTRUCTURE and before.attempt <= allowed:
        again = transition(
            s,
            job_id,
            JobState.QUEUED,
            expected=ON_BOARD,
            message=f"attempt {before.attempt} on {before.board} failed ({cls}): {message}; "
            "it runs again",
            values={
                "token": None,
                "board": None,
                "agent_name": None,
                "reserved_at": None,
                "stage": "",
                "attempt": Job.attempt + 1,
                **{f"{st.value}_at": None for st in ON_BOARD},
            },
            where=[*where, token, Job.cancel_requested.is_(False)],
        )
        if again is not None:
            _record(s, before, JobState.FAILED, cls, message, error_type, retried=True)
            return Ended(before, True, cls)
    failed = transition(
        s,
        job_id,
        JobState.FAILED,
        expected=ON_BOARD,
        message=message,
        values={
            **failure(message, kind, hint, error_type),
            "failure_class": cls.value,
            **(values or {}),
        },
        where=[*where, token],
    )
    if failed is None:
        return None
    _record(s, before, JobState.FAILED, cls, message, error_type)
    return Ended(before, False, cls)


def record_attempt(s: Session, job_id: int, state: JobState, message: str | None = None) -> None:
    """The job's current run ended ``state`` (done or cancelled) on its board."""
    before = s.execute(select(*_BEFORE).where(Job.id == job_id)).one_or_none()
    if before is not None:
        _record(s, before, state, None, message, None)


def _record(
    s: Session,
    before: Any,
    state: JobState,
    cls: FailureClass | None,
    error: str | None,
    error_type: str | None,
    *,
    retried: bool = False,
) -> None:
    s.add(
        JobAttempt(
            job_id=before.id,
            number=before.attempt,
            board=before.board,
            agent_name=before.agent_name,
            state=state.value,
            failure_class=None if cls is None else cls.value,
            error=error,
            error_type=error_type,
            started_at=before.building_at,
            ended_at=now(),
            retried=retried,
        )
    )


def retry_board(s: Session, job_id: int, target: str) -> str | None:
    """The board the next run of a retried job asks for: one of its target, online and in
    service, that it has not failed on (the first by name); None when there is none (then
    any board of its target takes it, the one it failed on included)."""
    failed = set(
        s.scalars(
            select(JobAttempt.board).where(
                JobAttempt.job_id == job_id,
                JobAttempt.failure_class == FailureClass.INFRASTRUCTURE.value,
            )
        )
    )
    online = set(s.scalars(select(Agent.name).where(Agent.online.is_(True))))
    for board in s.scalars(select(Board).where(Board.target == target).order_by(Board.name)):
        in_service = board.online and not board.drained and board.agent_name in online
        if in_service and board.name not in failed:
            return board.name
    return None


def fail_pinned_retries(s: Session, board: str, reason: str) -> list[int]:
    """Board ``board`` was drained by its health check: the queued jobs that asked for it
    by name and already failed on it for the lab's reason end failed now, with that class
    and the attempt's error (they would wait for a readmission that may never come; no
    other board may take them). Jobs that never ran on it keep waiting, as the user asked
    for that board. The ids of the jobs ended."""
    ended = []
    waiting = s.execute(
        select(Job.id, Job.attempt).where(
            Job.state == JobState.QUEUED.value,
            Job.requested_board == board,
            Job.attempt > 1,
        )
    ).all()
    for job_id, attempt in waiting:
        last = s.scalars(
            select(JobAttempt)
            .where(JobAttempt.job_id == job_id, JobAttempt.number == attempt - 1)
            .limit(1)
        ).first()
        error = last.error if last is not None and last.error else "its last run failed"
        error_type = last.error_type if last is not None and last.error_type else "BoardFault"
        message = (
            f"attempt {attempt - 1} on {board} failed: {error}; not run again: the job asked "
            f"for board {board}, which its health check then drained ({reason})"
        )
        done = transition(
            s,
            job_id,
            JobState.FAILED,
            expected=(JobState.QUEUED,),
            message=message,
            values={
                **failure(
                    message,
                    FailureKind.DEPLOY,
                    f"Submit it by target to run on another board, or again once {board} "
                    "is admitted.",
                    error_type,
                ),
                "failure_class": FailureClass.INFRASTRUCTURE.value,
            },
        )
        if done is not None:
            ended.append(job_id)
    return ended


__all__ = [
    "INFRASTRUCTURE_TYPES",
    "Ended",
    "classify",
    "fail_pinned_retries",
    "record_attempt",
    "retry_board",
    "retry_or_fail",
]
