"""The farm's boards as users see them: idle, busy with whose job, offline, drained, or
held outside the farm (its labgrid place locked by someone else), and how many waiting
jobs may take each."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from aidge_deploy.farm.db import Agent, Board, Job, User
from aidge_deploy.farm.health import DRAIN_REASON, drain_runs, last_runs
from aidge_deploy.farm.models import BoardView
from aidge_deploy.farm.states import ON_BOARD, BoardState, JobState


def board_views(s: Session, held: Mapping[str, str] | None = None) -> list[BoardView]:
    """Every board; ``held``: place -> who holds it outside the farm (the coordinator's)."""
    held = held or {}
    boards = list(s.scalars(select(Board).order_by(Board.name)))
    states = [st.value for st in (*ON_BOARD, JobState.RESERVED)]
    busy = {
        board: (job, user)
        for board, job, user in s.execute(
            select(Job.board, Job.id, User.name)
            .join(User, User.id == Job.user_id)
            .where(Job.state.in_(states))
            .order_by(Job.id)
        )
        if board
    }
    queued = list(
        s.execute(select(Job.requested_board, Job.target).where(Job.state == JobState.QUEUED.value))
    )
    agents = {a.name: a for a in s.scalars(select(Agent))}
    health = last_runs(s)
    drains = drain_runs(s)
    out = []
    for b in boards:
        holder = held.get(b.name)
        if not b.online:
            state = BoardState.OFFLINE
        elif b.name in busy:
            state = BoardState.BUSY
        elif holder is not None:
            state = BoardState.HELD
        elif b.drained:
            state = BoardState.DRAINED
        else:
            state = BoardState.IDLE
        job, user = busy.get(b.name, (None, None))
        agent = agents.get(b.agent_name)
        out.append(
            BoardView(
                name=b.name,
                target=b.target,
                host=(agent.hostname or agent.name) if agent else b.agent_name,
                kind=b.kind,
                state=state,
                queue=sum(1 for rb, t in queued if rb == b.name or (rb is None and t == b.target)),
                job=job,
                job_user=user,
                offline_since=b.offline_since,
                description=b.description,
                held_by=holder,
                drain_reason=b.drain_reason if b.drained else None,
                drained_by=b.drained_by if b.drained else None,
                drained_at=b.drained_at if b.drained else None,
                health=health[b.name][0] if b.name in health else None,
                health_at=health[b.name][1] if b.name in health else None,
                health_run=health[b.name][2] if b.name in health else None,
                drain_run=drains.get(b.name)
                if b.drained and b.drain_reason == DRAIN_REASON
                else None,
            )
        )
    return out


def held_message(holder: str) -> str:
    """How a board held from outside is described (pages and API alike)."""
    return f"held outside the farm by {holder}"


__all__ = ["board_views", "held_message"]
