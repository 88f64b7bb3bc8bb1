"""HTTP client of a farm service, for the ``api`` backend and the tests (httpx).

``api_url`` may end in ``/api`` or not (the deploy guide writes it both ways). Requests and
answers are the shared models (``models``). Failures are typed: unreachable →
``ConnectError``, bad credentials → ``AuthenticationError``,
unknown board → ``UnknownBoardError`` (with the farm's boards and a did-you-mean),
anything else refused → ``ConfigError`` with the service's message and hint. The password
is sent once, in the body of ``POST /api/token``, and never shown.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import ValidationError

from aidge_deploy.errors import (
    AuthenticationError,
    ConfigError,
    ConnectError,
    DeployError,
    UnknownBoardError,
)
from aidge_deploy.farm.jobconfig import JobConfig, problems
from aidge_deploy.farm.models import (
    SERVICE_NAME,
    BoardView,
    CampaignTag,
    ErrorBody,
    EventsPage,
    ExportView,
    Health,
    JobView,
    SubmitRequest,
    TokenAnswer,
    TokenRequest,
)

PASSWORD_ENV = ("AIDGE_DEPLOY_API_PASSWORD", "AIDGE_BENCHMARK_API_PASSWORD")
#: a long-lived API token (``aidge-deploy farm token create``), used instead of a password
TOKEN_ENV = "AIDGE_DEPLOY_API_TOKEN"


def service_root(api_url: str) -> str:
    """``http://host:port`` from ``http://host:port``, ``.../`` or ``.../api[/]``."""
    url = api_url.strip().rstrip("/")
    if url.endswith("/api"):
        url = url[: -len("/api")]
    if not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"api_url {api_url!r} is not an http(s) URL",
            hint="e.g. api_url='http://farm.example.com:8000/api'",
        )
    return url


def http_transport() -> httpx.HTTPTransport:
    """httpx's transport with ``TCP_NODELAY``: a request sent as headers then body must not
    wait for the server's delayed ACK between the two (Nagle's algorithm)."""
    return httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])


def password_from_env() -> str | None:
    for name in PASSWORD_ENV:
        value = os.environ.get(name)
        if value:
            return value
    return None


@dataclass(frozen=True)
class Credentials:
    """What the environment offers to log in to a farm (secrets: never shown)."""

    token: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


def credentials_from_env() -> Credentials:
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    return Credentials(token=token, password=password_from_env())


#: how long an idempotent request is retried while the service does not answer (a restart)
RETRY_S = 120.0
#: answers that say the service is (re)starting behind a proxy: retried like no answer
_UNAVAILABLE = (502, 503, 504)


