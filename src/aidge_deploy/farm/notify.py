"""Wake long-poll requests when something they wait for changes (in-process only).

Handlers run in uvicorn's thread pool or on its loop; ``notify`` is safe from either.
Waiters re-check the database after at most ``slice_s`` anyway, so a missed wake-up
only costs that much latency, never a lost update.
"""

from __future__ import annotations

import asyncio
import contextlib


class Notifier:
    def __init__(self, slice_s: float = 1.0) -> None:
        self.slice_s = slice_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: dict[str, asyncio.Event] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def notify(self, *keys: str) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._fire(keys)
        else:
            loop.call_soon_threadsafe(self._fire, keys)

    def _fire(self, keys: tuple[str, ...]) -> None:
        for key in keys:
            event = self._events.pop(key, None)
            if event is not None:
                event.set()

    async def wait(self, key: str, timeout: float) -> None:
        event = self._events.setdefault(key, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), max(0.0, min(timeout, self.slice_s)))


__all__ = ["Notifier"]
