"""Login sessions and cross-site request forgery (CSRF) protection of the dashboard.

A session is the farm's own expiring user token (``auth.issue_user_token``) kept in an
``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` when served over https): the pages
and the REST API share one user base, one role model and one expiry. Every state-changing
form carries a CSRF token: after login it is an HMAC keyed by the session token (so it
cannot be computed without the cookie, and it dies with the session); the login form
itself uses a double-submit cookie. A request from another origin (``Origin`` or
``Sec-Fetch-Site`` says so) is refused before its token is even looked at.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, Request
from fastapi.responses import Response

from aidge_deploy.farm.auth import DEFAULT_TOKEN_TTL, Principal
from aidge_deploy.farm.deps import farm_state, forwarded_https, principal_from_token
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState

SESSION_COOKIE = "farm_session"
LOGIN_CSRF_COOKIE = "farm_login_csrf"
CSRF_FIELD = "csrf_token"


class LoginRequired(Exception):
    """No valid session: the page redirects to ``location`` (``/login?next=<path>``)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


class CsrfError(FarmRequestError):
    def __init__(self) -> None:
        super().__init__(
            403,
            "this form was refused: its security token is missing or stale, or it was "
            "sent from another site",
            "Reload the page and submit the form again.",
        )


def session_token(request: Request) -> str | None:
    value = request.cookies.get(SESSION_COOKIE)
    return value if value and len(value) <= 200 else None


def csrf_for(token: str) -> str:
    """The CSRF token of the forms of the session ``token``."""
    return hmac.new(token.encode(), b"aidge-farm-csrf", hashlib.sha256).hexdigest()


def _secure(request: Request) -> bool:
    """Served over https (directly, or behind a trusted TLS proxy): cookies are Secure."""
    return forwarded_https(request, request.app.state.farm.settings.trusted_proxies)


def set_session(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(DEFAULT_TOKEN_TTL),
        path="/",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    response.delete_cookie(LOGIN_CSRF_COOKIE, path="/login")


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=_secure(request)
    )


def login_csrf_value(request: Request) -> str:
    """The login form's token: the browser's double-submit cookie, or a new one."""
    value = request.cookies.get(LOGIN_CSRF_COOKIE) or ""
    return value if len(value) == 43 else secrets.token_urlsafe(32)


def set_login_csrf(response: Response, request: Request, value: str) -> None:
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        value,
        max_age=3600,
        path="/login",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def check_origin(request: Request) -> None:
    """Refuse a state-changing request that a browser says came from another site."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise CsrfError()
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        try:
            netloc = urlsplit(origin).netloc
        except ValueError:  # e.g. "http://[" (not a URL a browser sends)
            raise CsrfError() from None
        if netloc != request.headers.get("host", request.url.netloc):
            raise CsrfError()
    elif origin == "null":
        raise CsrfError()


def check_login_csrf(request: Request, form: Mapping[str, object]) -> None:
    check_origin(request)
    cookie = request.cookies.get(LOGIN_CSRF_COOKIE) or ""
    sent = form.get(CSRF_FIELD)
    if not cookie or not isinstance(sent, str) or not hmac.compare_digest(cookie, sent):
        raise CsrfError()


def check_csrf(request: Request, form: Mapping[str, object]) -> None:
    """A logged-in form: same origin and the session's token."""
    check_origin(request)
    token = session_token(request)
    sent = form.get(CSRF_FIELD)
    if token is None or not isinstance(sent, str) or not hmac.compare_digest(csrf_for(token), sent):
        raise CsrfError()


def local_path(value: str | None, default: str = "/boards") -> str:
    """``value`` if it is a path on this site (no scheme, host or ``//``), else ``default``."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return default  # urlsplit drops tabs and newlines: never judge a path it rewrote
    try:
        parts = urlsplit(value)
    except ValueError:
        return default
    if parts.scheme or parts.netloc:
        return default
    return value


def login_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/login?next=" + quote(local_path(target), safe="")


def page_principal(request: Request, state: Annotated[FarmState, Depends(farm_state)]) -> Principal:
    """The logged-in user of a page request (agents have no pages)."""
    token = session_token(request)
    try:
        with state.db.session() as s:
            who = principal_from_token(s, token)
    except FarmRequestError:
        raise LoginRequired(login_url(request)) from None
    if who.agent is not None:
        raise LoginRequired(login_url(request))
    return who


def page_admin(who: Annotated[Principal, Depends(page_principal)]) -> Principal:
    if not who.is_admin:
        raise FarmRequestError(403, "admin only", "Ask a farm admin.")
    return who


PageUser = Annotated[Principal, Depends(page_principal)]
PageAdmin = Annotated[Principal, Depends(page_admin)]

__all__ = [
    "CSRF_FIELD",
    "SESSION_COOKIE",
    "CsrfError",
    "LoginRequired",
    "PageAdmin",
    "PageUser",
    "check_csrf",
    "check_login_csrf",
    "clear_session",
    "csrf_for",
    "local_path",
    "login_csrf_value",
    "page_principal",
    "set_login_csrf",
    "set_session",
]
