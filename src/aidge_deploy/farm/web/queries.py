"""What the dashboard's pages read from the farm's database, beyond the REST API's views.

Boards gain their last result and health (the outcome of their last ``HEALTH_WINDOW``
finished jobs); the job list gains filters (user, board, target, state). Visibility is the
API's: a user lists only their own jobs, an admin every job; a board's last result names
a job number and its owner (like "busy with whose job"), its page opens only for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.boards import board_views, held_message
from aidge_deploy.farm.db import Agent, Board, ExportOwner, ExportRecord, Job, User
from aidge_deploy.farm.models import BoardView
from aidge_deploy.farm.states import TERMINAL, JobState

#: how many finished jobs a board's health looks back on
HEALTH_WINDOW = 10
_FINISHED = (JobState.DONE.value, JobState.FAILED.value)
_TERMINAL = [st.value for st in TERMINAL]
_CHECK_BADGES = {"passed": "done", "failed": "failed", "pending": "queued"}


@dataclass(frozen=True)
class BoardRow:
    view: BoardView
    drained: bool
    last_job: int | None
    last_state: str | None
    last_at: float | None
    last_user: str | None
    health_done: int
    health_failed: int

    def as_dict(self, who: Principal) -> dict[str, Any]:
        data = self.view.model_dump(mode="json")
        data["held"] = held_message(self.view.held_by) if self.view.held_by else None
        data.update(
            drained=self.drained,
            last={
                "job": self.last_job,
                "state": self.last_state,
                "at": self.last_at,
                "user": self.last_user,
                "mine": self.last_user == who.name or who.is_admin,
            }
            if self.last_job is not None
            else None,
            health={
                "done": self.health_done,
                "failed": self.health_failed,
                "window": HEALTH_WINDOW,
            },
            job_mine=self.view.job_user == who.name or who.is_admin,
            # the last golden run (farm.health): its outcome, badge, time and log
            check={
                "outcome": self.view.health,
                "badge": _CHECK_BADGES.get(self.view.health or "", "queued"),
                "at": self.view.health_at,
                "run": self.view.health_run,
            }
            if self.view.health_run is not None
            else None,
        )
        return data


def board_rows(s: Session, held: Mapping[str, str] | None = None) -> list[BoardRow]:
    """Every board with its last result and health; ``held``: places held outside the
    farm (``Dispatcher.held_outside``)."""
    views = board_views(s, held)
    drained = {b.name: b.drained for b in s.scalars(select(Board))}
    rank = (
        func.row_number()
        .over(partition_by=Job.board, order_by=func.coalesce(Job.done_at, Job.failed_at).desc())
        .label("rank")
    )
    recent = (
        select(
            Job.board,
            Job.id,
            Job.state,
            func.coalesce(Job.done_at, Job.failed_at).label("at"),
            User.name,
            rank,
        )
        .join(User, User.id == Job.user_id)
        .where(Job.state.in_(_FINISHED), Job.board.is_not(None))
        .subquery()
    )
    rows = s.execute(select(recent).where(recent.c.rank <= HEALTH_WINDOW)).all()
    per_board: dict[str, list[Any]] = {}
    for row in rows:
        per_board.setdefault(row.board, []).append(row)
    out = []
    for v in views:
        history = sorted(per_board.get(v.name, []), key=lambda r: r.rank)
        last = history[0] if history else None
        out.append(
            BoardRow(
                view=v,
                drained=drained.get(v.name, False),
                last_job=last.id if last else None,
                last_state=last.state if last else None,
                last_at=last.at if last else None,
                last_user=last.name if last else None,
                health_done=sum(1 for r in history if r.state == JobState.DONE.value),
                health_failed=sum(1 for r in history if r.state == JobState.FAILED.value),
            )
        )
    return out


@dataclass(frozen=True)
class JobFilters:
    user: str = ""
    board: str = ""
    target: str = ""
    state: str = ""

    def as_query(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if v}


@dataclass(frozen=True)
class JobRow:
    id: int
    state: str
    stage: str
    user: str
    board: str | None
    requested_board: str | None
    target: str
    model: str
    queued_at: float | None
    started_at: float | None
    finished_at: float | None
    cancellable: bool
    #: whose failure a failed job is (infrastructure, user), and its number of runs
    failure_class: str | None = None
    attempt: int = 1


def _model_name(export: ExportRecord | None, owner_name: str | None) -> str:
    if owner_name:
        return owner_name
    if export is not None and export.model:
        return export.model
    return export.hash[:12] if export is not None else "?"


def list_jobs(
    s: Session, who: Principal, filters: JobFilters, before: int | None = None, limit: int = 100
) -> list[JobRow]:
    q = (
        select(Job, User.name, ExportRecord, ExportOwner.name)
        .join(User, User.id == Job.user_id)
        .join(ExportRecord, ExportRecord.hash == Job.export_hash)
        .outerjoin(
            ExportOwner,
            (ExportOwner.export_hash == Job.export_hash) & (ExportOwner.user_id == Job.user_id),
        )
        .order_by(Job.id.desc())
        .limit(limit)
    )
    if not who.is_admin:
        q = q.where(Job.user_id == who.user_id)
    if filters.user:
        q = q.where(User.name == filters.user)
    if filters.board:
        q = q.where((Job.board == filters.board) | (Job.requested_board == filters.board))
    if filters.target:
        q = q.where(Job.target == filters.target)
    if filters.state:
        q = q.where(Job.state == filters.state)
    if before is not None:
        q = q.where(Job.id < before)
    rows = []
    for job, user, export, owner_name in s.execute(q):
        finished = job.done_at or job.failed_at or job.cancelled_at
        rows.append(
            JobRow(
                id=job.id,
                state=job.state,
                stage=job.stage,
                user=user,
                board=job.board,
                requested_board=job.requested_board,
                target=job.target,
                model=_model_name(export, owner_name),
                queued_at=job.queued_at,
                started_at=job.building_at,
                finished_at=finished,
                cancellable=job.state not in _TERMINAL,
                failure_class=job.failure_class,
                attempt=job.attempt or 1,
            )
        )
    return rows


def job_model(s: Session, job: Job) -> str:
    owner = s.scalar(
        select(ExportOwner.name).where(
            ExportOwner.export_hash == job.export_hash, ExportOwner.user_id == job.user_id
        )
    )
    return _model_name(s.get(ExportRecord, job.export_hash), owner)


def filter_choices(s: Session, who: Principal) -> dict[str, list[str]]:
    boards = sorted(s.scalars(select(Board.name)))
    targets = sorted(set(s.scalars(select(Board.target))))
    users = sorted(s.scalars(select(User.name))) if who.is_admin else [who.name]
    return {
        "boards": boards,
        "targets": targets,
        "users": users,
        "states": [st.value for st in JobState],
    }


def finished_jobs(s: Session, who: Principal, limit: int = 200) -> list[JobRow]:
    """Jobs that ended ``done`` (those with a result bundle to compare)."""
    return list_jobs(s, who, JobFilters(state=JobState.DONE.value), limit=limit)


def agents(s: Session) -> list[Agent]:
    return list(s.scalars(select(Agent).order_by(Agent.name)))


def users(s: Session) -> list[User]:
    return list(s.scalars(select(User).order_by(User.name)))


__all__ = [
    "HEALTH_WINDOW",
    "BoardRow",
    "JobFilters",
    "JobRow",
    "agents",
    "board_rows",
    "filter_choices",
    "finished_jobs",
    "job_model",
    "list_jobs",
    "users",
]
