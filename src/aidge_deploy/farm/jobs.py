"""A job's life on the service: submit, every state change, cancel (sync, one session).

One writer of a job's state: every change is a compare-and-set on the state the writer
expects — one ``UPDATE ... WHERE id = :id AND state IN (:expected)`` statement — so two
writers racing (a cancel and an agent's claim, a finish and a lost agent) cannot both win:
the loser's statement changes no row and it learns so. States only move forward (a job
whose board went away before it started waits again: ``requeue``), each state's time is
written by the change that enters it, a terminal state is final, and every change is a
``JobEvent``. Visibility: a user sees only their own jobs and exports; an unknown id and
another user's id get the same "not found".
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Row, func, select, update
from sqlalchemy.orm import Session

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import (
    Board,
    CampaignJob,
    ExportOwner,
    ExportRecord,
    Job,
    JobEvent,
    now,
)
from aidge_deploy.farm.models import SubmitRequest
from aidge_deploy.farm.refusals import FarmRequestError, not_found
from aidge_deploy.farm.states import ON_BOARD, ORDER, WAITING, FailureKind, JobState
from aidge_deploy.farm.store import StoredExport

#: what a state change returns of the job it changed (``_CHANGED``'s columns)
ChangedJob = Row[*tuple[Any, ...]]
_CHANGED = (Job.id, Job.state, Job.token, Job.board, Job.agent_name, Job.lease, Job.user_id)


def transition(
    s: Session,
    job_id: int,
    to: JobState,
    *,
    expected: Iterable[JobState],
    message: str = "",
    values: dict[str, Any] | None = None,
    where: Iterable[ColumnElement[bool]] = (),
) -> ChangedJob | None:
    """Move job ``job_id`` to ``to`` if it is in one of the ``expected`` states (and
    ``where`` holds), in one statement; the changed job's ids and tokens, or None when
    another writer got there first (nothing changed)."""
    t = now()
    changes: dict[str, Any] = {"state": to.value, "updated_at": t, **(values or {})}
    if to is not JobState.QUEUED:  # a job put back in the queue keeps its first queued_at
        changes[f"{to.value}_at"] = t
    stmt = (
        update(Job)
        .where(Job.id == job_id, Job.state.in_([e.value for e in expected]), *where)
        .values(**changes)
        .returning(*_CHANGED)
        .execution_options(synchronize_session=False)
    )
    row = s.execute(stmt).one_or_none()
    if row is not None:
        s.add(JobEvent(job_id=job_id, at=t, kind="state", state=to.value, message=message))
    return row


def failure(
    message: str, kind: FailureKind | str, hint: str = "", error_type: str = "DeployError"
) -> dict[str, Any]:
    """The job columns of a failure (``transition(..., values=failure(...))``)."""
    return {
        "error": message,
        "error_hint": hint,
        "error_kind": str(kind),
        "error_type": error_type,
    }


def fail_job(
    s: Session,
    job_id: int,
    message: str,
    kind: FailureKind,
    *,
    expected: Iterable[JobState] = ON_BOARD,
    hint: str = "",
    error_type: str = "DeployError",
    where: Iterable[ColumnElement[bool]] = (),
) -> ChangedJob | None:
    return transition(
        s,
        job_id,
        JobState.FAILED,
        expected=expected,
        message=message,
        values=failure(message, kind, hint, error_type),
        where=where,
    )


def requeue(s: Session, job_id: int, reason: str) -> ChangedJob | None:
    """A reserved job whose board went away before it started waits again (its old
    reservation is the caller's to cancel: returned as ``token``)."""
    return transition(
        s,
        job_id,
        JobState.QUEUED,
        expected=(JobState.RESERVED,),
        message=f"back in the queue: {reason}",
        values={"token": None, "board": None, "agent_name": None, "reserved_at": None},
    )


def forward_states(to: JobState) -> tuple[JobState, ...]:
    """The on-board states a job may move to ``to`` from (states only move forward)."""
    return tuple(st for st in ON_BOARD if ORDER.index(st) < ORDER.index(to))


def add_event(s: Session, job_id: int, kind: str, message: str, stage: str | None = None) -> None:
    t = now()
    s.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(updated_at=t)
        .execution_options(synchronize_session=False)
    )
    s.add(JobEvent(job_id=job_id, at=t, kind=kind, stage=stage, message=message))


# --- users' actions ----------------------------------------------------------------------


def job_for(s: Session, who: Principal, job_id: int) -> Job:
    job = s.get(Job, job_id)
    if job is None or not who.can_see(job.user_id):
        raise not_found("job", job_id)
    return job


def export_for(s: Session, who: Principal, content_hash: str) -> ExportRecord:
    export = s.get(ExportRecord, content_hash)
    if export is None:
        raise not_found("export", content_hash)
    if not who.is_admin:
        owned = s.scalar(
            select(ExportOwner.id).where(
                ExportOwner.export_hash == content_hash, ExportOwner.user_id == who.user_id
            )
        )
        if owned is None:
            raise not_found("export", content_hash)
    return export


