"""The farm's web dashboard: server-rendered pages served by the farm service itself.

``/login``, ``/boards`` (live), ``/jobs`` (queue and history), ``/jobs/{id}`` (progress,
log, then the bundle's own HTML report), ``/compare``, ``/submit`` and ``/admin``. Jinja2
templates and a few small scripts ship as package data: no front-end server, no build
step, nothing fetched from elsewhere, so it works in a lab without internet access.

The pages use the REST API's users, roles and visibility rules (``jobs.job_for``) with a
session cookie instead of a bearer header, CSRF tokens on every form (``session``), and a
Content-Security-Policy that allows scripts and styles from ``/static`` only.
``mount_web(app)`` is the service's one hook (``service.create_app``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from aidge_deploy.farm.jobs import FarmRequestError

#: the pages' policy: scripts, styles, frames and fetches from this site only, no inline code
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)


def _is_api(request: Request) -> bool:
    return request.url.path == "/api" or request.url.path.startswith("/api/")


def mount_web(app: FastAPI) -> None:
    from aidge_deploy.farm.web import admin, compare, jobpage, login, pages, submit
    from aidge_deploy.farm.web.session import LoginRequired
    from aidge_deploy.farm.web.templating import STATIC_DIR, render

    for module in (login, pages, jobpage, submit, compare, admin):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    api_handler = app.exception_handlers.get(FarmRequestError)

    async def farm_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, FarmRequestError):
            raise exc
        if _is_api(request) and api_handler is not None:
            result = api_handler(request, exc)
            return await result if inspect.isawaitable(result) else result
        return render(
            request,
            "error.html",
            None,
            status=exc.status,
            message=exc.message,
            hint=exc.hint,
            status_code=exc.status,
        )

    async def login_required(_: Request, exc: Exception) -> Response:
        if not isinstance(exc, LoginRequired):
            raise exc
        return RedirectResponse(exc.location, status_code=303)

    app.add_exception_handler(FarmRequestError, farm_error)
    app.add_exception_handler(LoginRequired, login_required)

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Any]]
    ) -> Response:
        response: Response = await call_next(request)
        if not _is_api(request):
            headers = response.headers
            headers.setdefault("Content-Security-Policy", PAGE_CSP)
            headers.setdefault("X-Frame-Options", "DENY")
            headers.setdefault("X-Content-Type-Options", "nosniff")
            headers.setdefault("Referrer-Policy", "same-origin")
        return response


__all__ = ["PAGE_CSP", "mount_web"]
