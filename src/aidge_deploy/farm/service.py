"""The farm service's app factory: ``create_app(settings)``.

REST under ``/api`` (``routes_user``, ``routes_agent``), OpenAPI at ``/api/openapi.json``
and its Swagger UI at ``/api/docs`` (served from the package, under the dashboard's
Content-Security-Policy: it works without internet; ``api_docs=False`` turns it off), the
dashboard's pages (``web``). The lifespan runs the dispatcher (``dispatch.Dispatcher``)
on the server's asyncio loop, next to the labgrid session. The service refuses to start
without an admin (there is no default password). Nothing imports this module but the
server and the tests: routers and pages depend on ``deps`` and the domain modules.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aidge_deploy.errors import DeployError
from aidge_deploy.farm.archive import ArchiveTooLarge
from aidge_deploy.farm.dispatch import Coordinator
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.settings import FarmSettings
from aidge_deploy.farm.state import FarmState, check_ready

log = logging.getLogger("aidge_deploy.farm")


def create_app(
    settings: FarmSettings, *, start_dispatcher: bool = True, link: Coordinator | None = None
) -> FastAPI:
    state = FarmState(settings, link)
    check_ready(state)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.notifier.bind(asyncio.get_running_loop())
        task = asyncio.create_task(state.dispatcher.run()) if start_dispatcher else None
        try:
            yield
        finally:
            if task is not None:
                state.dispatcher.stop()
                try:
                    await asyncio.wait_for(task, 10.0)
                except (TimeoutError, asyncio.CancelledError):
                    task.cancel()
            state.db.dispose()

    app = FastAPI(
        title="aidge-deploy board farm",
        version="1",
        lifespan=lifespan,
        openapi_url="/api/openapi.json",
        docs_url=None,  # served from the package (``web.apidocs``), not from a CDN
        redoc_url=None,
    )
    app.state.farm = state

    @app.exception_handler(FarmRequestError)
    async def _farm_error(_: Request, exc: FarmRequestError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.hint, **exc.extra)

    @app.exception_handler(DeployError)
    async def _deploy_error(_: Request, exc: DeployError) -> JSONResponse:
        status = 413 if isinstance(exc, ArchiveTooLarge) else 400
        return error_response(status, exc.message, exc.hint or "", type=type(exc).__name__)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(
            422,
            "invalid request: " + invalid_fields(exc),
            "See the API's schema at /api/docs.",
            detail=[
                {k: _plain(v) for k, v in e.items() if k in ("loc", "msg", "type")}
                for e in exc.errors()
            ],
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = error_response(exc.status_code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        return internal_error_response(request, exc)

    from aidge_deploy.farm import routes_agent, routes_boards, routes_user

    app.include_router(routes_user.router, prefix="/api")
    app.include_router(routes_boards.router, prefix="/api")
    app.include_router(routes_agent.router, prefix="/api")
    from aidge_deploy.farm.web import mount_web

    mount_web(app, api_docs=settings.api_docs)  # the dashboard's pages and the API's docs
    app.add_middleware(ServerTiming)
    return app


class ServerTiming:
    """``Server-Timing: app;dur=MS`` on the API's responses: the milliseconds the service
    spent before answering (a long poll's wait included), so a client can tell its own
    delays from the service's. A plain ASGI middleware (no task per request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                spent = (time.perf_counter() - started) * 1000
                MutableHeaders(scope=message).append("Server-Timing", f"app;dur={spent:.2f}")
            await send(message)

        await self.app(scope, receive, timed)


def invalid_fields(exc: RequestValidationError) -> str:
    """The first problems of a refused request, each with the field it names."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
        for e in exc.errors()[:5]
    )


def _plain(value: Any) -> Any:
    """A validation error's part as JSON (its location may hold any value sent)."""
    if isinstance(value, (list, tuple)):
        return [p if isinstance(p, (int, str)) else str(p) for p in value]
    return value if isinstance(value, (int, str)) else str(value)


#: the header of an answer after which the server closes the connection: a client that
#: read it opens a new one for its next request, instead of finding this one reset
CLOSE = {"Connection": "close"}


def internal_error_response(request: Request, exc: BaseException) -> JSONResponse:
    """A bug of the service: 500 with ``Connection: close``. Starlette re-raises the
    exception once this is sent (uvicorn logs it with its traceback) and uvicorn then
    closes the connection: said in the answer, the client does not reuse it — unsaid, its
    next request on a kept-alive connection met a reset."""
    ref = uuid.uuid4().hex[:12]
    log.error("internal error %s on %s %s: %r", ref, request.method, request.url.path, exc)
    response = error_response(
        500,
        f"internal error of the farm service (reference {ref})",
        "This is a bug of the farm, not of your request: report it with the reference "
        "(the service's log has its traceback).",
    )
    response.headers.update(CLOSE)
    return response


def error_response(status: int, message: str, hint: str = "", **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if status == 429 and "retry_after" in extra:
        headers["Retry-After"] = str(extra["retry_after"])
    return JSONResponse(
        {"error": {"message": message, "hint": hint, **extra}}, status_code=status, headers=headers
    )


__all__ = [
    "CLOSE",
    "ServerTiming",
    "create_app",
    "error_response",
    "internal_error_response",
    "invalid_fields",
]
