"""Runs a program on this machine with a timeout, its output kept on disk, and its peak RSS.

stdout and stderr go straight to files (nothing is lost if we die), the child gets its own
process group so a hang is killed with everything it spawned, and ``wait4`` gives the
peak resident set size without any helper binary.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRun:
    """How a local process ended."""

    argv: tuple[str, ...]
    returncode: int | None  # None when killed at the timeout
    signal: int | None  # the signal that ended it (crash or our kill)
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    peak_rss_bytes: int | None
    stdout_path: Path
    stderr_path: Path


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    stdout_path: Path,
    stderr_path: Path,
    env: Mapping[str, str] | None = None,
    stdin_data: bytes | None = None,
    kill_grace_s: float = 2.0,
) -> ProcessRun:
    """Run ``argv`` to completion or until ``timeout_s``; never raises for the child's fate."""
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=out,
            stderr=err,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        if stdin_data is not None and proc.stdin is not None:
            try:
                proc.stdin.write(stdin_data)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        status, rusage, timed_out = _wait(proc, timeout_s, kill_grace_s)
    duration = time.perf_counter() - started
    returncode: int | None
    sig: int | None = None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        returncode = None if timed_out else -sig
    else:
        returncode = None if timed_out else os.WEXITSTATUS(status)
    proc.returncode = returncode if returncode is not None else -9
    # ru_maxrss is in KiB on Linux
    peak = int(rusage.ru_maxrss) * 1024 if rusage is not None and rusage.ru_maxrss else None
    return ProcessRun(
        argv=tuple(argv),
        returncode=returncode,
        signal=sig,
        stdout=stdout_path.read_text(encoding="utf-8", errors="replace"),
        stderr=stderr_path.read_text(encoding="utf-8", errors="replace"),
        duration_s=duration,
        timed_out=timed_out,
        peak_rss_bytes=peak,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
    )


def _wait(
    proc: subprocess.Popen[bytes], timeout_s: float, grace_s: float
) -> tuple[int, resource.struct_rusage | None, bool]:
    deadline = time.monotonic() + timeout_s
    delay = 0.0005
    try:
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                return status, rusage, False
            if time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        _kill_group(proc.pid, signal.SIGTERM)
        grace_deadline = time.monotonic() + grace_s
        while time.monotonic() < grace_deadline:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                return status, rusage, True
            time.sleep(0.01)
        _kill_group(proc.pid, signal.SIGKILL)
        _, status, rusage = os.wait4(proc.pid, 0)
        return status, rusage, True
    except KeyboardInterrupt:
        _kill_group(proc.pid, signal.SIGKILL)
        os.wait4(proc.pid, 0)
        raise


def _kill_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
