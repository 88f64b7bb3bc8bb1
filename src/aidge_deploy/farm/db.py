"""The farm's records in a real database (SQLAlchemy 2): users, tokens, exports, jobs,
their events, agents and boards.

SQLite (a file under the data folder) by default; any SQLAlchemy URL is accepted
(``postgresql+psycopg://...`` with the ``postgres`` extra). Times are UNIX seconds (float).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from aidge_deploy.farm.states import JobState

#: connections kept open to a SQLite database (one per request thread)
SQLITE_POOL_SIZE = 40


def now() -> float:
    return time.time()


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class Token(Base):
    """A bearer token: only its SHA-256 is stored. ``user_id`` or ``agent_name`` is set."""

    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    agent_name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class ExportRecord(Base):
    """An uploaded export (its archive in the store), recorded once by content hash."""

    __tablename__ = "exports"
    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(Integer)
    target: Mapped[str] = mapped_column(String(64))
    application: Mapped[str] = mapped_column(String(32))
    protocol: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[float] = mapped_column(Float, default=now)
    #: what a submission is checked against (``store.ExportFacts``, JSON); None for an
    #: export recorded before they were kept (read from its archive then)
    facts_json: Mapped[str | None] = mapped_column(Text, nullable=True)


class ExportOwner(Base):
    """Who uploaded an export: a user sees only exports they uploaded themselves."""

    __tablename__ = "export_owners"
    __table_args__ = (UniqueConstraint("export_hash", "user_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    export_hash: Mapped[str] = mapped_column(ForeignKey("exports.hash"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")


class ApiToken(Base):
    """A long-lived token for CI (``aidge-deploy farm token create``): not a password,
    revocable, only its SHA-256 stored. It acts for its user (and their role)."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    #: what it is for (shown in lists, never the token)
    name: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[float] = mapped_column(Float, default=now)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_used_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Agent(Base):
    __tablename__ = "agents"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(200), default="")
    version: Mapped[str] = mapped_column(String(64), default="")
    last_seen: Mapped[float | None] = mapped_column(Float, nullable=True)
    online: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class Board(Base):
    """A board of the farm = a labgrid place of the same name, served by one agent."""

    __tablename__ = "boards"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    target: Mapped[str] = mapped_column(String(64), index=True)
    agent_name: Mapped[str] = mapped_column(ForeignKey("agents.name"), index=True)
    kind: Mapped[str] = mapped_column(String(16), default="emu")
    description: Mapped[str] = mapped_column(Text, default="")
    online: Mapped[bool] = mapped_column(Boolean, default=False)
    offline_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: taken out of service (by an admin, or by a failed health check: ``farm.health``):
    #: no new job lands on it; why, since when and by whom
    drained: Mapped[bool] = mapped_column(Boolean, default=False)
    drain_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    drained_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    drained_by: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Job(Base):
    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    export_hash: Mapped[str] = mapped_column(ForeignKey("exports.hash"))
    target: Mapped[str] = mapped_column(String(64))
    requested_board: Mapped[str | None] = mapped_column(String(64), nullable=True)
    board: Mapped[str | None] = mapped_column(String(64), nullable=True)
    agent_name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    state: Mapped[str] = mapped_column(String(16), index=True, default=JobState.QUEUED.value)
    priority: Mapped[float] = mapped_column(Float, default=0.0)
    config_json: Mapped[str] = mapped_column(Text, default="{}")
    #: the labgrid reservation token of this job (the queue entry)
    token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: bumped each time an agent claims the job: a stale agent's reports are refused
    lease: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    #: the state the job was in when its owner cancelled it (queued, reserved: it never
    #: started; building and after: its agent stopped it at the next step)
    cancelled_in: Mapped[str | None] = mapped_column(String(16), nullable=True)
    stage: Mapped[str] = mapped_column(String(32), default="")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_hint: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    error_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: whose failure a failed job is (``states.FailureClass``): infrastructure or user
    failure_class: Mapped[str | None] = mapped_column(String(16), nullable=True)
    #: the number of the job's current (or last) run on a board: an infrastructure
    #: failure puts the job back in the queue for the next one (``farm.failures``)
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    #: at most this many retries its owner allows (None: the farm's ``job_retries``)
    retries: Mapped[int | None] = mapped_column(Integer, nullable=True)
    deploy_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    queued_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=now)
    reserved_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    building_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    flashing_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    running_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    collecting_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    done_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    failed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    cancelled_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[float] = mapped_column(Float, default=now, index=True)

    @property
    def job_state(self) -> JobState:
        return JobState(self.state)


