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

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.web.policy import PAGE_CSP, PAGE_HEADERS


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
