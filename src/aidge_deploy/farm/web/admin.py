"""``/admin``: users (add, disable, reset password), agents (last heartbeat, version) and
boards (drain for maintenance, return to service). Admins only; every form CSRF-checked.

Draining is the service's business, not the page's: a drained board's labgrid place is
tagged ``avail=no`` (``dispatch``), so the coordinator allocates it no new reservation;
its running job finishes, queued jobs wait for another board (or for its return).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from aidge_deploy.errors import ConfigError
from aidge_deploy.farm.auth import add_user, set_password
from aidge_deploy.farm.db import Token, User
from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.health import admit_board, drain_board
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.states import Role
from aidge_deploy.farm.web.forms import (
    AddUserForm,
    DrainForm,
    EmptyForm,
    FormModel,
    PasswordForm,
    read_form,
)
from aidge_deploy.farm.web.params import NamePath
from aidge_deploy.farm.web.queries import agents, board_rows, users
from aidge_deploy.farm.web.session import PageAdmin
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)

_MESSAGES = {
    "added": "User added.",
    "disabled": "User disabled: their sessions and tokens ended.",
    "enabled": "User enabled.",
    "password": "Password changed: the user's sessions and tokens ended.",
    "drained": "Board drained: it takes no new job.",
    "returned": "Board returned to service.",
}


def _user(s: Session, name: str) -> User:
    user = s.scalar(select(User).where(User.name == name))
    if user is None:
        raise FarmRequestError(404, f"no user {name!r}")
    return user


def set_disabled(s: Session, who_name: str, name: str, disabled: bool) -> None:
    user = _user(s, name)
    if disabled and name == who_name:
        raise ConfigError("you cannot disable your own account", hint="Ask another admin to do it.")
    if disabled and user.role == Role.ADMIN.value:
        admins = s.scalars(
            select(User.id).where(User.role == Role.ADMIN.value, User.disabled.is_(False))
        ).all()
        if len(admins) <= 1:
            raise ConfigError("this is the last enabled admin", hint="Add another admin first.")
    user.disabled = disabled
    if disabled:
        s.execute(delete(Token).where(Token.user_id == user.id))


def set_drained(s: Session, name: str, drained: bool, by: str = "", reason: str = "") -> None:
    """Drain (with ``reason``) or return a board, by admin ``by`` (``farm.health``)."""
    if drained:
        drain_board(s, name, reason, by)
    else:
        admit_board(s, name, by)


def _page(
    request: Request, who: Any, state: FarmState, *, error: str = "", status: int = 200
) -> HTMLResponse:
    with state.db.session() as s:
        context: dict[str, Any] = {
            "users": users(s),
            "agents": agents(s),
            "boards": [r.as_dict(who) for r in board_rows(s, state.dispatcher.held_outside())],
        }
    done = request.query_params.get("done", "")
    return render(
        request,
        "admin.html",
        who,
        status=status,
        error=error,
        message=_MESSAGES.get(done, ""),
        agent_timeout=state.settings.agent_timeout,
        **context,
    )


@router.get("/admin")
def admin_page(request: Request, who: PageAdmin, state: StateDep) -> HTMLResponse:
    return _page(request, who, state)


async def _action[F: FormModel](
    request: Request,
    who: Any,
    state: FarmState,
    model: type[F],
    change: Callable[[Session, F], None],
    done: str,
) -> Response:
    form = await read_form(request, model)

    def apply() -> None:
        with state.db.session() as s:
            change(s, form)

    try:
        await run_in_threadpool(apply)
    except ConfigError as exc:
        message = exc.message + (f" — {exc.hint}" if exc.hint else "")
        return _page(request, who, state, error=message, status=400)
    return RedirectResponse(f"/admin?done={done}", status_code=303)


@router.post("/admin/users")
async def admin_add_user(request: Request, who: PageAdmin, state: StateDep) -> Response:
    def change(s: Session, form: AddUserForm) -> None:
        add_user(s, form.username.strip(), form.password, Role(form.role))

    return await _action(request, who, state, AddUserForm, change, "added")


@router.post("/admin/users/{name}/disable")
async def admin_disable(
    name: NamePath, request: Request, who: PageAdmin, state: StateDep
) -> Response:
    return await _action(
        request,
        who,
        state,
        EmptyForm,
        lambda s, _: set_disabled(s, who.name, name, True),
        "disabled",
    )


@router.post("/admin/users/{name}/enable")
async def admin_enable(
    name: NamePath, request: Request, who: PageAdmin, state: StateDep
) -> Response:
    return await _action(
        request,
        who,
        state,
        EmptyForm,
        lambda s, _: set_disabled(s, who.name, name, False),
        "enabled",
    )


@router.post("/admin/users/{name}/password")
async def admin_password(
    name: NamePath, request: Request, who: PageAdmin, state: StateDep
) -> Response:
    return await _action(
        request,
        who,
        state,
        PasswordForm,
        lambda s, form: set_password(s, _user(s, name).name, form.password),
        "password",
    )


@router.post("/admin/boards/{name}/drain")
async def admin_drain(
    name: NamePath, request: Request, who: PageAdmin, state: StateDep
) -> Response:
    response = await _action(
        request,
        who,
        state,
        DrainForm,
        lambda s, form: set_drained(s, name, True, who.name, form.reason),
        "drained",
    )
    state.dispatcher.boards_changed()
    return response


@router.post("/admin/boards/{name}/return")
async def admin_return(
    name: NamePath, request: Request, who: PageAdmin, state: StateDep
) -> Response:
    response = await _action(
        request,
        who,
        state,
        EmptyForm,
        lambda s, _: set_drained(s, name, False, who.name),
        "returned",
    )
    state.dispatcher.boards_changed()
    return response


__all__ = ["router", "set_disabled", "set_drained"]
