"""How the farm shows a job (REST views, the pages' lists), read in plain statements.

The queue-position rule is written once, as the column ``queue_position`` of
``VIEW``: the queued jobs that labgrid's scheduler serves before this one and that may
take its board. labgrid orders waiting reservations by priority, then by when the
*reservation* was created (not the job: a reservation lost and made again goes to the
back of its priority); a job that has no reservation yet is behind every one that has.
Jobs waiting for another board, or of another target, do not count. A reserved job has
its board: 0.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    Row,
    Select,
    and_,
    bindparam,
    case,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy.orm import aliased

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import Job, JobAttempt, JobEvent, JobPhase, Reservation, User
from aidge_deploy.farm.models import (
    AttemptView,
    EventsPage,
    EventView,
    JobError,
    JobUrls,
    JobView,
)
from aidge_deploy.farm.refusals import not_found
from aidge_deploy.farm.states import TERMINAL, FailureClass, JobState

#: the order key of a queued job that has no reservation yet: after every reservation
NOT_RESERVED = 1e18


def _reservation_created(job: Any) -> Any:
    return func.coalesce(
        select(Reservation.created_at)
        .where(Reservation.token == job.token)
        .correlate(job)
        .scalar_subquery(),
        literal(NOT_RESERVED, Float),
    )


def queue_position_column() -> Any:
    """The one queue-position rule, as a column over ``Job`` (see the module's doc)."""
    other = aliased(Job)
    mine, theirs = _reservation_created(Job), _reservation_created(other)
    ahead = (
        select(func.count(other.id))
        .where(
            other.state == JobState.QUEUED.value,
            other.target == Job.target,
            or_(
                other.priority > Job.priority,
                and_(
                    other.priority == Job.priority,
                    or_(theirs < mine, and_(theirs == mine, other.id < Job.id)),
                ),
            ),
            or_(
                Job.requested_board.is_(None),
                other.requested_board.is_(None),
                other.requested_board == Job.requested_board,
            ),
        )
        .correlate(Job)
        .scalar_subquery()
    )
    return case(
        (Job.state == JobState.QUEUED.value, ahead),
        (Job.state == JobState.RESERVED.value, 0),
        else_=None,
    )


#: the job columns a view shows (``view_of``)
VIEW_COLUMNS = (
    "id",
    "user_id",
    "state",
    "stage",
    "export_hash",
    "target",
    "requested_board",
    "board",
    "agent_name",
    "priority",
    "cancel_requested",
    "cancelled_in",
    "deploy_seconds",
    "error",
    "error_hint",
    "error_kind",
    "error_type",
    "failure_class",
    "attempt",
    *(f"{st.value}_at" for st in JobState),
)


def _view_statement() -> Select[Any]:
    columns = [
        *(Job.__table__.c[name] for name in VIEW_COLUMNS),
        User.name.label("owner"),
        queue_position_column().label("queue_position"),
    ]
    return select(*columns).join(User, User.id == Job.user_id)


#: every view's columns, its owner's name and its queue position, in one statement
VIEW = _view_statement()
_ONE = VIEW.where(Job.id == bindparam("job_id"))
_PHASES = select(JobPhase.name, JobPhase.seconds).where(JobPhase.job_id == bindparam("job_id"))
_ATTEMPTS = (
    select(
        JobAttempt.number,
        JobAttempt.board,
        JobAttempt.agent_name.label("agent"),
        JobAttempt.state,
        JobAttempt.failure_class,
        JobAttempt.error,
        JobAttempt.error_type,
        JobAttempt.started_at,
        JobAttempt.ended_at,
        JobAttempt.retried,
    )
    .where(JobAttempt.job_id == bindparam("job_id"))
    .order_by(JobAttempt.number)
)
_EVENTS = (
    select(
        JobEvent.id, JobEvent.at, JobEvent.kind, JobEvent.state, JobEvent.stage, JobEvent.message
    )
    .where(JobEvent.job_id == bindparam("job_id"), JobEvent.id > bindparam("after"))
    .order_by(JobEvent.id)
)


def view_of(row: Row[Any], base: str = "/api") -> JobView:
    """The job of a ``VIEW`` row, as the API shows it."""
    times = {
        st.value: getattr(row, f"{st.value}_at")
        for st in JobState
        if getattr(row, f"{st.value}_at") is not None
    }
    url = f"{base}/jobs/{row.id}"
    return JobView(
        id=row.id,
        state=JobState(row.state),
        stage=row.stage or "",
        user=row.owner,
        export=row.export_hash,
        target=row.target,
        requested_board=row.requested_board,
        board=row.board,
        agent=row.agent_name,
        priority=row.priority,
        times=times,
        cancel_requested=bool(row.cancel_requested),
        cancelled_in=JobState(row.cancelled_in) if row.cancelled_in else None,
        deploy_seconds=row.deploy_seconds,
        error=None
        if row.error is None
        else JobError(
            message=row.error, hint=row.error_hint or "", kind=row.error_kind, type=row.error_type
        ),
        failure_class=FailureClass(row.failure_class) if row.failure_class else None,
        attempt=row.attempt or 1,
        urls=JobUrls(
            self=url,
            events=f"{url}/events",
            log=f"{url}/log",
            result=f"{url}/result",
            bundle=f"{url}/bundle",
        ),
        queue_position=row.queue_position,
    )


def job_status(conn: Connection, who: Principal, job_id: int, base: str = "/api") -> JobView:
    """The job's view with its ended runs (attempts), and its phases once it has ended,
    read in two statements (three for an ended job) on a plain connection: the request
    clients poll."""
    row = conn.execute(_ONE, {"job_id": job_id}).one_or_none()
    if row is None or not who.can_see(row.user_id):
        raise not_found("job", job_id)
    view = view_of(row, base)
    view.attempts = [
        AttemptView(
            **r._mapping,
            log=f"{view.urls.log}?attempt={r.number}" if r.retried else view.urls.log,
        )
        for r in conn.execute(_ATTEMPTS, {"job_id": job_id})
    ]
    if view.state in TERMINAL:
        view.phases = {name: sec for name, sec in conn.execute(_PHASES, {"job_id": job_id})}
    return view


def job_events_page(conn: Connection, who: Principal, job_id: int, after: int = 0) -> EventsPage:
    """The job's view (``job_status``) and its events after event id ``after`` (REST API
    and job page: what a client following a job polls)."""
    job = job_status(conn, who, job_id)
    rows = conn.execute(_EVENTS, {"job_id": job_id, "after": after})
    return EventsPage(job=job, events=[EventView(**row._mapping) for row in rows])


def list_job_views(
    conn: Connection, who: Principal, state: JobState | None = None, limit: int = 200
) -> list[JobView]:
    """The newest jobs ``who`` may see (all for an admin), newest first."""
    q = VIEW.order_by(Job.id.desc()).limit(limit)
    if not who.is_admin:
        q = q.where(Job.user_id == who.user_id)
    if state is not None:
        q = q.where(Job.state == state.value)
    return [view_of(row) for row in conn.execute(q)]


__all__ = [
    "NOT_RESERVED",
    "VIEW",
    "VIEW_COLUMNS",
    "job_events_page",
    "job_status",
    "list_job_views",
    "queue_position_column",
    "view_of",
]
