"""The programs a run starts keep the run's CPU priority.

Why this module exists: each program a run starts (compilers, QEMU, GDB servers, flash
tools, the docker CLI) gets a session of its own, so that it can be stopped whole
(``runcontrol``). Where the kernel shares CPU time between sessions before it shares it
between processes (autogroup, on by default in most distributions' kernels), a new
session is a new group at nice 0, whatever the nice value of its processes: a user's
``nice aidge-deploy ...``, or a farm agent's low priority for its jobs, ended at the first
program started. ``share_priority`` gives the new session's group the run's nice value.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _autogroup(pid: int | str) -> Path:
    """Where the session group of ``pid`` shows and takes its nice value
    ("/autogroup-123 nice 10"); absent on kernels without autogroup."""
    return Path(f"/proc/{pid}/autogroup")


def _group_nice(pid: int | str) -> int | None:
    try:
        return int(_autogroup(pid).read_text(encoding="ascii").split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def current_nice() -> int:
    """This process's effective nice value: its own, or its session group's if higher."""
    own = os.getpriority(os.PRIO_PROCESS, 0)
    return max(own, _group_nice("self") or 0)


def lower_priority(nice: int) -> None:
    """Give this process, what it starts later, and its session's group the nice value
    ``nice`` at least (a nice value is per thread on Linux, inherited by the threads and
    processes a thread starts: call it before starting any)."""
    if nice <= 0:
        return
    if os.getpriority(os.PRIO_PROCESS, 0) < nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    if (_group_nice("self") or 0) < nice:
        with contextlib.suppress(OSError):  # not writable: the process's nice still holds
            _autogroup("self").write_text(f"{nice}\n", encoding="ascii")


def share_priority(pid: int) -> None:
    """Give the session of ``pid`` (a program just started with ``start_new_session``)
    this process's effective nice value, when it is lower than normal."""
    nice = current_nice()
    if nice <= 0:
        return
    with contextlib.suppress(OSError):  # gone already, or a kernel without autogroup
        _autogroup(pid).write_text(f"{nice}\n", encoding="ascii")


__all__ = ["current_nice", "lower_priority", "share_priority"]
