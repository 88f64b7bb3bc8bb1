"""HTTP client of a farm service, for the ``api`` backend and the tests (httpx).

``api_url`` may end in ``/api`` or not (the deploy guide writes it both ways). Failures
are typed: unreachable → ``ConnectError``, bad credentials → ``AuthenticationError``,
unknown board → ``UnknownBoardError`` (with the farm's boards and a did-you-mean),
anything else refused → ``ConfigError`` with the service's message and hint. The password
is sent once, in the body of ``POST /api/token``, and never shown.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

import httpx

from aidge_deploy.errors import (
    AuthenticationError,
    ConfigError,
    ConnectError,
    DeployError,
    UnknownBoardError,
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


class FarmClient:
    def __init__(
        self,
        api_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.root = service_root(api_url)
        self.api = self.root + "/api"
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

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise ConnectError(
                f"the board farm at {self.api} did not answer {method} {path} in time",
                hint="Check that the farm service runs; raise api_request_timeout for slow links.",
            ) from None
        except httpx.HTTPError as exc:
            raise ConnectError(
                f"cannot reach the board farm at {self.api}: {type(exc).__name__}: {exc}",
                hint="Check api_url (host, port) and that `aidge-deploy farm serve` runs there.",
            ) from None
        if response.status_code >= 400:
            raise self._error(response)
        return response

    def _error(self, response: httpx.Response) -> DeployError:
        try:
            body = response.json().get("error") or {}
        except ValueError:
            body = {}
        message = str(body.get("message") or f"HTTP {response.status_code}")
        hint = str(body.get("hint") or "")
        if response.status_code == 401:
            return AuthenticationError(f"the board farm refused the credentials: {message}", hint)
        if response.status_code == 404 and "boards" in body:
            return UnknownBoardError(message, hint)
        return ConfigError(f"the board farm refused the request: {message}", hint or None)

    # --- API -------------------------------------------------------------------------

    def login(self, username: str, password: str, expires_in: float | None = None) -> str:
        body: dict[str, Any] = {"username": username, "password": password}
        if expires_in is not None:
            body["expires_in"] = expires_in
        token = str(self.request("POST", "/token", json=body).json()["access_token"])
        self.use_token(token)
        return token

    def boards(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/boards").json())

    def upload_export(self, archive: bytes, name: str = "") -> dict[str, Any]:
        headers = {"Content-Type": "application/gzip", "X-Export-Name": name[:200]}
        return dict(self.request("POST", "/exports", content=archive, headers=headers).json())

    def submit(
        self,
        export_id: str,
        *,
        board: str | None,
        target: str | None,
        config: dict[str, Any],
        priority: float = 0.0,
    ) -> dict[str, Any]:
        body = {
            "export": export_id,
            "board": board,
            "target": target,
            "config": config,
            "priority": priority,
        }
        return dict(self.request("POST", "/jobs", json=body).json())

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("GET", f"/jobs/{job_id}").json())

    def events(self, job_id: int, after: int = 0, wait: float = 0.0) -> dict[str, Any]:
        params = {"after": after, "wait": wait}
        return dict(self.request("GET", f"/jobs/{job_id}/events", params=params).json())

    def result(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("GET", f"/jobs/{job_id}/result").json())

    def download(self, job_id: int, what: str) -> bytes:
        return self.request("GET", f"/jobs/{job_id}/{what}").content

    def cancel(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("POST", f"/jobs/{job_id}/cancel").json())


__all__ = [
    "PASSWORD_ENV",
    "TOKEN_ENV",
    "Credentials",
    "FarmClient",
    "credentials_from_env",
    "http_transport",
    "password_from_env",
    "service_root",
]
