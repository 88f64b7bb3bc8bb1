"""``/login`` and ``/logout``: the dashboard's session, on the farm's users and tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from aidge_deploy.farm.auth import authenticate, issue_user_token, revoke_token
from aidge_deploy.farm.deps import StateDep, client_address
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.throttle import TooManyLogins
from aidge_deploy.farm.web.forms import LoginForm, NextForm, read_form
from aidge_deploy.farm.web.params import NextQuery
from aidge_deploy.farm.web.session import (
    clear_session,
    local_path,
    login_csrf_value,
    session_token,
    set_login_csrf,
    set_session,
)
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)


def _login_page(
    request: Request, next_path: str, error: str = "", username: str = "", status: int = 200
) -> HTMLResponse:
    token = login_csrf_value(request)
    page = render(
        request,
        "login.html",
        None,
        status=status,
        csrf=token,
        next_path=next_path,
        error=error,
        username=username,
    )
    set_login_csrf(page, request, token)
    return page


@router.get("/login")
def login_form(request: Request, next: NextQuery = None) -> HTMLResponse:
    return _login_page(request, local_path(next))


@router.post("/login")
async def login(request: Request, state: StateDep) -> Response:
    try:
        form = await read_form(request, LoginForm, login=True)
    except FarmRequestError as exc:
        if exc.status != 422:
            raise
        return _login_page(request, "/boards", exc.message, status=422)
    username, password = form.username, form.password
    next_path = local_path(form.next)

    def check() -> str | None:
        with state.db.session() as s:
            user = authenticate(s, username, password)
            if user is None:
                return None
            token, _expires = issue_user_token(s, user)
            return token

    address = client_address(request, state.settings.trusted_proxies)
    try:
        state.logins.check(username, address)
    except TooManyLogins as exc:
        message = exc.message[:1].upper() + exc.message[1:] + "."
        page = _login_page(request, next_path, message, username=username, status=429)
        page.headers["Retry-After"] = str(exc.retry_after)
        return page
    token = await run_in_threadpool(check)
    if token is None:
        state.logins.failed(username, address)
        return _login_page(
            request, next_path, "Wrong username or password.", username=username, status=401
        )
    state.logins.succeeded(username, address)
    response = RedirectResponse(next_path, status_code=303)
    set_session(response, request, token)
    return response


@router.post("/logout")
async def logout(request: Request, state: StateDep) -> Response:
    await read_form(request, NextForm, max_fields=5, max_part_size=1024)
    token = session_token(request)
    if token:

        def revoke() -> None:
            with state.db.session() as s:
                revoke_token(s, token)

        # a write waits for SQLite's lock: off the event loop, which serves every request
        await run_in_threadpool(revoke)
    response = RedirectResponse("/login", status_code=303)
    clear_session(response, request)
    return response


__all__ = ["router"]
