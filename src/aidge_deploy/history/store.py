"""The results history: a database of every recorded run's figures (SQLAlchemy 2).

A SQLite file by default (``HistoryStore("results.db")``), or any SQLAlchemy URL
(``postgresql+psycopg://user@host/db`` with the ``postgres`` extra). Its tables are named
``history_*``, so the history can live in a database of its own or beside other tables (the
board farm keeps its jobs' history in its own database this way).

Each record holds the run's identity, every figure of its result bundle with unit,
provenance and timer resolution (an unavailable figure with its reason), the
comparability facts, the user's commit and branch, who recorded it (``source``: pytest,
profile, validate, campaign, farm, ...) and when. ``accepted`` says whether the record may
serve as a baseline: a run that failed its regression gate is recorded but not accepted,
so the next run is still compared with the last good one.

Callers use ``record`` (a ``DeployResult`` or a bundle folder and an identity) and the
queries (``records``, ``previous``, ``window``, ``series``); nothing else of SQLAlchemy
leaks out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    inspect,
    select,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import (
    ArgumentError,
    DatabaseError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

from aidge_deploy.errors import ConfigError
from aidge_deploy.history.identity import Comparability, RunIdentity, bundle_facts
from aidge_deploy.history.vcs import VcsInfo, detect_vcs
from aidge_deploy.metrics import Band
from aidge_deploy.report.compare import LAYER_PREFIX, Figure, figures
from aidge_deploy.report.reader import read_summary

if TYPE_CHECKING:
    from aidge_deploy.results import DeployResult

#: how long a writer waits for another process's SQLite write lock (xdist workers, CI jobs)
SQLITE_BUSY_TIMEOUT_S = 60.0


class HistoryBase(DeclarativeBase):
    pass


class RunRow(HistoryBase):
    __tablename__ = "history_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    identity_key: Mapped[str] = mapped_column(String(600), index=True)
    name: Mapped[str] = mapped_column(String(400), index=True)
    target: Mapped[str] = mapped_column(String(64), index=True)
    board: Mapped[str | None] = mapped_column(String(64), nullable=True)
    kind: Mapped[str] = mapped_column(String(32))
    dtype: Mapped[str] = mapped_column(String(16))
    iterations: Mapped[int | None] = mapped_column(Integer, nullable=True)
    recorded_at: Mapped[float] = mapped_column(Float, index=True)
    source: Mapped[str] = mapped_column(String(32))
    accepted: Mapped[bool] = mapped_column(Boolean, default=True)
    commit: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    branch: Mapped[str | None] = mapped_column(String(200), nullable=True)
    ci: Mapped[str | None] = mapped_column(String(32), nullable=True)
    commit_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    dirty: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    provenance: Mapped[str] = mapped_column(String(16))
    aidge_version: Mapped[str | None] = mapped_column(String(32), nullable=True)
    comparability: Mapped[str] = mapped_column(Text)  # JSON of Comparability.as_dict()
    bundle: Mapped[str | None] = mapped_column(Text, nullable=True)
    bundle_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: what the recorder calls this run (``farm-job:42``, a campaign cell), for its links
    ref: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)


class FigureRow(HistoryBase):
    __tablename__ = "history_figures"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("history_runs.id"), index=True)
    name: Mapped[str] = mapped_column(String(400), index=True)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    unit: Mapped[str] = mapped_column(String(32))
    provenance: Mapped[str] = mapped_column(String(16))
    resolution: Mapped[float | None] = mapped_column(Float, nullable=True)
    unavailable_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: an estimate's band (fractions below and above its value, how the model sized them)
    band_below: Mapped[float | None] = mapped_column(Float, nullable=True)
    band_above: Mapped[float | None] = mapped_column(Float, nullable=True)
    band_basis: Mapped[str | None] = mapped_column(Text, nullable=True)


#: columns added to a table after its first release: (table, column, SQL type), added to a
#: history written before them when it is opened (nullable: old rows have none)
_ADDED_COLUMNS = (
    ("history_figures", "band_below", "FLOAT"),
    ("history_figures", "band_above", "FLOAT"),
    ("history_figures", "band_basis", "TEXT"),
)


def _add_missing_columns(engine: Engine) -> None:
    """Bring a history written by an older aidge-deploy up to the table's columns."""
    present: dict[str, set[str]] = {}
    inspector = inspect(engine)
    for table, column, sql_type in _ADDED_COLUMNS:
        if table not in present:
            present[table] = {c["name"] for c in inspector.get_columns(table)}
        if column not in present[table]:
            with engine.begin() as connection:
                connection.execute(sql_text(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}"))
            present[table].add(column)


@dataclass(frozen=True)
class HistoryRecord:
    """One recorded run, as the queries return it."""

    id: int
    identity: RunIdentity
    recorded_at: float
    source: str
    accepted: bool
    vcs: VcsInfo
    comparability: Comparability
    figures: Mapping[str, Figure]
    bundle: Path | None = None
    bundle_run_id: str | None = None
    ref: str | None = None

    @property
    def label(self) -> str:
        """The commit (short) or, without one, the record's time."""
        if self.vcs.commit:
            return self.vcs.short
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.recorded_at))


