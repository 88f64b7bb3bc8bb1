"""Job and board bookkeeping of the service (sync, one SQLAlchemy session per call).

The state machine lives here: states only move forward, each state's time is written
once, a terminal state is final (a late or duplicate report changes nothing), and every
change is a ``JobEvent``. Visibility: a user sees only their own jobs and exports; an
unknown id and another user's id get the same "not found".
"""

from __future__ import annotations

import bisect
import difflib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, Select, and_, bindparam, case, func, or_, select
from sqlalchemy.orm import Session, aliased

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import (
    Agent,
    Board,
    Export,
    ExportOwner,
    Job,
    JobEvent,
    JobPhase,
    User,
    now,
)
from aidge_deploy.farm.states import (
    ORDER,
    TERMINAL,
    WAITING,
    BoardState,
    FailureKind,
    JobState,
)
from aidge_deploy.farm.store import StoredExport


class FarmRequestError(Exception):
    """A refused request: HTTP ``status``, a message and a hint (rendered as JSON)."""

    def __init__(self, status: int, message: str, hint: str = "", **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.hint = hint
        self.extra = extra


def not_found(what: str, ident: object) -> FarmRequestError:
    return FarmRequestError(404, f"no {what} {ident}", "Check the id (you see only your own).")


def set_state(s: Session, job: Job, state: JobState, message: str = "") -> bool:
    """Move ``job`` to ``state`` (forward only); False when the move is refused."""
    current = job.job_state
    if current.terminal:
        return False
    if not state.terminal and ORDER.index(state) < ORDER.index(current):
        return False
    if state == current:
        return False
    t = now()
    setattr(job, f"{state.value}_at", t)
    # a job may skip states (no flash on some boards): skipped ones keep no time
    job.state = state.value
    job.updated_at = t
    s.add(JobEvent(job_id=job.id, at=t, kind="state", state=state.value, message=message))
    return True


def add_event(s: Session, job: Job, kind: str, message: str, stage: str | None = None) -> None:
    job.updated_at = now()
    s.add(JobEvent(job_id=job.id, at=job.updated_at, kind=kind, stage=stage, message=message))


def fail(
    s: Session,
    job: Job,
    message: str,
    kind: FailureKind,
    hint: str = "",
    error_type: str = "DeployError",
) -> bool:
    if job.job_state.terminal:
        return False
    job.error = message
    job.error_hint = hint
    job.error_kind = kind.value
    job.error_type = error_type
    return set_state(s, job, JobState.FAILED, message)


def job_for(s: Session, who: Principal, job_id: int) -> Job:
    job = s.get(Job, job_id)
    if job is None or not who.can_see(job.user_id):
        raise not_found("job", job_id)
    return job


def export_for(s: Session, who: Principal, content_hash: str) -> Export:
    export = s.get(Export, content_hash)
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
    if s.get(Export, stored.content_hash) is None:
        s.add(
            Export(
                hash=stored.content_hash,
                size=stored.size,
                target=stored.target,
                application=stored.application,
                protocol=stored.protocol,
                model=stored.model or name,
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


def resolve_board(s: Session, board: str | None, target: str | None, export: Export) -> str:
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


def job_view(
    s: Session,
    job: Job,
    base: str = "/api",
    owner: str | None = None,
    queue: QueuePositions | None = None,
) -> dict[str, Any]:
    """The job as the API shows it; ``owner``: its user's name when the caller knows it;
    ``queue``: the queue read once for a list of jobs."""
    if owner is None:
        user = s.get(User, job.user_id)
        owner = user.name if user else None
    position = None
    if job.job_state in WAITING:
        position = queue.of(job) if queue else queue_position(s, job)
    return _view(job, owner, position, base)


def _view(
    job: Job | Row[Any], owner: str | None, position: int | None, base: str
) -> dict[str, Any]:
    """The view of a job read as an ORM object or as a row of ``VIEW_COLUMNS`` (the
    same names); ``position``: its queue position while it waits, else None."""
    times = {
        st.value: getattr(job, f"{st.value}_at")
        for st in JobState
        if getattr(job, f"{st.value}_at") is not None
    }
    view: dict[str, Any] = {
        "id": job.id,
        "state": job.state,
        "stage": job.stage,
        "user": owner,
        "export": job.export_hash,
        "target": job.target,
        "requested_board": job.requested_board,
        "board": job.board,
        "agent": job.agent_name,
        "priority": job.priority,
        "times": times,
        "cancel_requested": job.cancel_requested,
        "deploy_seconds": job.deploy_seconds,
        "error": None
        if job.error is None
        else {
            "message": job.error,
            "hint": job.error_hint or "",
            "kind": job.error_kind,
            "type": job.error_type,
        },
        "urls": {
            "self": f"{base}/jobs/{job.id}",
            "events": f"{base}/jobs/{job.id}/events",
            "log": f"{base}/jobs/{job.id}/log",
            "result": f"{base}/jobs/{job.id}/result",
            "bundle": f"{base}/jobs/{job.id}/bundle",
        },
    }
    if position is not None:
        view["queue_position"] = position
    return view


def _status_statement() -> Select[Any]:
    """One job's view columns, its owner's name and its queue position, in one statement
    (the position is ``queue_position``'s count, as a correlated subquery)."""
    other = aliased(Job)
    ahead = (
        select(func.count(other.id))
        .where(
            other.state == JobState.QUEUED.value,
            other.target == Job.target,
            or_(
                other.priority > Job.priority,
                and_(other.priority == Job.priority, other.id < Job.id),
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
    position = case(
        (Job.state == JobState.QUEUED.value, ahead),
        (Job.state == JobState.RESERVED.value, 0),
        else_=None,
    )
    columns = [
        *(Job.__table__.c[name] for name in VIEW_COLUMNS),
        User.name.label("owner"),
        position.label("queue_position"),
    ]
    return select(*columns).join(User, User.id == Job.user_id).where(Job.id == bindparam("job_id"))


#: the job columns a view shows (``_view``)
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
    "deploy_seconds",
    "error",
    "error_hint",
    "error_kind",
    "error_type",
    *(f"{st.value}_at" for st in JobState),
)
_STATUS = _status_statement()
_PHASES = select(JobPhase.name, JobPhase.seconds).where(JobPhase.job_id == bindparam("job_id"))
_EVENTS = (
    select(
        JobEvent.id, JobEvent.at, JobEvent.kind, JobEvent.state, JobEvent.stage, JobEvent.message
    )
    .where(JobEvent.job_id == bindparam("job_id"), JobEvent.id > bindparam("after"))
    .order_by(JobEvent.id)
)


def job_status(conn: Connection, who: Principal, job_id: int, base: str = "/api") -> dict[str, Any]:
    """The job's view as ``job_view`` gives it, with its phases once it has ended, read
    in one statement (two for an ended job) on a plain connection. The status request is
    the one clients poll: through the ORM (load the job, its owner, count the queue) it
    cost about 9 times as much."""
    row = conn.execute(_STATUS, {"job_id": job_id}).one_or_none()
    if row is None or not who.can_see(row.user_id):
        raise not_found("job", job_id)
    view = _view(row, row.owner, row.queue_position, base)
    if JobState(row.state) in TERMINAL:
        view["phases"] = {name: sec for name, sec in conn.execute(_PHASES, {"job_id": job_id})}
    return view


def job_events_page(
    conn: Connection, who: Principal, job_id: int, after: int = 0
) -> dict[str, Any]:
    """The job's view (``job_status``) and its events after event id ``after`` (REST API
    and job page: what a client following a job polls)."""
    job = job_status(conn, who, job_id)
    rows = conn.execute(_EVENTS, {"job_id": job_id, "after": after})
    return {"job": job, "events": [dict(row._mapping) for row in rows]}


def _ahead_of(job: Job) -> tuple[float, int]:
    """A queued job's place in labgrid's order: higher priority first, then older first."""
    return (-job.priority, job.id)


def queue_position(s: Session, job: Job) -> int:
    """Queued jobs that labgrid serves before this one and that may take its board: of its
    target, with a higher priority or as high and older; for a job asking for one board,
    not those waiting for another board. A reserved job has its board: 0."""
    if job.job_state is not JobState.QUEUED:
        return 0
    q = select(func.count(Job.id)).where(
        Job.state == JobState.QUEUED.value,
        Job.target == job.target,
        or_(Job.priority > job.priority, and_(Job.priority == job.priority, Job.id < job.id)),
    )
    if job.requested_board is not None:
        q = q.where(or_(Job.requested_board.is_(None), Job.requested_board == job.requested_board))
    return int(s.scalar(q) or 0)


class QueuePositions:
    """The queue read in one query: each job's ``queue_position`` in a list without one
    count per job (same rule as ``queue_position``)."""

    def __init__(self, s: Session) -> None:
        #: per target, the order keys of all its queued jobs, and of those asking for a board
        self._all: dict[str, list[tuple[float, int]]] = {}
        self._pinned: dict[str, list[tuple[float, int]]] = {}
        self._board: dict[tuple[str, str], list[tuple[float, int]]] = {}
        rows = s.execute(
            select(Job.target, Job.requested_board, Job.priority, Job.id).where(
                Job.state == JobState.QUEUED.value
            )
        )
        for target, board, priority, job_id in rows:
            key = (-priority, job_id)
            self._all.setdefault(target, []).append(key)
            if board is not None:
                self._pinned.setdefault(target, []).append(key)
                self._board.setdefault((target, board), []).append(key)
        for keys in (*self._all.values(), *self._pinned.values(), *self._board.values()):
            keys.sort()

    def of(self, job: Job) -> int:
        if job.job_state is not JobState.QUEUED:
            return 0
        key = _ahead_of(job)
        ahead = bisect.bisect_left(self._all.get(job.target, []), key)
        if job.requested_board is not None:  # not those waiting for another board
            ahead -= bisect.bisect_left(self._pinned.get(job.target, []), key)
            ahead += bisect.bisect_left(self._board.get((job.target, job.requested_board), []), key)
        return ahead


@dataclass(frozen=True)
class BoardView:
    name: str
    target: str
    host: str
    kind: str
    state: BoardState
    queue: int
    job: int | None
    job_user: str | None
    offline_since: float | None
    description: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "host": self.host,
            "kind": self.kind,
            "state": self.state.value,
            "queue": self.queue,
            "job": self.job,
            "job_user": self.job_user,
            "offline_since": self.offline_since,
            "description": self.description,
        }


def board_views(s: Session) -> list[BoardView]:
    boards = list(s.scalars(select(Board).order_by(Board.name)))
    active = list(
        s.execute(
            select(Job.board, Job.id, User.name)
            .join(User, User.id == Job.user_id)
            .where(Job.state.not_in([st.value for st in (*WAITING, *_TERMINAL)]))
        )
    )
    reserved = list(
        s.execute(
            select(Job.board, Job.id, User.name)
            .join(User, User.id == Job.user_id)
            .where(Job.state == JobState.RESERVED.value)
        )
    )
    busy = {b: (j, u) for b, j, u in [*reserved, *active] if b}
    queued = list(
        s.execute(select(Job.requested_board, Job.target).where(Job.state == JobState.QUEUED.value))
    )
    agents = {a.name: a for a in s.scalars(select(Agent))}
    out = []
    for b in boards:
        if not b.online:
            state = BoardState.OFFLINE
        elif b.name in busy:
            state = BoardState.BUSY
        elif b.drained:
            state = BoardState.DRAINED
        else:
            state = BoardState.IDLE
        queue = sum(1 for rb, t in queued if rb == b.name or (rb is None and t == b.target))
        job, user = busy.get(b.name, (None, None))
        agent = agents.get(b.agent_name)
        out.append(
            BoardView(
                name=b.name,
                target=b.target,
                host=(agent.hostname or agent.name) if agent else b.agent_name,
                kind=b.kind,
                state=state,
                queue=queue,
                job=job,
                job_user=user,
                offline_since=b.offline_since,
                description=b.description,
            )
        )
    return out


_TERMINAL = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


def load_config(job: Job) -> dict[str, Any]:
    data = json.loads(job.config_json or "{}")
    return data if isinstance(data, dict) else {}


__all__ = [
    "BoardView",
    "FarmRequestError",
    "QueuePositions",
    "add_event",
    "board_views",
    "export_for",
    "fail",
    "job_events_page",
    "job_for",
    "job_status",
    "job_view",
    "load_config",
    "not_found",
    "queue_position",
    "record_export",
    "resolve_board",
    "set_state",
]
