"""Running a tool's blocking work so that a cancelled call leaves nothing behind.

Why this module exists: the API is blocking (builds, QEMU, SSH), the server is async. A tool
call is cancelled when the client cancels it (``notifications/cancelled``, a client-side
timeout), when the session closes (the SDK cancels every call in flight at the end of its
input) and when the server is stopped by a signal; in each case the run it started must
stop with every process of it. ``run_blocking`` runs the work in a worker thread under the
run's ``RunControl``; on cancellation it cancels the control (its process groups killed, its
clean-ups run), waits for the worker to return, then lets the cancellation go on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import anyio.to_thread

from aidge_deploy.runcontrol import RunControl

#: longest wait for a cancelled run's worker to return (its processes are already killed)
STOP_WAIT_S = 60.0


async def run_blocking[T](work: Callable[[RunControl], T], control: RunControl) -> T:
    """``work(control)`` in a worker thread, under ``control``; stopped with the call."""
    finished = threading.Event()

    def body() -> T:
        try:
            with control.activate():
                return work(control)
        finally:
            finished.set()

    try:
        return await anyio.to_thread.run_sync(body, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(control.cancel, "the tool call was cancelled")
            await anyio.to_thread.run_sync(finished.wait, STOP_WAIT_S)
        raise


__all__ = ["STOP_WAIT_S", "run_blocking"]
