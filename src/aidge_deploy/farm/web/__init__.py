"""The farm's web dashboard: server-rendered pages served by the farm service itself.

``/login``, ``/boards`` (live), ``/jobs`` (queue and history), ``/jobs/{id}`` (progress,
log, then the bundle's own HTML report), ``/compare``, ``/submit``, ``/campaigns`` (each
campaign's farm cells), ``/admin`` and the
API's own docs (``/api/docs``). Jinja2
templates and a few small scripts ship as package data: no front-end server, no build
step, nothing fetched from elsewhere, so it works in a lab without internet access.

The pages use the REST API's users, roles and visibility rules (``jobs.job_for``) with a
session cookie instead of a bearer header, CSRF tokens on every form (``session``), and a
Content-Security-Policy that allows scripts and styles from ``/static`` only.
``mount_web(app)`` is the service's one hook (``service.create_app``).
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.web.policy import PAGE_CSP, PAGE_HEADERS

log = logging.getLogger("aidge_deploy.farm")


def _is_api_path(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def _is_api(request: Request) -> bool:
    return _is_api_path(request.url.path)


#: the modules of the dashboard's pages, each with its ``router``: a new page is a module
#: here (its template in ``templates/``, its script, if any, in ``static/``)
PAGE_MODULES = (
    "login",
    "pages",
    "jobpage",
    "submit",
    "compare",
    "campaigns",
    "history",
    "boardhealth",
    "admin",
)


def mount_web(app: FastAPI, *, api_docs: bool = True) -> None:
    """The pages, their static files and (``api_docs``) the API's Swagger UI."""
    from importlib import import_module

    from aidge_deploy.farm.web.session import LoginRequired
    from aidge_deploy.farm.web.templating import STATIC_DIR, render

    for name in PAGE_MODULES:
        app.include_router(import_module(f"aidge_deploy.farm.web.{name}").router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    if api_docs:
        from aidge_deploy.farm.web import apidocs

        apidocs.mount(app)

    def page_or_api(kind: type[Exception], page: Callable[[Request, Any], Response]) -> None:
        """Errors of ``kind``: the API's handler under ``/api``, an error page elsewhere."""
        api_handler = app.exception_handlers.get(kind)

        async def handler(request: Request, exc: Exception) -> Response:
            if not isinstance(exc, kind):
                raise exc
            if _is_api(request) and api_handler is not None:
                result = api_handler(request, exc)
                return await result if inspect.isawaitable(result) else result
            return page(request, exc)

        app.add_exception_handler(kind, handler)

    def error_page(request: Request, status: int, message: str, hint: str = "") -> Response:
        return render(
            request,
            "error.html",
            None,
            status=status,
            message=message,
            hint=hint,
            status_code=status,
        )

    def invalid_page(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in exc.errors()[:5]
        )
        return error_page(request, 422, f"invalid request: {problems}", "Correct the named value.")

    def http_page(request: Request, exc: StarletteHTTPException) -> Response:
        page = error_page(request, exc.status_code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            page.headers[name] = value
        return page

    def bug_page(request: Request, exc: Exception) -> Response:
        ref = uuid.uuid4().hex[:12]
        log.error("internal error %s on %s %s: %r", ref, request.method, request.url.path, exc)
        page = error_page(
            request,
            500,
            f"internal error of the farm service (reference {ref})",
            "This is a bug of the farm, not of your request: report it with the reference.",
        )
        # the server closes the connection after an unhandled error: said, so that the
        # browser opens a new one instead of finding this one reset
        page.headers["Connection"] = "close"
        return page

    page_or_api(
        FarmRequestError,
        lambda request, exc: error_page(request, exc.status, exc.message, exc.hint),
    )
    page_or_api(RequestValidationError, invalid_page)
    page_or_api(StarletteHTTPException, http_page)
    page_or_api(Exception, bug_page)

    async def login_required(_: Request, exc: Exception) -> Response:
        if not isinstance(exc, LoginRequired):
            raise exc
        return RedirectResponse(exc.location, status_code=303)

    app.add_exception_handler(LoginRequired, login_required)

    app.add_middleware(PageSecurityHeaders)


class PageSecurityHeaders:
    """Adds ``PAGE_HEADERS`` to the pages' responses (unless set already).

    A plain ASGI middleware: ``@app.middleware("http")`` would wrap every request, the
    API's too, in an extra task and memory stream, which costs more than the API's own
    status request.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_api_path(scope["path"]):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in PAGE_HEADERS:
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


__all__ = ["PAGE_CSP", "mount_web"]
