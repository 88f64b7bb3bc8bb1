"""Stopping a run cleanly: cancellation from any thread, and SIGINT/SIGTERM/SIGHUP.

Why this module exists: a run starts processes (the program and its launcher, compilers,
QEMU, GDB servers, the docker CLI), containers and remote processes. Whoever stops the run —
Ctrl-C, a CI job being cancelled (SIGTERM), a closed terminal (SIGHUP), or a farm agent
cancelling a job from another thread — must leave none of them behind.

A ``RunControl`` is the handle of one run. The code that starts something registers it on
the control that is *current* in its context (a ``ContextVar``, so each thread running a
deploy has its own): a process group with ``tracked_group``, anything else (a container, a
remote process) with ``cleanup_on_cancel``. ``cancel()`` — callable from any thread — kills
every registered group (SIGTERM, SIGKILL after a grace period) and runs every registered
clean-up; the run's own thread then wakes up (its child is gone) and raises
``RunInterrupted`` at the next ``checkpoint``. When a run ends by any exception, whatever
is still registered is stopped the same way (``RunControl.activate``).

``interruptible`` turns the three signals into ``RunInterrupted`` in the main thread.
``RunInterrupted`` subclasses ``KeyboardInterrupt`` on purpose: every ``except
KeyboardInterrupt`` clean-up path (child waits, QEMU, the SSH layer) handles it exactly like
Ctrl-C, and ``except Exception`` handlers cannot swallow it.

Usage from another thread (what a board-farm agent does to cancel a job)::

    control = RunControl()
    worker = threading.Thread(target=lambda: deploy(export, config, control=control))
    worker.start()
    ...
    control.cancel("job cancelled by its owner")  # returns once everything is stopped
    worker.join()  # deploy() raised RunInterrupted in the worker
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from types import FrameType

_log = logging.getLogger(__name__)

#: the signals ``interruptible`` handles by default
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_GRACE_S = 2.0


class RunInterrupted(KeyboardInterrupt):
    """The run was stopped before its end: by a signal or by ``RunControl.cancel``.

    ``log_path`` is the run's log folder once one exists; ``exit_status`` is the shell
    convention (128 + signal number; 130, as for Ctrl-C, for a cancellation).
    """

    def __init__(
        self,
        reason: str = "interrupted",
        *,
        signal_number: int | None = None,
        log_path: Path | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.signal_number = signal_number
        self.log_path = log_path

    @property
    def exit_status(self) -> int:
        return 128 + int(self.signal_number or signal.SIGINT)

    def __str__(self) -> str:
        return self.reason


def signal_name(signal_number: int) -> str:
    try:
        return signal.Signals(signal_number).name
    except ValueError:
        return f"signal {signal_number}"


class RunControl:
    """Cancellation handle of one run; every method is safe to call from any thread."""

    def __init__(self, *, grace_s: float = _GRACE_S) -> None:
        self.grace_s = grace_s
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._ids = itertools.count()
        self._groups: dict[int, int] = {}  # registration id -> process group id
        self._cleanups: dict[int, Callable[[], None]] = {}
        self.reason: str | None = None
        self.signal_number: int | None = None
        #: the run's log folder, once the run has one (set by ``deploy``)
        self.log_path: Path | None = None

    # ---------------------------------------------------------------- state

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def interruption(self) -> RunInterrupted:
        """The exception that reports this cancellation."""
        reason = self.reason or "cancelled"
        return RunInterrupted(reason, signal_number=self.signal_number, log_path=self.log_path)

    def checkpoint(self) -> None:
        """Raise ``RunInterrupted`` if the run was cancelled."""
        if self._cancelled.is_set():
            raise self.interruption()

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s``, waking at once on cancellation; True if cancelled."""
        return self._cancelled.wait(timeout_s)

    # ---------------------------------------------------------------- registration

    def track_group(self, pgid: int) -> int:
        """Register a process group (a child started with ``start_new_session``)."""
        with self._lock:
            key = next(self._ids)
            self._groups[key] = pgid
            cancelled = self._cancelled.is_set()
        if cancelled:  # started after the cancel: stop it now
            _stop_groups([pgid], self.grace_s)
        return key

    def add_cleanup(self, callback: Callable[[], None]) -> int:
        """Register a clean-up (stop a container, a remote process) run on cancellation."""
        with self._lock:
            key = next(self._ids)
            self._cleanups[key] = callback
            cancelled = self._cancelled.is_set()
        if cancelled:
            self._run_cleanups([self._pop_cleanup(key)])
        return key

    def forget(self, key: int) -> None:
        """Unregister a group or clean-up that ended normally."""
        with self._lock:
            self._groups.pop(key, None)
            self._cleanups.pop(key, None)

    def _pop_cleanup(self, key: int) -> Callable[[], None] | None:
        with self._lock:
            return self._cleanups.pop(key, None)

    # ---------------------------------------------------------------- stopping

    def mark_cancelled(self, reason: str, signal_number: int | None = None) -> bool:
        """Record the cancellation without stopping anything; False if already cancelled."""
        with self._lock:
            if self._cancelled.is_set():
                return False
            self.reason = reason
            self.signal_number = signal_number
            self._cancelled.set()
            return True

    def cancel(self, reason: str = "cancelled", *, signal_number: int | None = None) -> None:
        """Stop the run: kill its process groups, run its clean-ups, wake its waits."""
        self.mark_cancelled(reason, signal_number)
        self.stop_all()

    def stop_all(self) -> None:
        """Stop everything still registered (used after an error as well as on cancel)."""
        with self._lock:
            groups = list(self._groups.values())
            cleanups: list[Callable[[], None] | None] = list(self._cleanups.values())
            self._groups.clear()
            self._cleanups.clear()
        if groups:
            _stop_groups(groups, self.grace_s)
        self._run_cleanups(cleanups)

    @staticmethod
    def _run_cleanups(cleanups: Sequence[Callable[[], None] | None]) -> None:
        with shielded():
            for callback in cleanups:
                if callback is None:
                    continue
                try:
                    callback()
                except Exception as exc:  # one failed clean-up must not skip the others
                    _log.warning("Clean-up after the interruption failed: %s", exc)

    # ---------------------------------------------------------------- context

    @contextlib.contextmanager
    def activate(self) -> Iterator[RunControl]:
        """Make this the current control of the calling context for the duration.

        On exit by an exception, everything still registered is stopped.
        """
        token = _CURRENT.set(self)
        try:
            yield self
        except BaseException:
            self.stop_all()
            raise
        finally:
            _CURRENT.reset(token)


