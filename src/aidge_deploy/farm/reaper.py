"""Nothing of a farm job outlives it: the agent finds and ends the job's processes.

Each job's deploy runs in a child (``jobprocess``) whose environment carries
``AIDGE_FARM_JOB=<id>`` and ``AIDGE_FARM_AGENT=<agent pid>``; everything it starts (QEMU,
GDB servers, builds) inherits both, even processes started in a new session to be killed
as a group. The agent is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so orphans of a
job come back to it instead of init; after the runner exits, ``end_job_processes`` signals
every process still carrying the job's mark (TERM, then KILL) and reaps those that were
re-parented to the agent. The agent's mark keeps two farms on one machine (job ids start
at 1 in each) from ending each other's jobs.

A runner is started before its job is known (kept warm, its imports done): it starts
with a placeholder mark of fixed width, and ``take_job_mark`` writes the job's id over it
in the environment block the kernel shows in ``/proc/<pid>/environ``, so the runner
itself is found by its job's mark like every process it starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from dataclasses import dataclass

JOB_ENV = "AIDGE_FARM_JOB"
AGENT_ENV = "AIDGE_FARM_AGENT"
#: the job mark of a runner that has no job yet (as wide as any job mark it may take)
SPARE_MARK = "spare".ljust(24, "_")
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def job_processes(mark: str, agent: str | None = None) -> list[int]:
    """PIDs of live processes whose environment holds ``AIDGE_FARM_JOB=<mark>`` (and
    ``AIDGE_FARM_AGENT=<agent>`` when ``agent`` is given).

    A process in the middle of ``execve`` shows an empty environment for a moment (its
    parent is already resumed, the new image's environment not yet laid out): those are
    read again, for at most ``_EXEC_WAIT`` seconds, so a child started just now is found.
    """
    needles = [f"{JOB_ENV}={mark}".encode()]
    if agent is not None:
        needles.append(f"{AGENT_ENV}={agent}".encode())
    me = os.getpid()
    pending = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) != me]
    found: list[int] = []
    deadline = time.monotonic() + _EXEC_WAIT
    while True:
        exec_ing = []
        for pid in pending:
            seen = _read_process(pid)
            if seen is None:
                continue
            env, stat = seen
            if stat.zombie:
                continue
            if all(n in env for n in needles):
                found.append(pid)
            elif not env and stat.mid_exec:
                exec_ing.append(pid)
        if not exec_ing or time.monotonic() >= deadline:
            return found
        pending = exec_ing
        time.sleep(0.005)


_EXEC_WAIT = 0.25
_PF_KTHREAD = 0x00200000


@dataclass(frozen=True)
class _Stat:
    zombie: bool
    #: a user process whose environment is not laid out yet (``env_end`` is 0)
    mid_exec: bool


def _read_process(pid: int) -> tuple[list[bytes], _Stat] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is field 3 (state), fields[6] field 9 (flags), fields[48] field 51 (env_end)
    kernel_thread = int(fields[6]) & _PF_KTHREAD != 0
    mid_exec = not kernel_thread and len(fields) > 48 and fields[48] == b"0"
    return raw.split(b"\0") if raw else [], _Stat(fields[0] == b"Z", mid_exec)


def end_job_processes(mark: str, grace: float = 5.0, agent: str | None = None) -> list[int]:
    """TERM then KILL every process of the job; the PIDs that had to be ended."""
    pids = job_processes(mark, agent)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline and job_processes(mark, agent):
        _reap(pids)
        time.sleep(0.05)
    for pid in job_processes(mark, agent) if pids else []:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if pids:
        time.sleep(0.05)
        _reap(pids)
    return pids


def take_job_mark(mark: str) -> bool:
    """Give this process (a runner started with ``SPARE_MARK``) the job mark ``mark``.

    The children it starts from now on inherit it through ``os.environ``; for the process
    itself, the value in its initial environment block (what ``/proc/self/environ`` shows)
    is overwritten in place, padded with NULs. False when that could not be done (the
    runner is then still ended through its process group, by the agent).
    """
    os.environ[JOB_ENV] = mark
    if len(mark) > len(SPARE_MARK):
        return False
    try:
        address = _initial_value_address()
        if address is None:
            return False
        value = mark.encode().ljust(len(SPARE_MARK), b"\0")
        ctypes.memmove(address, value, len(value))
        with open("/proc/self/environ", "rb") as f:
            return f"{JOB_ENV}={mark}".encode() in f.read().split(b"\0")
    except (OSError, ValueError, IndexError):
        return False


def _initial_value_address() -> int | None:
    """Address of the placeholder's value in the initial environment block, from the
    block's bounds in ``/proc/self/stat`` (fields 50-51: env_start, env_end)."""
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    # fields[0] is field 3 (state): env_start is field 50
    env_start, env_end = int(fields[47]), int(fields[48])
    block = ctypes.string_at(env_start, env_end - env_start)
    needle = f"{JOB_ENV}={SPARE_MARK}\0".encode()
    at = block.find(needle)
    if at < 0 or (at > 0 and block[at - 1] != 0):
        return None
    return env_start + at + len(JOB_ENV) + 1


def _reap(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


__all__ = [
    "AGENT_ENV",
    "JOB_ENV",
    "SPARE_MARK",
    "become_subreaper",
    "end_job_processes",
    "job_processes",
    "take_job_mark",
]