class FarmClient:
    """The farm's REST API, typed (``models``). Idempotent requests (reads, the token,
    an upload — stored by content —, a cancel) are retried for ``retry_s`` with back-off
    while the service does not answer, so a client following its job re-attaches to it
    across a service restart; a submit is never retried (it would queue a second job)."""

    def __init__(
        self,
        api_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retry_s: float = RETRY_S,
    ) -> None:
        self.root = service_root(api_url)
        self.api = self.root + "/api"
        self.retry_s = retry_s
        #: whether the service answered this client once (only then are requests retried)
        self._reached = False
        self._http = httpx.Client(base_url=self.api, timeout=timeout, transport=http_transport())
        if token:
            self.use_token(token)

    def use_token(self, token: str) -> None:
        """Authenticate every request with ``token`` (a login's, or a long-lived API token)."""
        self._http.headers["Authorization"] = f"Bearer {token}"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> FarmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing --------------------------------------------------------------------

    def request(
        self, method: str, path: str, *, idempotent: bool = False, **kwargs: Any
    ) -> httpx.Response:
        """One request; an ``idempotent`` one is retried (0.2 s, doubling up to 5 s) while
        the service is unreachable or answers 502-504, for at most ``retry_s`` — once this
        client has reached it: a wrong address fails at once, a restart is waited out."""
        retry = self.retry_s if idempotent and self._reached else 0.0
        deadline = time.monotonic() + retry
        delay = 0.2
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
                self._reached = True
                if response.status_code not in _UNAVAILABLE or time.monotonic() >= deadline:
                    break
            except httpx.HTTPError as exc:
                if time.monotonic() >= deadline:
                    raise self._unreachable(exc, method, path) from None
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        if response.status_code >= 400:
            raise self._error(response, method, path)
        return response

    def _unreachable(self, exc: httpx.HTTPError, method: str, path: str) -> ConnectError:
        if isinstance(exc, httpx.TimeoutException):
            return ConnectError(
                f"the board farm at {self.api} did not answer {method} {path} in time",
                hint="Check that the farm service runs; raise api_request_timeout for slow links.",
            )
        return ConnectError(
            f"cannot reach the board farm at {self.api}: {type(exc).__name__}: {exc}",
            hint="Check api_url (host, port) and that `aidge-deploy farm serve` runs there.",
        )

    def _error(self, response: httpx.Response, method: str, path: str) -> DeployError:
        try:
            data = response.json()
            body = data.get("error") if isinstance(data, dict) else None
        except ValueError:
            body = None
        if not isinstance(body, dict) or "message" not in body:
            return self._not_a_farm(f"{method} {path} answered HTTP {response.status_code}")
        error = ErrorBody.model_validate(body)
        message, hint = error.message, error.hint
        if response.status_code == 401:
            return AuthenticationError(f"the board farm refused the credentials: {message}", hint)
        if response.status_code == 404 and "boards" in body:
            return UnknownBoardError(message, hint)
        return ConfigError(f"the board farm refused the request: {message}", hint or None)

    def _not_a_farm(self, what: str) -> ConfigError:
        return ConfigError(
            f"not a farm at this URL: {self.api} ({what}, not as an aidge-deploy board farm "
            "answers)",
            hint="Check api_url: it is the farm service's address, as `aidge-deploy farm serve` "
            "prints it (e.g. http://farm-host:8000/api), not the dashboard's page or another "
            "service.",
        )

    # --- API -------------------------------------------------------------------------

    def health(self) -> Health:
        """The service's health; ``ConfigError`` "not a farm at this URL" when whatever
        answers is not an aidge-deploy farm."""
        r = self.request("GET", "/health", idempotent=True)
        try:
            health = Health.model_validate(r.json())
        except ValueError:
            raise self._not_a_farm("GET /health answered something else") from None
        if health.service != SERVICE_NAME:
            raise self._not_a_farm(f"GET /health names {health.service!r}")
        return health

    def login(self, username: str, password: str, expires_in: float | None = None) -> str:
        body = TokenRequest(username=username, password=password, expires_in=expires_in)
        r = self.request("POST", "/token", json=body.model_dump(exclude_none=True), idempotent=True)
        token = TokenAnswer.model_validate(r.json()).access_token
        self.use_token(token)
        return token

    def boards(self) -> list[BoardView]:
        r = self.request("GET", "/boards", idempotent=True)
        return [BoardView.model_validate(b) for b in r.json()]

    def upload_export(self, archive: bytes, name: str = "") -> ExportView:
        headers = {"Content-Type": "application/gzip", "X-Export-Name": name[:200]}
        r = self.request("POST", "/exports", content=archive, headers=headers, idempotent=True)
        return ExportView.model_validate(r.json())

    def submit(
        self,
        export_id: str,
        *,
        board: str | None,
        target: str | None,
        config: dict[str, Any],
        priority: float = 0.0,
        campaign: CampaignTag | None = None,
    ) -> JobView:
        try:
            body = SubmitRequest(
                export=export_id,
                board=board,
                target=target,
                config=JobConfig.model_validate(config),
                priority=priority,
                campaign=campaign,
            )
        except ValidationError as exc:  # what the farm would refuse, said before sending it
            raise ConfigError(
                f"this job cannot be submitted: {problems(exc)}",
                hint="Fix the named setting of the DeployConfig (numbers must be finite and "
                "in range).",
            ) from None
        r = self.request("POST", "/jobs", json=body.model_dump(mode="json"))
        return JobView.model_validate(r.json())

    def job(self, job_id: int) -> JobView:
        return JobView.model_validate(
            self.request("GET", f"/jobs/{job_id}", idempotent=True).json()
        )

    def events(self, job_id: int, after: int = 0, wait: float = 0.0) -> EventsPage:
        params = {"after": after, "wait": wait}
        r = self.request("GET", f"/jobs/{job_id}/events", params=params, idempotent=True)
        return EventsPage.model_validate(r.json())

    def result(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("GET", f"/jobs/{job_id}/result", idempotent=True).json())

    def download(self, job_id: int, what: str) -> bytes:
        return self.request("GET", f"/jobs/{job_id}/{what}", idempotent=True).content

    def cancel(self, job_id: int) -> JobView:
        r = self.request("POST", f"/jobs/{job_id}/cancel", idempotent=True)
        return JobView.model_validate(r.json())


__all__ = [
    "PASSWORD_ENV",
    "RETRY_S",
    "TOKEN_ENV",
    "Credentials",
    "FarmClient",
    "credentials_from_env",
    "http_transport",
    "password_from_env",
    "service_root",
]
