"""Board health checks: golden jobs, drain on failure, readmission after clean runs.

Each board runs a *golden run* — two jobs of a tiny model the farm makes itself
(``farm.golden``): an ``output`` export whose printed outputs must equal the reference
computed with NumPy, and a ``benchmark`` export whose figure (cycles per inference, emulated boards: the timing model's estimated
cycles; else latency) must lie within ``band`` of the target's reference (the figure of
the target's first passing golden run, kept in the database with its provenance). A golden
run is due on a schedule (``interval_s``), after the board's agent restarts, and after
``failures`` runs in a row failed on the board for a reason that is not the user's
(``counts_against_board``: their failure class is ``infrastructure``); the board is held
out of the queue meanwhile.

Golden jobs are ordinary farm jobs of the ``health-check`` account (disabled: nobody logs
in as it), queued in labgrid like every job (``dispatch``) with a high priority, on the
board by name; they may take a drained board, since readmission needs them (its place's
``health`` tag: ``yes`` while its agent is up). A board whose golden run fails is drained
(``offline: health check failed``) and tried again every ``recheck_s``; it is admitted
again after ``clean`` passing runs in a row. Admins drain and admit by hand
(``drain_board``, ``admit_board``: the REST API, ``aidge-deploy farm board``, ``/admin``).
Every run is a ``HealthRun`` row: time, trigger, outcome, figure, reason, action.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from aidge_deploy.farm.auth import Principal, hash_password
from aidge_deploy.farm.db import Agent, Board, Database, HealthRun, Job, JobAttempt, User, now
from aidge_deploy.farm.failures import fail_pinned_retries
from aidge_deploy.farm.golden import GoldenExports, expected_outputs
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.settings import FarmSettings
from aidge_deploy.farm.states import TERMINAL, FailureClass, JobState, Role

log = logging.getLogger("aidge_deploy.farm")

HEALTH_USER = "health-check"
DRAIN_REASON = "offline: health check failed"
HEALTH_DRAINER = "health check"
#: golden jobs go before users' jobs on their board
GOLDEN_PRIORITY = 100.0
#: how close the printed outputs must be to the reference (absolute, float32)
OUTPUT_TOLERANCE = 1e-4
#: figures tried in order: a board's own cycle count, the timing model's, the latency
FIGURES = ("cycles", "estimated_cycles", "latency")


def counts_against_board(failure_class: str | None) -> bool:
    """Whether a failed run counts towards its board's health check: the one place that
    says it — a failure of the lab's (``farm.failures.classify``: board unreachable, flash
    failed, agent lost, the emulator crashed), not the user's (build error, model crash)."""
    return failure_class == FailureClass.INFRASTRUCTURE.value


# --- drain and admit (admins, and the checks themselves) ----------------------------------


def _board(s: Session, name: str) -> Board:
    board = s.get(Board, name)
    if board is None:
        names = sorted(s.scalars(select(Board.name)))
        raise FarmRequestError(
            404, f"the farm has no board {name!r}", f"Boards: {', '.join(names) or '(none)'}."
        )
    return board


def drain_board(s: Session, name: str, reason: str, by: str) -> Board:
    """Take board ``name`` out of service (its running job finishes; no new job lands)."""
    board = _board(s, name)
    board.drained = True
    board.drain_reason = reason.strip() or "drained by an admin"
    board.drained_at = now()
    board.drained_by = by
    return board


def admit_board(s: Session, name: str, by: str) -> Board:
    """Return board ``name`` to service."""
    board = _board(s, name)
    if board.drained:
        log.info("board %s admitted by %s (was drained: %s)", name, by, board.drain_reason)
    board.drained = False
    board.drain_reason = None
    board.drained_at = None
    board.drained_by = None
    return board


def known_boards(s: Session, names: Iterable[str]) -> list[str]:
    """Those of ``names`` the farm knew before (an agent registering them again restarted)."""
    wanted = list(names)
    return list(s.scalars(select(Board.name).where(Board.name.in_(wanted)))) if wanted else []


# --- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunView:
    id: int
    board: str
    trigger: str
    created_at: float
    ended_at: float | None
    outcome: str
    figure: float | None
    figure_unit: str | None
    figure_provenance: str | None
    reference: float | None
    band: float | None
    reason: str
    action: str
    output_job: int | None
    figure_job: int | None

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @property
    def log_job(self) -> int | None:
        """The golden job whose log tells what went wrong (or the output job)."""
        if self.outcome == "failed" and self.reason.startswith("figure job"):
            return self.figure_job
        return self.output_job


