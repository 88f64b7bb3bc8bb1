"""The farm service: FastAPI app factory, shared state and authentication dependencies.

``create_app(settings)`` builds the app (REST under ``/api``, OpenAPI at
``/api/openapi.json``); its lifespan opens the database, checks that an admin exists (no
default password: the service refuses to start without one), and runs the dispatcher
(``dispatch.Dispatcher``) on the server's asyncio loop, next to the labgrid session.
Pages (the dashboard) plug in through ``FarmState``, ``principal_from_token`` and the
same routers' domain functions in ``jobs``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.farm.auth import (
    Principal,
    TokenCache,
    has_admin,
    resolve_token,
    resolve_token_cached,
)
from aidge_deploy.farm.db import Database
from aidge_deploy.farm.jobs import FarmRequestError
from aidge_deploy.farm.notify import Notifier
from aidge_deploy.farm.settings import FarmSettings
from aidge_deploy.farm.store import ExportStore, UploadTooLarge
from aidge_deploy.farm.throttle import LoginThrottle
from aidge_deploy.history.store import HistoryStore

log = logging.getLogger("aidge_deploy.farm")


class FarmState:
    """What every request handler shares: settings, database, store, notifier, dispatcher."""

    def __init__(self, settings: FarmSettings) -> None:
        from aidge_deploy.farm.dispatch import Dispatcher

        self.settings = settings
        Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
        settings.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.db = Database(settings.db_url)
        # the jobs' results history, in the farm's own database (farm.jobhistory)
        self.history = HistoryStore(self.db.engine)
        self.store = ExportStore(Path(settings.data_dir), settings.max_upload_bytes)
        self.notifier = Notifier()
        self.tokens = TokenCache()
        self.tokens.watch(self.db.sessions)
        self.logins = LoginThrottle(settings.login_limits)
        self.dispatcher = Dispatcher(self)

    def job_dir(self, job_id: int) -> Path:
        return self.settings.jobs_dir / str(int(job_id))


class NoAdminError(ConfigError):
    """The service refuses to start before an admin account exists."""


def check_ready(state: FarmState) -> None:
    with state.db.session() as s:
        if not has_admin(s):
            raise NoAdminError(
                "the farm has no admin user: refusing to start (there is no default password)",
                hint="Create one: AIDGE_DEPLOY_API_PASSWORD=... aidge-deploy farm user add NAME "
                f"--admin --data-dir {state.settings.data_dir}",
            )


def create_app(settings: FarmSettings, *, start_dispatcher: bool = True) -> FastAPI:
    state = FarmState(settings)
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
        docs_url="/api/docs",
        redoc_url=None,
    )
    app.state.farm = state

    @app.exception_handler(FarmRequestError)
    async def _farm_error(_: Request, exc: FarmRequestError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.hint, **exc.extra)

    @app.exception_handler(DeployError)
    async def _deploy_error(_: Request, exc: DeployError) -> JSONResponse:
        status = 413 if isinstance(exc, UploadTooLarge) else 400
        return error_response(status, exc.message, exc.hint or "", type=type(exc).__name__)

    from aidge_deploy.farm import routes_agent, routes_user

    app.include_router(routes_user.router, prefix="/api")
    app.include_router(routes_agent.router, prefix="/api")
    from aidge_deploy.farm.web import mount_web

    mount_web(app)  # the dashboard's pages (/login, /boards, /jobs, ...)
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


def error_response(status: int, message: str, hint: str = "", **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if status == 429 and "retry_after" in extra:
        headers["Retry-After"] = str(extra["retry_after"])
    return JSONResponse(
        {"error": {"message": message, "hint": hint, **extra}}, status_code=status, headers=headers
    )


# --- dependencies -----------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False)


# The dependencies are coroutines: FastAPI runs a plain function in its thread pool, and
# each hop there costs more than the check itself. Only a token the cache does not know
# goes to the database, in the pool.


async def farm_state(request: Request) -> FarmState:
    state: FarmState = request.app.state.farm
    return state


def principal_from_token(
    s: Session, token: str | None, cache: TokenCache | None = None
) -> Principal:
    if not token:
        principal = None
    elif cache is not None:
        principal = resolve_token_cached(s, token, cache)
    else:
        principal = resolve_token(s, token)
    if principal is None:
        raise FarmRequestError(
            401,
            "not authenticated: the token is missing, unknown or expired",
            "Get a token with POST /api/token (username, password).",
        )
    return principal


def _principal_from_db(state: FarmState, token: str | None) -> Principal:
    with state.db.session() as s:
        return principal_from_token(s, token, state.tokens)


async def current_principal(
    state: Annotated[FarmState, Depends(farm_state)],
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    token = creds.credentials if creds else None
    cached = state.tokens.get(token) if token else None
    if cached is not None:
        return cached
    return await run_in_threadpool(_principal_from_db, state, token)


async def current_user(who: Annotated[Principal, Depends(current_principal)]) -> Principal:
    if who.agent is not None:
        raise FarmRequestError(403, "agents cannot use the user API", "Use a user token.")
    return who


async def current_admin(who: Annotated[Principal, Depends(current_user)]) -> Principal:
    if not who.is_admin:
        raise FarmRequestError(403, "admin only", "Ask a farm admin.")
    return who


async def current_agent(who: Annotated[Principal, Depends(current_principal)]) -> Principal:
    if who.agent is None:
        raise FarmRequestError(403, "agents only", "Use the agent's token.")
    return who


UserDep = Annotated[Principal, Depends(current_user)]
AdminDep = Annotated[Principal, Depends(current_admin)]
AgentDep = Annotated[Principal, Depends(current_agent)]
StateDep = Annotated[FarmState, Depends(farm_state)]
Handler = Callable[..., Any]

__all__ = [
    "AdminDep",
    "AgentDep",
    "FarmState",
    "NoAdminError",
    "StateDep",
    "UserDep",
    "check_ready",
    "create_app",
    "error_response",
    "principal_from_token",
]