class CampaignJob(Base):
    """A job that is a cell of a campaign (``aidge-deploy campaign``): what the dashboard's
    ``/campaigns`` page groups. A table of its own, so a farm database made before it
    gains it without altering ``jobs``."""

    __tablename__ = "campaign_jobs"
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    campaign: Mapped[str] = mapped_column(String(100), index=True)
    name: Mapped[str] = mapped_column(String(100))
    cell: Mapped[str] = mapped_column(String(200))
    #: how many of the campaign's cells run on this farm (as the client counted them)
    cells: Mapped[int] = mapped_column(Integer)
    #: this job is step ``step`` of the cell's ``steps`` farm jobs (its run, then its
    #: accuracy run on the labelled set): the cell is done when its last step is
    step: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    steps: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


#: columns added to a table after farms had created it: (table, column, its SQL type and
#: default); ``create_all`` makes missing tables only, so a farm database gains these
#: with ``ALTER TABLE ... ADD COLUMN`` (SQLite and PostgreSQL both take it with a default)
ADDED_COLUMNS = (
    ("campaign_jobs", "step", "INTEGER NOT NULL DEFAULT 1"),
    ("campaign_jobs", "steps", "INTEGER NOT NULL DEFAULT 1"),
    ("exports", "facts_json", "TEXT"),
    ("jobs", "cancelled_in", "VARCHAR(16)"),
    ("jobs", "failure_class", "VARCHAR(16)"),
    ("jobs", "attempt", "INTEGER NOT NULL DEFAULT 1"),
    ("jobs", "retries", "INTEGER"),
    ("boards", "drain_reason", "TEXT"),
    ("boards", "drained_at", "FLOAT"),
    ("boards", "drained_by", "VARCHAR(64)"),
)


