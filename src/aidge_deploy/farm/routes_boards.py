"""The boards' admin side of the REST API: drain and admit by hand, ask for a health check
(admins only), and each board's health history and golden-run logs (any user). Thin: the
work is ``farm.health``'s; a changed board is re-published to labgrid at once."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from fastapi.responses import PlainTextResponse

from aidge_deploy.farm.boards import board_views
from aidge_deploy.farm.deps import AdminDep, StateDep, UserDep
from aidge_deploy.farm.fields import BoardName
from aidge_deploy.farm.health import admit_board, drain_board, golden_run_log, history
from aidge_deploy.farm.models import MAX_ID, BoardView, DrainRequest, HealthRunView
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState

router = APIRouter(prefix="/boards", tags=["boards"])

BoardPath = Annotated[BoardName, PathParam()]
RunPath = Annotated[int, PathParam(ge=1, le=MAX_ID)]


def _view(state: FarmState, name: str) -> BoardView:
    state.dispatcher.boards_changed()
    with state.db.session() as s:
        return next(v for v in board_views(s, state.dispatcher.held_outside()) if v.name == name)


@router.post("/{name}/drain", summary="Drain a board (admins)")
def drain(name: BoardPath, body: DrainRequest, who: AdminDep, state: StateDep) -> BoardView:
    """Take the board out of service: its running job finishes, no new job lands on it
    (its labgrid place is offered to no reservation) until an admin admits it."""
    with state.db.session() as s:
        drain_board(s, name, body.reason, who.name)
    return _view(state, name)


@router.post("/{name}/admit", summary="Return a board to service (admins)")
def admit(name: BoardPath, who: AdminDep, state: StateDep) -> BoardView:
    with state.db.session() as s:
        admit_board(s, name, who.name)
    return _view(state, name)


@router.post("/{name}/health-check", summary="Run a board's golden jobs now (admins)")
def check_now(name: BoardPath, who: AdminDep, state: StateDep) -> BoardView:
    """A golden run on the board as soon as it is free (it may be drained)."""
    if not _exists(state, name):
        raise FarmRequestError(404, f"the farm has no board {name!r}")
    state.health.request([name], "admin")
    return _view(state, name)


def _exists(state: FarmState, name: str) -> bool:
    with state.db.session() as s:
        return any(v.name == name for v in board_views(s))


@router.get("/{name}/health")
def board_health(
    name: BoardPath,
    who: UserDep,
    state: StateDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[HealthRunView]:
    """The board's health checks, newest first: time, trigger, outcome, figure, reason."""
    if not _exists(state, name):
        raise FarmRequestError(404, f"the farm has no board {name!r}")
    with state.db.session() as s:
        return [HealthRunView(**r.as_dict()) for r in history(s, name, limit)]


@router.get("/{name}/health/{run_id}/log", response_class=PlainTextResponse)
def health_log(name: BoardPath, run_id: RunPath, who: UserDep, state: StateDep) -> str:
    """The board host's logs of a golden run's jobs (the farm's own model: no user's data)."""
    with state.db.session() as s:
        return golden_run_log(s, state.settings.jobs_dir, name, run_id)


__all__ = ["router"]