def history(s: Session, board: str | None = None, limit: int = 50) -> list[RunView]:
    q = select(HealthRun).order_by(HealthRun.id.desc()).limit(limit)
    if board is not None:
        q = q.where(HealthRun.board == board)
    return [
        RunView(
            id=r.id,
            board=r.board,
            trigger=r.trigger,
            created_at=r.created_at,
            ended_at=r.ended_at,
            outcome=r.outcome,
            figure=r.figure,
            figure_unit=r.figure_unit,
            figure_provenance=r.figure_provenance,
            reference=r.reference,
            band=r.band,
            reason=r.reason,
            action=r.action,
            output_job=r.output_job,
            figure_job=r.figure_job,
        )
        for r in s.scalars(q)
    ]


def last_runs(s: Session) -> dict[str, tuple[str, float, int]]:
    """Each board's last health check: (outcome, when it ended or started, its id)."""
    newest = select(func.max(HealthRun.id)).group_by(HealthRun.board)
    return {
        r.board: (r.outcome, r.ended_at or r.created_at, r.id)
        for r in s.scalars(select(HealthRun).where(HealthRun.id.in_(newest)))
    }


def drain_runs(s: Session) -> dict[str, int]:
    """Each board's newest health check that drained it (its log explains the drain)."""
    newest = (
        select(func.max(HealthRun.id))
        .where(HealthRun.action == "drained")
        .group_by(HealthRun.board)
    )
    return {
        board: run_id
        for board, run_id in s.execute(
            select(HealthRun.board, HealthRun.id).where(HealthRun.id.in_(newest))
        )
    }


def golden_job_ids(s: Session, board: str, run_id: int) -> list[int]:
    run = s.get(HealthRun, run_id)
    if run is None or run.board != board:
        raise FarmRequestError(404, f"board {board} has no health run {run_id}")
    return [j for j in (run.output_job, run.figure_job) if j is not None]


def golden_run_log(s: Session, jobs_dir: Path, board: str, run_id: int) -> str:
    """The board host's logs of a golden run's jobs, one after the other (the farm's own
    model: no user's data): what the API and the board's health page serve."""
    parts = []
    for job_id in golden_job_ids(s, board, run_id):
        path = jobs_dir / str(int(job_id)) / "log.txt"
        text = path.read_text(errors="replace") if path.is_file() else "(no log: see the job)"
        parts.append(f"==> golden job {job_id} <==\n{text}")
    return "\n".join(parts)


# --- the checks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    figure: float | None = None
    unit: str | None = None
    provenance: str | None = None


def _result(jobs_dir: Path, job_id: int) -> Any:
    from aidge_deploy.farm.resultcodec import decode_result

    path = jobs_dir / str(job_id) / "result.json"
    return decode_result(json.loads(path.read_text(encoding="utf-8")))


def judge_outputs(result: Any) -> str | None:
    """Why the printed outputs are not the golden ones, or None."""
    want = expected_outputs()
    outputs = result.output if isinstance(result.output, list) else None
    if not outputs:
        return "the output job printed no outputs"
    got = np.asarray(outputs[0], dtype=np.float64).reshape(-1)
    if got.shape != want.shape or not np.allclose(got, want, atol=OUTPUT_TOLERANCE, rtol=0):
        return f"outputs differ from the golden ones: got {got.tolist()}, want {want.tolist()}"
    return None


def figure_of(result: Any) -> tuple[float, str, str] | None:
    """(value, unit, provenance) of the first available figure in ``FIGURES``."""
    for name in FIGURES:
        m = result.metric(name)
        if m is not None and m.value is not None and m.unavailable_reason is None:
            return float(m.value), f"{m.unit}", f"{name}: {m.provenance}"
    return None


