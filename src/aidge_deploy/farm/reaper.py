"""Nothing of a farm job outlives it: the agent finds and ends the job's processes.

Each job's deploy runs in a child (``runner``) whose environment carries
``AIDGE_FARM_JOB=<id>``; everything it starts (QEMU, GDB servers, builds) inherits it, even
processes started in a new session to be killed as a group. The agent is a child
subreaper (``PR_SET_CHILD_SUBREAPER``), so orphans of a job come back to it instead of
init; after the runner exits, ``end_job_processes`` signals every process still carrying
the job's mark (TERM, then KILL) and reaps those that were re-parented to the agent.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time

JOB_ENV = "AIDGE_FARM_JOB"
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def job_processes(mark: str) -> list[int]:
    """PIDs of live processes whose environment holds ``AIDGE_FARM_JOB=<mark>``."""
    needle = f"{JOB_ENV}={mark}".encode()
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != b"Z":
            found.append(int(entry))
    return found


def end_job_processes(mark: str, grace: float = 5.0) -> list[int]:
    """TERM then KILL every process of the job; the PIDs that had to be ended."""
    pids = job_processes(mark)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and job_processes(mark):
        _reap(pids)
        time.sleep(0.05)
    for pid in job_processes(mark):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.05)
    _reap(pids)
    return pids


def _reap(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


__all__ = ["JOB_ENV", "become_subreaper", "end_job_processes", "job_processes"]
