"""Wake long-poll requests when something they wait for changes (in-process only).

Handlers run in uvicorn's thread pool or on its loop; ``notify`` is safe from either.
Waiters re-check the database after at most ``slice_s`` anyway, so a missed wake-up
only costs that much latency, never a lost update.

A key's event exists only while someone waits on it: the last waiter to leave (woken,
timed out, or cancelled because its client went away) removes it, so keys nobody will
ever notify again (a finished job's page closed) do not pile up.
"""

from __future__ import annotations

import asyncio
import contextlib


class _Key:
    __slots__ = ("event", "waiters")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.waiters = 0


class Notifier:
    def __init__(self, slice_s: float = 1.0) -> None:
        self.slice_s = slice_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keys: dict[str, _Key] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def __len__(self) -> int:
        """Keys someone waits on now."""
        return len(self._keys)

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
            entry = self._keys.pop(key, None)  # later waiters wait for the next change
            if entry is not None:
                entry.event.set()

    async def wait(self, key: str, timeout: float) -> None:
        """Until ``key`` is notified, or at most ``min(timeout, slice_s)`` seconds."""
        entry = self._keys.get(key)
        if entry is None:
            entry = self._keys[key] = _Key()
        entry.waiters += 1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry.event.wait(), max(0.0, min(timeout, self.slice_s)))
        finally:
            entry.waiters -= 1
            if entry.waiters == 0 and self._keys.get(key) is entry:
                del self._keys[key]


__all__ = ["Notifier"]