def record_export(s: Session, stored: StoredExport, who: Principal, name: str = "") -> None:
    """Record a stored export (once) and that ``who`` uploaded it (so they may use it)."""
    if s.get(ExportRecord, stored.content_hash) is None:
        s.add(
            ExportRecord(
                hash=stored.content_hash,
                size=stored.size,
                target=stored.target,
                application=stored.application,
                protocol=stored.protocol,
                model=stored.model or name,
                facts_json=stored.facts.to_json(),
            )
        )
        s.flush()
    owned = s.scalar(
        select(ExportOwner).where(
            ExportOwner.export_hash == stored.content_hash, ExportOwner.user_id == who.user_id
        )
    )
    if owned is None and who.user_id is not None:
        s.add(ExportOwner(export_hash=stored.content_hash, user_id=who.user_id, name=name))


def resolve_board(s: Session, board: str | None, target: str | None, export: ExportRecord) -> str:
    """Check the requested board (did-you-mean) or target against the farm; the target."""
    boards = list(s.scalars(select(Board)))
    if board is not None:
        match = next((b for b in boards if b.name == board), None)
        if match is None:
            names = sorted(b.name for b in boards)
            close = difflib.get_close_matches(board, names, n=3)
            raise FarmRequestError(
                404,
                f"the farm has no board {board!r}"
                + (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""),
                f"Boards: {', '.join(names) or '(none)'}.",
                boards=names,
                suggestions=close,
            )
        if match.target != export.target:
            raise FarmRequestError(
                409,
                f"board {board!r} is a {match.target}, but the export was made for {export.target}",
                "Pick a board of the export's target, or re-export for this board.",
            )
        return match.target
    wanted = target or export.target
    if wanted != export.target:
        raise FarmRequestError(
            409,
            f"the export was made for {export.target}, not {wanted}",
            "Submit it for its own target.",
        )
    if not any(b.target == wanted for b in boards):
        targets = sorted({b.target for b in boards})
        raise FarmRequestError(
            404,
            f"the farm has no board of target {wanted!r}",
            f"Targets on this farm: {', '.join(targets) or '(none)'}.",
            boards=sorted(b.name for b in boards),
        )
    return wanted


def submit_job(s: Session, who: Principal, body: SubmitRequest) -> int:
    """A new queued job for ``body`` (its config checked by the caller); its id."""
    export = export_for(s, who, body.export)
    target = resolve_board(s, body.board, body.target, export)
    job = Job(
        user_id=who.user_id,
        export_hash=export.hash,
        target=target,
        requested_board=body.board,
        priority=body.priority,
        config_json=json.dumps(body.config.wire()),
        state=JobState.QUEUED.value,
        retries=body.retries,
    )
    s.add(job)
    s.flush()
    s.add(JobEvent(job_id=job.id, at=job.queued_at, kind="state", state="queued"))
    tag = body.campaign
    if tag is not None:
        s.add(
            CampaignJob(
                job_id=job.id,
                campaign=tag.id,
                name=tag.name,
                cell=tag.cell,
                cells=tag.cells,
                step=tag.step,
                steps=tag.steps,
            )
        )
    return int(job.id)


@dataclass(frozen=True)
class Cancelled:
    """What a cancel changed: the reservation to cancel (a waiting job) and the agent to
    tell (a job on a board, which its agent stops)."""

    token: str | None
    agent: str | None


def cancel_job(s: Session, who: Principal, job_id: int) -> Cancelled:
    """Cancel a job of ``who``'s (or any, for an admin): a waiting job is cancelled at
    once — it never starts, even if its agent is about to claim it — and a job on a board
    is stopped by its agent, which reports its end."""
    job = job_for(s, who, job_id)
    if job.job_state.terminal:
        return Cancelled(None, None)
    message = f"cancelled by {who.name}"
    # one statement decides against the agent's claim (``agents.claim_job``, the CAS
    # reserved -> building): ``cancelled_in`` takes the state the row had before this
    # UPDATE (SQL evaluates every SET expression on the old row, SQLite and PostgreSQL)
    row = transition(
        s,
        job_id,
        JobState.CANCELLED,
        expected=WAITING,
        message=message,
        values={
            "error": message,
            "error_kind": "cancelled",
            "cancel_requested": True,
            "cancelled_in": Job.state,
        },
    )
    if row is not None:
        return Cancelled(row.token, row.agent_name)
    asked = s.execute(
        update(Job)
        .where(Job.id == job_id, Job.state.in_([st.value for st in ON_BOARD]))
        .values(cancel_requested=True, cancelled_in=func.coalesce(Job.cancelled_in, Job.state))
        .returning(Job.agent_name, Job.cancelled_in)
        .execution_options(synchronize_session=False)
    ).one_or_none()
    if asked is None:  # it ended meanwhile
        return Cancelled(None, None)
    add_event(s, job_id, "notice", f"cancel requested by {who.name} (in {asked.cancelled_in})")
    return Cancelled(None, asked.agent_name)


def load_config(job: Job) -> dict[str, Any]:
    data = json.loads(job.config_json or "{}")
    return data if isinstance(data, dict) else {}


__all__ = [
    "Cancelled",
    "ChangedJob",
    "add_event",
    "cancel_job",
    "export_for",
    "fail_job",
    "failure",
    "forward_states",
    "job_for",
    "load_config",
    "record_export",
    "requeue",
    "resolve_board",
    "submit_job",
    "transition",
]
