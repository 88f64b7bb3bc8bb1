"""Failed logins slow the guesser down, never lock anybody out.

One throttle serves the REST API's ``POST /api/token`` and the dashboard's ``/login``.
Only failed attempts count, under the pair (client address, user name): after
``free`` failures of a pair, each further attempt of that pair must wait a delay that
doubles with every failure (``base_s``, ``2 x base_s``, ... up to ``max_s``); an attempt
made before its delay is over is refused with HTTP 429 and ``Retry-After``, before its
password is even checked (a guesser learns nothing and costs no bcrypt time). The right
password from another address is never slowed by it, so nobody can keep an account out
(a CI account included); a success clears its pair. A second, wider allowance per address
(``per_address_free``) bounds how many names one address may try. Agents' tokens and API
tokens do not log in and are not throttled. Failures are forgotten ``forget_s`` after the
last one. In memory: one service process holds them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.settings import LoginLimits


class TooManyLogins(FarmRequestError):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            429,
            f"too many failed logins from this address: try again in {retry_after} s",
            "Wait, then log in with the right password (a farm admin can reset it).",
            retry_after=retry_after,
        )
        self.retry_after = retry_after


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0


class LoginThrottle:
    def __init__(
        self, limits: LoginLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or LoginLimits()
        self._clock = clock
        self._swept_at = clock()
        self._pairs: dict[tuple[str, str], _Failures] = {}
        self._addresses: dict[str, _Failures] = {}
        self._lock = threading.Lock()

    def delay_after(self, failures: int, free: int) -> float:
        """The wait a key owes after ``failures`` failures (0 while within ``free``)."""
        extra = failures - free
        if extra <= 0:
            return 0.0
        return min(self.limits.max_s, self.limits.base_s * 2 ** min(extra - 1, 60))

    def _wait(self, entry: _Failures | None, free: int, now: float) -> float:
        if entry is None:
            return 0.0
        return max(0.0, entry.last + self.delay_after(entry.count, free) - now)

    def _forget_old(self, now: float) -> None:
        horizon = now - self.limits.forget_s
        if self._swept_at > horizon + self.limits.forget_s / 10:
            return  # swept lately: old entries cost nothing until the next sweep
        self._swept_at = now
        self._pairs = {k: e for k, e in self._pairs.items() if e.last >= horizon}
        self._addresses = {k: e for k, e in self._addresses.items() if e.last >= horizon}

    def check(self, username: str, address: str) -> None:
        """Raise ``TooManyLogins`` while this address owes a wait for this name (or for
        trying too many names)."""
        now = self._clock()
        key = (address, username.lower())
        with self._lock:
            self._forget_old(now)
            wait = max(
                self._wait(self._pairs.get(key), self.limits.free, now),
                self._wait(self._addresses.get(address), self.limits.per_address_free, now),
            )
        if wait > 0:
            raise TooManyLogins(max(1, math.ceil(wait)))

    def failed(self, username: str, address: str) -> None:
        now = self._clock()
        with self._lock:
            for entry in (
                self._pairs.setdefault((address, username.lower()), _Failures()),
                self._addresses.setdefault(address, _Failures()),
            ):
                entry.count += 1
                entry.last = now

    def succeeded(self, username: str, address: str) -> None:
        with self._lock:
            self._pairs.pop((address, username.lower()), None)


__all__ = ["LoginThrottle", "TooManyLogins"]
