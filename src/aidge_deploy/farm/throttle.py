"""Failed logins are rate limited: password guessing gets a few tries, then waits.

One throttle serves the REST API's ``POST /api/token`` and the dashboard's ``/login``.
Only failed attempts count, in a moving window (the ``limits`` library, in memory: one
service process holds them), under two keys: the user name (guessing one account from
many hosts) and the client's address (trying many names from one host). Once either is
used up, a login for that name or from that address is refused with HTTP 429 and
``Retry-After`` — before its password is even checked, so a guesser learns nothing and
costs no bcrypt time — until the window has room again.
"""

from __future__ import annotations

import math
import threading
import time

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from aidge_deploy.farm.jobs import FarmRequestError
from aidge_deploy.farm.settings import LoginLimits


class TooManyLogins(FarmRequestError):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            429,
            f"too many failed logins: try again in {retry_after} s",
            "Wait, then log in with the right password (a farm admin can reset it).",
            retry_after=retry_after,
        )
        self.retry_after = retry_after


class LoginThrottle:
    def __init__(self, limits: LoginLimits | None = None) -> None:
        self.limits = limits or LoginLimits()
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._user = RateLimitItemPerSecond(self.limits.per_user, self.limits.window_s)
        self._address = RateLimitItemPerSecond(self.limits.per_address, self.limits.window_s)
        self._lock = threading.Lock()  # check-then-hit of one attempt at a time

    def _keys(self, username: str, address: str) -> tuple[tuple[RateLimitItem, str], ...]:
        return ((self._user, f"user:{username.lower()}"), (self._address, f"addr:{address}"))

    def check(self, username: str, address: str) -> None:
        """Raise ``TooManyLogins`` when this name or address has no attempt left."""
        with self._lock:
            waits = [
                self._limiter.get_window_stats(item, key).reset_time - time.time()
                for item, key in self._keys(username, address)
                if not self._limiter.test(item, key)
            ]
        if waits:
            raise TooManyLogins(max(1, math.ceil(max(waits))))

    def failed(self, username: str, address: str) -> None:
        with self._lock:
            for item, key in self._keys(username, address):
                self._limiter.hit(item, key)


__all__ = ["LoginThrottle", "TooManyLogins"]