_CURRENT: ContextVar[RunControl | None] = ContextVar("aidge_deploy_run_control", default=None)
_SHIELDED: ContextVar[bool] = ContextVar("aidge_deploy_run_shielded", default=False)


def current() -> RunControl | None:
    """The control of the run executing in this context (None outside a run, or shielded)."""
    return None if _SHIELDED.get() else _CURRENT.get()


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Clean-up code: not interrupted by the run's cancellation (it is what ends it).

    Inside, ``checkpoint`` does not raise and nothing is registered with the run, so a
    ``docker rm`` or a remote ``kill`` issued after a cancellation is not cancelled itself.
    """
    token = _SHIELDED.set(True)
    try:
        yield
    finally:
        _SHIELDED.reset(token)


def checkpoint() -> None:
    """Raise ``RunInterrupted`` if the current run was cancelled (no-op outside a run)."""
    control = current()
    if control is not None:
        control.checkpoint()


def cancelled() -> bool:
    control = current()
    return control is not None and control.cancelled


def register_group(pgid: int) -> Callable[[], None]:
    """Register ``pgid`` with the current run until the returned function is called.

    For process groups whose lifetime is an object's (a QEMU machine, a channel), not a block.
    """
    control = current()
    if control is None:
        return lambda: None
    key = control.track_group(pgid)
    return lambda: control.forget(key)


@contextlib.contextmanager
def tracked_group(pgid: int) -> Iterator[None]:
    """Register ``pgid`` with the current run for the duration of the block."""
    forget = register_group(pgid)
    try:
        yield
    finally:
        forget()


@contextlib.contextmanager
def cleanup_on_cancel(callback: Callable[[], None]) -> Iterator[None]:
    """Run ``callback`` if the block ends by an exception or the run is cancelled meanwhile.

    Runs at most once; a normal exit unregisters it without calling it.
    """
    control = current()
    key = control.add_cleanup(callback) if control is not None else None
    try:
        yield
    except BaseException:
        pending = control._pop_cleanup(key) if control is not None and key is not None else None
        if control is None:
            pending = callback
        if pending is not None:
            RunControl._run_cleanups([pending])
        raise
    finally:
        if control is not None and key is not None:
            control.forget(key)


# -------------------------------------------------------------------- process groups


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is in group ``pgid`` (zombies wait for their parent)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _stop_groups(groups: Sequence[int], grace_s: float) -> None:
    """SIGTERM every group, SIGKILL those still alive after ``grace_s``."""
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    alive = list(groups)
    while alive and time.monotonic() < deadline:
        alive = [g for g in alive if _group_alive(g)]
        if alive:
            time.sleep(0.02)
    for pgid in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


# -------------------------------------------------------------------- signals


@contextlib.contextmanager
def interruptible(
    control: RunControl, signals: Sequence[signal.Signals] = STOP_SIGNALS
) -> Iterator[RunControl]:
    """In the main thread: each of ``signals`` cancels ``control`` and raises ``RunInterrupted``.

    Only the first signal raises; later ones (a second Ctrl-C, SIGHUP after SIGTERM) are
    ignored while the run stops its processes, so the clean-up itself is never cut short.
    Previous handlers are restored on exit. Outside the main thread this does nothing
    (Python delivers signals to the main thread only): use ``control.cancel()`` there.
    """
    if threading.current_thread() is not threading.main_thread():
        yield control
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if control.mark_cancelled(f"interrupted by {signal_name(signum)}", signum):
            raise control.interruption()

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield control
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


__all__ = [
    "STOP_SIGNALS",
    "RunControl",
    "RunInterrupted",
    "cancelled",
    "checkpoint",
    "cleanup_on_cancel",
    "current",
    "interruptible",
    "register_group",
    "shielded",
    "signal_name",
    "tracked_group",
]