@dataclass(frozen=True)
class SeriesPoint:
    """One value of one figure of an identity (None: unavailable in that run)."""

    record: HistoryRecord
    figure: Figure


def bundle_figures(bundle: Path) -> dict[str, Figure]:
    """Every figure of a result bundle (its ``summary.json``, of any version this tool
    reads), per-layer ones included."""
    return figures(read_summary(Path(bundle)))


def database_url(location: str | Path) -> str:
    """A SQLAlchemy URL from a URL or a file path (``results.db`` -> ``sqlite:///...``)."""
    text = str(location)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().absolute()}"


class HistoryStore:
    """A results history (see the module docstring)."""

    def __init__(self, location: str | Path | Engine) -> None:
        if isinstance(location, Engine):
            self.engine = location
            self.url = str(location.url)
        else:
            self.url = database_url(location)
            self.engine = _engine(self.url, location)
        self.location = str(location) if not isinstance(location, Engine) else self.url
        try:
            HistoryBase.metadata.create_all(self.engine)
            _add_missing_columns(self.engine)
        except OperationalError as exc:
            raise ConfigError(
                f"Cannot open the results history {location}: {exc.orig}",
                hint="Pass a writable file path (a SQLite file is created) or a database URL.",
            ) from None
        except DatabaseError as exc:
            raise self._unusable(exc) from None
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def _unusable(self, exc: DatabaseError) -> ConfigError:
        """A history file that is not a database (another file, a damaged SQLite file)."""
        return ConfigError(
            f"The results history {self.location} is not a usable database: {exc.orig}",
            hint="Pass a results history aidge-deploy wrote, a new file path (it is created) "
            "or a database URL; move the damaged file aside (nothing was written to it).",
        )

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with self._sessions() as session, session.begin():
                yield session
        except IntegrityError:
            raise
        except DatabaseError as exc:  # damaged after it was opened (a page read fails)
            raise self._unusable(exc) from None

    # ---------------------------------------------------------------- writing

    def record(
        self,
        result: DeployResult | Path,
        identity: RunIdentity | str,
        *,
        board: str | None = None,
        source: str = "api",
        vcs: VcsInfo | None = None,
        accepted: bool = True,
        project_dir: Path | None = None,
        ref: str | None = None,
    ) -> HistoryRecord:
        """Record a run from its result bundle (a ``DeployResult`` that wrote one, or the
        bundle's folder).

        ``identity`` is a ``RunIdentity``, or just its name: the target, kind, dtype and
        iterations are then read from the bundle, and ``board`` (a lab or farm board's name)
        is part of it. ``board`` is always recorded as a fact of the run (default: the
        identity's). ``vcs`` defaults to the commit and branch of ``project_dir`` (the
        working folder).
        """
        bundle = result if isinstance(result, Path) else result.report_dir
        if bundle is None:
            raise ConfigError(
                "this run wrote no result bundle: the history records a run from its bundle",
                hint="Set DeployConfig.report_dir (the CLI's --history writes one for you).",
            )
        if board is None and not isinstance(identity, str):
            board = identity.board
        facts = bundle_facts(Path(bundle), board=board)
        if isinstance(identity, str):
            identity = facts.identity(identity, board)
        return self.add(
            identity,
            bundle_figures(Path(bundle)),
            facts.comparability,
            source=source,
            vcs=vcs if vcs is not None else detect_vcs(project_dir),
            accepted=accepted,
            bundle=Path(bundle).absolute(),
            bundle_run_id=facts.run_id,
            ref=ref,
        )

    def add(
        self,
        identity: RunIdentity,
        run_figures: Mapping[str, Figure],
        comparability: Comparability,
        *,
        source: str,
        vcs: VcsInfo | None = None,
        accepted: bool = True,
        bundle: Path | None = None,
        bundle_run_id: str | None = None,
        recorded_at: float | None = None,
        ref: str | None = None,
    ) -> HistoryRecord:
        """Record figures that are already at hand (no bundle needed)."""
        vcs = vcs or VcsInfo()
        row = RunRow(
            identity_key=identity.key,
            name=identity.name,
            target=identity.target,
            board=identity.board,
            kind=identity.kind,
            dtype=identity.dtype,
            iterations=identity.iterations,
            recorded_at=time.time() if recorded_at is None else recorded_at,
            source=source,
            accepted=accepted,
            commit=vcs.commit,
            branch=vcs.branch,
            ci=vcs.ci,
            commit_time=vcs.commit_time,
            dirty=vcs.dirty,
            provenance=comparability.provenance,
            aidge_version=comparability.aidge_version,
            comparability=json.dumps(comparability.as_dict(), sort_keys=True),
            bundle=None if bundle is None else str(bundle),
            bundle_run_id=bundle_run_id,
            ref=ref,
        )
        with self._session() as session:
            session.add(row)
            session.flush()
            session.add_all(
                FigureRow(
                    run_id=row.id,
                    name=name,
                    value=fig.value,
                    unit=fig.unit,
                    provenance=fig.provenance,
                    resolution=fig.resolution,
                    unavailable_reason=fig.unavailable_reason,
                    band_below=None if fig.band is None else fig.band.below,
                    band_above=None if fig.band is None else fig.band.above,
                    band_basis=None if fig.band is None else fig.band.basis,
                )
                for name, fig in run_figures.items()
            )
        # as the queries return it: headline figures only
        return _record(
            row, {k: f for k, f in run_figures.items() if not k.startswith(LAYER_PREFIX)}
        )

    def set_accepted(self, record_id: int, accepted: bool) -> None:
        """Let a record serve as a baseline, or not (its regression gate failed)."""
        with self._session() as session:
            session.execute(update(RunRow).where(RunRow.id == record_id).values(accepted=accepted))

    # ---------------------------------------------------------------- reading

    def records(
        self,
        *,
        identity: RunIdentity | None = None,
        name: str | None = None,
        target: str | None = None,
        board: str | None = None,
        branch: str | None = None,
        commit: str | None = None,
        source: str | None = None,
        accepted_only: bool = False,
        before_id: int | None = None,
        limit: int | None = None,
        layers: bool = False,
        refs: Sequence[str] | None = None,
    ) -> list[HistoryRecord]:
        """Records matching every filter given, oldest first (``limit``: the newest ones).

        ``name`` and ``commit`` match a prefix (``commit="3f2a"``); ``refs`` keeps the
        records with one of those references; per-layer figures are read only with
        ``layers=True``.
        """
        query = select(RunRow)
        if identity is not None:
            query = query.where(RunRow.identity_key == identity.key)
        if name is not None:
            query = query.where(RunRow.name.startswith(name, autoescape=True))
        for column, value in (
            (RunRow.target, target),
            (RunRow.board, board),
            (RunRow.branch, branch),
            (RunRow.source, source),
        ):
            if value is not None:
                query = query.where(column == value)
        if commit is not None:
            query = query.where(RunRow.commit.startswith(commit, autoescape=True))
        if accepted_only:
            query = query.where(RunRow.accepted.is_(True))
        if refs is not None:
            query = query.where(RunRow.ref.in_(list(refs)))
        if before_id is not None:
            query = query.where(RunRow.id < before_id)
        query = query.order_by(RunRow.id.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._session() as session:
            rows = list(reversed(session.scalars(query).all()))
            found = self._figures(session, [r.id for r in rows], layers)
        return [_record(r, found.get(r.id, {})) for r in rows]

    @staticmethod
    def _figures(
        session: Session, ids: Sequence[int], layers: bool
    ) -> dict[int, dict[str, Figure]]:
        out: dict[int, dict[str, Figure]] = {}
        for start in range(0, len(ids), 500):  # bounded IN lists
            query = select(FigureRow).where(FigureRow.run_id.in_(ids[start : start + 500]))
            if not layers:
                query = query.where(~FigureRow.name.startswith(LAYER_PREFIX))
            for f in session.scalars(query.order_by(FigureRow.id)):
                band = None
                if f.band_below is not None and f.band_above is not None:
                    band = Band(f.band_below, f.band_above, f.band_basis or "")
                out.setdefault(f.run_id, {})[f.name] = Figure(
                    f.value, f.unit, f.provenance, f.resolution, f.unavailable_reason, band
                )
        return out

    def _series_query(self, identity: RunIdentity) -> Any:
        """The accepted rows of the same name, target, kind, dtype and iterations (the board
        is matched by ``accepted``)."""
        query = select(RunRow).where(
            RunRow.name == identity.name,
            RunRow.target == identity.target,
            RunRow.kind == identity.kind,
            RunRow.dtype == identity.dtype,
            RunRow.accepted.is_(True),
        )
        if identity.iterations is None:
            return query.where(RunRow.iterations.is_(None))
        return query.where(RunRow.iterations == identity.iterations)

    def accepted(
        self, identity: RunIdentity, *, before_id: int | None = None, limit: int = 50
    ) -> list[HistoryRecord]:
        """The latest ``limit`` accepted records of ``identity``'s series, newest first.

        An identity without a board continues its series whichever board ran each record;
        one with a board (a per-board series) takes the records of that board: those that
        named it in their identity, and those that only recorded it as the board that ran
        them."""
        query = self._series_query(identity)
        if before_id is not None:
            query = query.where(RunRow.id < before_id)
        query = query.order_by(RunRow.id.desc())
        if identity.board is None:
            query = query.limit(limit)
        with self._session() as session:
            rows = list(session.scalars(query).all())
            found = self._figures(session, [r.id for r in rows], False)
        records = [_record(r, found.get(r.id, {})) for r in rows]
        if identity.board is not None:
            records = [
                r for r in records if (r.identity.board or r.comparability.board) == identity.board
            ][:limit]
        return records

    def previous(
        self, identity: RunIdentity, *, before_id: int | None = None
    ) -> HistoryRecord | None:
        """The latest accepted record of ``identity``'s series (before record ``before_id``)."""
        found = self.accepted(identity, before_id=before_id, limit=1)
        return found[0] if found else None

    def previous_of_test(
        self, identity: RunIdentity, *, before_id: int | None = None
    ) -> HistoryRecord | None:
        """The latest accepted record of the same test and target, whatever its kind,
        dtype, iterations or board (to say why it is not comparable)."""
        query = (
            select(RunRow.id)
            .where(
                RunRow.name == identity.name,
                RunRow.target == identity.target,
                RunRow.accepted.is_(True),
            )
            .order_by(RunRow.id.desc())
        )
        if before_id is not None:
            query = query.where(RunRow.id < before_id)
        with self._session() as session:
            found = session.scalars(query.limit(1)).first()
        if found is None:
            return None
        return self.records(before_id=found + 1, limit=1)[0]

    def window(
        self,
        identity: RunIdentity,
        comparability: Comparability,
        size: int,
        *,
        before_id: int | None = None,
    ) -> list[HistoryRecord]:
        """The last ``size`` accepted records of ``identity`` comparable with
        ``comparability`` (oldest first): the spread a new measurement is judged against."""
        found: list[HistoryRecord] = []
        for record in self.accepted(identity, before_id=before_id, limit=max(50, 5 * size)):
            if not record.comparability.blocking_differences(comparability):
                found.append(record)
                if len(found) == size:
                    break
        return list(reversed(found))

    def identities(self) -> list[RunIdentity]:
        """Every identity with at least one record."""
        query = select(
            RunRow.name, RunRow.target, RunRow.board, RunRow.kind, RunRow.dtype, RunRow.iterations
        ).distinct()
        with self._session() as session:
            rows = session.execute(query).all()
        return sorted(RunIdentity(*row) for row in rows)

    def series(self, identity: RunIdentity, metric: str) -> list[SeriesPoint]:
        """Every record of ``identity`` that has figure ``metric``, oldest first."""
        layers = metric.startswith(LAYER_PREFIX)
        return [
            SeriesPoint(r, r.figures[metric])
            for r in self.records(identity=identity, layers=layers)
            if metric in r.figures
        ]


def _engine(url: str, location: str | Path) -> Engine:
    try:
        if url in ("sqlite://", "sqlite:///:memory:"):  # one database, whichever thread asks
            return create_engine(
                url, connect_args={"check_same_thread": False}, poolclass=StaticPool
            )
        if url.startswith("sqlite"):
            if "://" not in str(location):
                path = Path(str(location)).expanduser().absolute()
                if path.is_dir():
                    raise ConfigError(
                        f"--history {location} is a folder, not a database file",
                        hint="Pass a file path (e.g. results.db) or a database URL.",
                    )
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise ConfigError(
                        f"Cannot create the folder of the results history {location}: "
                        f"{exc.strerror}",
                        hint="Pass a path in a writable folder.",
                    ) from None
            # one store may be used from several threads (multitarget's jobs)
            return create_engine(
                url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            )
        return create_engine(url, pool_pre_ping=True)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise ConfigError(
            f"Cannot use the results history {location}: {exc}",
            hint="Pass a SQLite file path or a SQLAlchemy URL; PostgreSQL "
            "(postgresql+psycopg://...) needs `pip install aidge-deploy[postgres]`.",
        ) from None


def _record(row: RunRow, found: Mapping[str, Figure]) -> HistoryRecord:
    comp: dict[str, Any] = json.loads(row.comparability)
    return HistoryRecord(
        id=row.id,
        identity=RunIdentity(row.name, row.target, row.board, row.kind, row.dtype, row.iterations),
        recorded_at=row.recorded_at,
        source=row.source,
        accepted=row.accepted,
        vcs=VcsInfo(row.commit, row.branch, row.ci, row.commit_time, row.dirty),
        comparability=Comparability.from_dict(comp),
        figures=dict(found),
        bundle=None if row.bundle is None else Path(row.bundle),
        bundle_run_id=row.bundle_run_id,
        ref=row.ref,
    )
