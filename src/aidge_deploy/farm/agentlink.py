"""The farm agent's two links: the farm service over HTTP and labgrid's coordinator.

Calls to the service are retried through connection errors and 5xx answers for
``SERVICE_RETRY_S`` (a service restart must not fail the jobs the agent runs); labgrid's
client is asyncio, so its session lives on a loop of its own that any thread can call.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx

from aidge_deploy.errors import DeployError

T = TypeVar("T")

#: how long a report to the service is retried while it is down (a restart)
SERVICE_RETRY_S = 600.0


class ServiceClient:
    """The agent's HTTP calls, retried through connection errors and 5xx (a restart)."""

    def __init__(self, url: str, token: str) -> None:
        from aidge_deploy.farm.client import http_transport

        self._http = httpx.Client(
            transport=http_transport(),
            base_url=url + "/api/agent",
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(60.0, connect=5.0),
        )
        self.stopping = threading.Event()

    def call(
        self, method: str, path: str, *, retry_s: float = SERVICE_RETRY_S, **kw: Any
    ) -> httpx.Response:
        deadline = time.monotonic() + retry_s
        delay = 0.2
        while True:
            try:
                r = self._http.request(method, path, **kw)
                if r.status_code < 500:
                    return r
                problem = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}"
            if time.monotonic() > deadline or self.stopping.is_set():
                raise DeployError(f"farm service unreachable ({problem}) for {method} {path}")
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def close(self) -> None:
        self._http.close()


class LabgridThread:
    """labgrid's asyncio client session on a loop of its own, callable from any thread."""

    def __init__(self, address: str, farm: str) -> None:
        from aidge_deploy.farm.coordinator import CoordinatorLink

        self.loop = asyncio.new_event_loop()
        self.link = CoordinatorLink(address, farm)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="labgrid")
        self._thread.start()
        self._lock = threading.Lock()

    def call(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float = 60.0) -> T:
        async def run() -> T:
            if not self.link.connected:
                await self.link.connect()
            return await make()

        with self._lock:  # one labgrid request at a time on the session
            return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.link.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def response_message(r: httpx.Response) -> str:
    """The farm's error message in a response, else its HTTP status."""
    try:
        return str(r.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {r.status_code}"


def response_hint(r: httpx.Response) -> str | None:
    """The farm's hint in an error response, if it gave one."""
    try:
        return str(r.json()["error"].get("hint") or "") or None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


__all__ = ["SERVICE_RETRY_S", "LabgridThread", "ServiceClient", "response_hint", "response_message"]