class Reservation(Base):
    """A labgrid reservation the service created, owned by the job it queues (or whose
    board it locks again): cancelled with the job, swept if the job ended without it.
    ``created_at`` is what labgrid orders reservations of equal priority by."""

    __tablename__ = "reservations"
    token: Mapped[str] = mapped_column(String(32), primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    #: queue (the job waits for a board) | relock (its board after a coordinator restart)
    purpose: Mapped[str] = mapped_column(String(16), default="queue")
    prio: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[float] = mapped_column(Float, default=now)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class JobEvent(Base):
    """One line of a job's history: a state change, a stage progress update, a notice."""

    __tablename__ = "job_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    at: Mapped[float] = mapped_column(Float, default=now)
    kind: Mapped[str] = mapped_column(String(16))  # state | stage | notice
    state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    stage: Mapped[str | None] = mapped_column(String(32), nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")


class JobAttempt(Base):
    """One run of a job on a board that ended: which board, how it ended and, for a
    failure, whose it was and its error (an infrastructure failure is retried, so a job
    can have several). A table of its own: an older farm database gains it as it is."""

    __tablename__ = "job_attempts"
    __table_args__ = (UniqueConstraint("job_id", "number"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    board: Mapped[str | None] = mapped_column(String(64), nullable=True)
    agent_name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: done | failed | cancelled
    state: Mapped[str] = mapped_column(String(16))
    failure_class: Mapped[str | None] = mapped_column(String(16), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float] = mapped_column(Float, default=now)
    #: the job went back to the queue for another board after this attempt
    retried: Mapped[bool] = mapped_column(Boolean, default=False)


class JobPhase(Base):
    """How long one phase of a job took on its board's host (lock, claim, fetch, start,
    deploy, exit, upload), as its agent reported it with the job's end."""

    __tablename__ = "job_phases"
    __table_args__ = (UniqueConstraint("job_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    name: Mapped[str] = mapped_column(String(32))
    seconds: Mapped[float] = mapped_column(Float)


class HealthRun(Base):
    """One health check of a board (``farm.health``): its golden jobs (the known outputs,
    the figure against its band), what triggered it and how it ended."""

    __tablename__ = "health_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    board: Mapped[str] = mapped_column(String(64), index=True)
    target: Mapped[str] = mapped_column(String(64))
    #: schedule | agent restart | failures | readmission | admin
    trigger: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[float] = mapped_column(Float, default=now, index=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: pending | passed | failed | cancelled (a golden job was cancelled: no verdict)
    outcome: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    output_job: Mapped[int | None] = mapped_column(Integer, nullable=True)
    figure_job: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: the figure of the figure job (cycles per inference, or latency), its unit and
    #: provenance, and the reference and band it was held to
    figure: Mapped[float | None] = mapped_column(Float, nullable=True)
    figure_unit: Mapped[str | None] = mapped_column(String(16), nullable=True)
    figure_provenance: Mapped[str | None] = mapped_column(String(32), nullable=True)
    reference: Mapped[float | None] = mapped_column(Float, nullable=True)
    band: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: why it failed (or what it found), and what it did to the board
    reason: Mapped[str] = mapped_column(Text, default="")
    action: Mapped[str] = mapped_column(String(16), default="")


class Database:
    """Engine + session factory; ``session()`` is a unit of work committed on success."""

    def __init__(self, url: str) -> None:
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            _private_file(url)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            # as many kept connections as request threads (anyio's pool: 40): beyond
            # the default 5 + 10, a burst of requests waited for a connection, and each
            # overflow one was opened (WAL pragmas) and closed again per request
            kwargs["pool_size"] = SQLITE_POOL_SIZE
            kwargs["max_overflow"] = 8
        self.url = url
        #: a SQLite file in WAL mode (``_sqlite_pragmas``): a read never waits for a
        #: writer and takes tens of microseconds, less than a hop to a thread would
        self.reads_are_quick = url.startswith("sqlite")
        self.engine: Engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._factory = sessionmaker(self.engine, expire_on_commit=False)
        Base.metadata.create_all(self.engine)
        _add_columns(self.engine)

    @property
    def sessions(self) -> sessionmaker[Session]:
        """The session factory (to listen to its events)."""
        return self._factory

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self._factory() as s:
            try:
                yield s
                s.commit()
            except BaseException:
                s.rollback()
                raise

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A plain connection for a read that needs no ORM object (its transaction is
        rolled back on return)."""
        with self.engine.connect() as conn:
            yield conn

    def dispose(self) -> None:
        self.engine.dispose()


def _add_columns(engine: Engine) -> None:
    """The ``ADDED_COLUMNS`` a database made before them lacks."""
    found = inspect(engine)
    missing = [
        (table, column, sql)
        for table, column, sql in ADDED_COLUMNS
        if column not in {c["name"] for c in found.get_columns(table)}
    ]
    if missing:
        with engine.begin() as conn:
            for table, column, sql in missing:
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {sql}"))


def _private_file(url: str) -> None:
    """The SQLite file is its owner's only (``0600``), created so before SQLite opens it
    (its journal files take the same mode)."""
    name = make_url(url).database
    if not name or name == ":memory:":
        return
    path = Path(name)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


__all__ = [
    "Agent",
    "ApiToken",
    "Base",
    "Board",
    "CampaignJob",
    "Database",
    "ExportOwner",
    "ExportRecord",
    "HealthRun",
    "Job",
    "JobAttempt",
    "JobEvent",
    "JobPhase",
    "Reservation",
    "Token",
    "User",
    "now",
]