class HealthChecks:
    """The service's health checks, driven from the dispatcher's loop (``tick``)."""

    def __init__(self, settings: FarmSettings, db: Database, store: Any) -> None:
        self.settings = settings
        self.conf = settings.health
        self.db = db
        self.golden = GoldenExports(settings, store, db)
        self.user_id = self._ensure_user()
        self.who = Principal(self.user_id, HEALTH_USER, Role.USER)
        self._due: dict[str, str] = {}
        self._lock = threading.Lock()
        self._started = now()
        #: boards held out of users' queue while a check triggered by failures runs
        self.suspect: frozenset[str] = frozenset()
        self._boards_changed: Callable[[], None] = lambda: None
        self._wake: Callable[[], None] = lambda: None

    def bind(self, boards_changed: Callable[[], None], wake: Callable[[], None]) -> None:
        self._boards_changed = boards_changed
        self._wake = wake

    def _ensure_user(self) -> int:
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.name == HEALTH_USER))
            if user is None:
                user = User(
                    name=HEALTH_USER,
                    password_hash=hash_password(os.urandom(24).hex()),
                    role=Role.USER.value,
                    disabled=True,
                )
                s.add(user)
                s.flush()
            return int(user.id)

    def is_golden(self, user_id: int) -> bool:
        return user_id == self.user_id

    def request(self, boards: Iterable[str], trigger: str) -> None:
        """A golden run on each of ``boards`` as soon as it can (agent restart, admin)."""
        if not self.conf.enabled:
            return
        with self._lock:
            for board in boards:
                self._due.setdefault(board, trigger)
        self._wake()

    # --- one pass ---------------------------------------------------------------------

    def tick(self) -> None:
        """Judge the golden runs whose jobs ended, then start those that are due."""
        if not self.conf.enabled:
            return
        changed = False
        with self.db.session() as s:
            for run in list(s.scalars(select(HealthRun).where(HealthRun.outcome == "pending"))):
                changed |= self._judge(s, run)
        with self.db.session() as s:
            started, suspect = self._start_due(s)
        if suspect != self.suspect:
            self.suspect = suspect
            changed = True
        if changed:
            self._boards_changed()
        if started:
            self._wake()

    def _start_due(self, s: Session) -> tuple[bool, frozenset[str]]:
        t = now()
        online = {a.name for a in s.scalars(select(Agent).where(Agent.online.is_(True)))}
        pending = {
            r.board: r.trigger
            for r in s.scalars(select(HealthRun).where(HealthRun.outcome == "pending"))
        }
        suspect = {b for b, trigger in pending.items() if trigger == "failures"}
        started = False
        for board in list(s.scalars(select(Board).order_by(Board.name))):
            if board.name in pending or not board.online or board.agent_name not in online:
                continue
            trigger = self._trigger(s, board, t)
            if trigger is None:
                continue
            hashes = self.golden.get(board.target, self.who)
            if hashes is None:
                if trigger == "failures":
                    suspect.add(board.name)
                continue  # being made: tried again at the next pass
            self._start(s, board, trigger, hashes)
            with self._lock:
                self._due.pop(board.name, None)
            if trigger == "failures":
                suspect.add(board.name)
            started = True
        return started, frozenset(suspect)

    def _trigger(self, s: Session, board: Board, t: float) -> str | None:
        last = s.scalar(
            select(HealthRun).where(HealthRun.board == board.name).order_by(HealthRun.id.desc())
        )
        with self._lock:
            asked = self._due.get(board.name)
        if asked is not None:
            return asked
        if board.drained:
            if board.drain_reason != DRAIN_REASON:
                return None  # drained by hand: left alone until an admin admits it
            ended = (last.ended_at or last.created_at) if last is not None else 0.0
            return "readmission" if t - ended >= self.conf.recheck_s else None
        since = max(last.created_at if last is not None else 0.0, self._started)
        if self._failures_since(s, board.name, since) >= self.conf.failures:
            return "failures"
        if self.conf.interval_s > 0 and t - since >= self.conf.interval_s:
            return "schedule"
        return None

    def _failures_since(self, s: Session, board: str, since: float) -> int:
        """Users' runs in a row, newest first, that failed on ``board`` for a reason that
        is not theirs (a retried job's failed attempt counts), among those that ended after
        ``since`` (its last health check, or the service's start)."""
        rows = s.execute(
            select(JobAttempt.state, JobAttempt.failure_class)
            .join(Job, Job.id == JobAttempt.job_id)
            .where(
                JobAttempt.board == board,
                Job.user_id != self.user_id,
                JobAttempt.state.in_([JobState.DONE.value, JobState.FAILED.value]),
                JobAttempt.ended_at > since,
            )
            .order_by(JobAttempt.ended_at.desc())
            .limit(self.conf.failures)
        )
        count = 0
        for state, failure_class in rows:
            if state != JobState.FAILED.value or not counts_against_board(failure_class):
                break
            count += 1
        return count

    def _start(self, s: Session, board: Board, trigger: str, hashes: tuple[str, str]) -> None:
        from aidge_deploy.farm.jobs import submit_job
        from aidge_deploy.farm.models import SubmitRequest

        ids = [
            submit_job(
                s,
                self.who,
                # not retried: a golden run's failure is the verdict on its board
                SubmitRequest(export=h, board=board.name, priority=GOLDEN_PRIORITY, retries=0),
            )
            for h in hashes
        ]
        s.add(
            HealthRun(
                board=board.name,
                target=board.target,
                trigger=trigger,
                output_job=ids[0],
                figure_job=ids[1],
                band=self.conf.band,
            )
        )
        log.info("health check of %s (%s): golden jobs %s", board.name, trigger, ids)

    # --- judging ----------------------------------------------------------------------

    def _judge(self, s: Session, run: HealthRun) -> bool:
        """Judge ``run`` once its jobs ended; whether a board changed (drained, admitted)."""
        jobs = [s.get(Job, run.output_job), s.get(Job, run.figure_job)]
        if any(j is None for j in jobs):
            run.outcome, run.reason, run.ended_at = "failed", "its golden jobs are gone", now()
            return False
        out_job, fig_job = (j for j in jobs if j is not None)
        if not all(j.job_state in TERMINAL for j in (out_job, fig_job)):
            return False
        cancelled = [j.id for j in (out_job, fig_job) if j.state == JobState.CANCELLED.value]
        if cancelled:  # someone cancelled it: no verdict on the board
            run.outcome, run.ended_at = "cancelled", now()
            run.reason = f"golden job {cancelled[0]} was cancelled"
            return False
        verdict = self._verdict(s, run, out_job, fig_job)
        run.ended_at = now()
        run.outcome = "passed" if verdict.passed else "failed"
        run.reason = verdict.reason
        run.figure, run.figure_unit = verdict.figure, verdict.unit
        run.figure_provenance = verdict.provenance
        board = s.get(Board, run.board)
        if board is None:
            return False
        if not verdict.passed:
            log.warning("board %s failed its health check: %s", board.name, verdict.reason)
            if not board.drained:
                drain_board(s, board.name, DRAIN_REASON, HEALTH_DRAINER)
                run.action = "drained"
                ended = fail_pinned_retries(s, board.name, DRAIN_REASON)
                if ended:
                    log.info("jobs %s asked for %s and failed on it: ended", ended, board.name)
                return True
            return False
        if board.drained and board.drain_reason == DRAIN_REASON:
            s.flush()
            clean = self._clean_since(s, board.name, board.drained_at or 0.0)
            if clean >= self.conf.clean:
                admit_board(s, board.name, HEALTH_DRAINER)
                run.action = "admitted"
                log.info("board %s admitted after %d clean golden runs", board.name, clean)
                return True
        return False

    def _clean_since(self, s: Session, board: str, since: float) -> int:
        count = 0
        for outcome in s.scalars(
            select(HealthRun.outcome)
            .where(HealthRun.board == board, HealthRun.ended_at.is_not(None))
            .where(HealthRun.created_at >= since)
            .order_by(HealthRun.id.desc())
        ):
            if outcome != "passed":
                break
            count += 1
        return count

    def _verdict(self, s: Session, run: HealthRun, out_job: Job, fig_job: Job) -> Verdict:
        jobs_dir = self.settings.jobs_dir
        for label, job in (("output job", out_job), ("figure job", fig_job)):
            if job.state != JobState.DONE.value:
                why = job.error or job.state
                return Verdict(False, f"{label} {job.id} {job.state}: {why}")
        try:
            outputs = _result(jobs_dir, out_job.id)
            figures = _result(jobs_dir, fig_job.id)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return Verdict(False, f"a golden job's result cannot be read: {exc}")
        wrong = judge_outputs(outputs)
        if wrong is not None:
            return Verdict(False, f"output job {out_job.id}: {wrong}")
        figure = figure_of(figures)
        if figure is None:
            return Verdict(False, f"figure job {fig_job.id}: no cycle count nor latency")
        value, unit, provenance = figure
        reference = _reference(s, run, unit, value)
        run.reference = reference
        band = run.band or self.conf.band
        if abs(value - reference) > band * reference:
            return Verdict(
                False,
                f"figure job {fig_job.id}: {value:g} {unit} is outside the band "
                f"{reference:g} {unit} ± {band:.0%}",
                value,
                unit,
                provenance,
            )
        return Verdict(
            True,
            f"outputs equal; {value:g} {unit} within {reference:g} {unit} ± {band:.0%}",
            value,
            unit,
            provenance,
        )


def _reference(s: Session, run: HealthRun, unit: str, value: float) -> float:
    """The target's reference figure: its first passing golden run's (``value``, this
    run's, when there is none yet)."""
    first = s.scalar(
        select(HealthRun.figure)
        .where(
            HealthRun.target == run.target,
            HealthRun.outcome == "passed",
            HealthRun.figure_unit == unit,
            HealthRun.figure.is_not(None),
        )
        .order_by(HealthRun.id)
    )
    return float(first) if first is not None else value


__all__ = [
    "DRAIN_REASON",
    "GOLDEN_PRIORITY",
    "HEALTH_USER",
    "HealthChecks",
    "RunView",
    "admit_board",
    "counts_against_board",
    "drain_board",
    "drain_runs",
    "figure_of",
    "golden_job_ids",
    "golden_run_log",
    "history",
    "judge_outputs",
    "known_boards",
    "last_runs",
]
