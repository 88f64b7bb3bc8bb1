"""Runs a program on this machine with a timeout, its output kept on disk.

stdout and stderr go straight to files (nothing is lost if we die), the child gets its own
process group so a hang is killed with everything it spawned, and that group is registered
with the current run (``runcontrol``) so an interruption or a cancellation from another
thread stops it too.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from aidge_deploy.cpupriority import share_priority
from aidge_deploy.errors import ExecutionError
from aidge_deploy.runcontrol import checkpoint, tracked_group


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
    """Run ``argv`` to completion or until ``timeout_s``; never raises for the child's fate.

    Raises ``RunInterrupted`` when the run is interrupted or cancelled meanwhile (the child
    and everything it started are stopped first).
    """
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        waited = run_to_streams(
            argv,
            cwd=cwd,
            timeout_s=timeout_s,
            stdout=out,
            stderr=err,
            env=env,
            stdin_data=stdin_data,
            kill_grace_s=kill_grace_s,
        )
    returncode, sig = decode_status(waited.status, waited.timed_out)
    # Not reported: Linux carries a parent's RSS high-water mark into its child's ru_maxrss
    # across fork+exec, so for a child of this (large) Python process the figure would be
    # Python's. Callers that need the program's peak run it under the perf_run launcher.
    return ProcessRun(
        argv=tuple(argv),
        returncode=returncode,
        signal=sig,
        stdout=stdout_path.read_text(encoding="utf-8", errors="replace"),
        stderr=stderr_path.read_text(encoding="utf-8", errors="replace"),
        duration_s=waited.duration_s,
        timed_out=waited.timed_out,
        peak_rss_bytes=None,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
    )


@dataclass(frozen=True)
class Waited:
    """How a child started by ``run_to_streams`` ended (raw wait status)."""

    status: int
    timed_out: bool
    duration_s: float

    @property
    def returncode(self) -> int | None:
        """Exit code, ``-N`` when killed by signal N, ``None`` when we killed it at the timeout."""
        return decode_status(self.status, self.timed_out)[0]


def run_to_streams(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    stdout: IO[Any] | int | None,
    stderr: IO[Any] | int | None,
    env: Mapping[str, str] | None = None,
    stdin_data: bytes | None = None,
    kill_grace_s: float = 2.0,
) -> Waited:
    """Start ``argv`` in its own process group, registered with the current run, and wait.

    The group is killed whole at the timeout, on an interruption and when the run is
    cancelled from another thread (then ``RunInterrupted`` is raised once it is gone).
    ``FileNotFoundError``/``PermissionError`` of a program that cannot start propagate.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    share_priority(proc.pid)
    with tracked_group(proc.pid):
        try:
            if stdin_data is not None and proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.write(stdin_data)
                    proc.stdin.close()
        except BaseException:
            kill_group(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            raise
        status, _rusage, timed_out = wait_child(proc.pid, timeout_s, kill_grace_s)
    code = decode_status(status, timed_out)[0]
    proc.returncode = code if code is not None else -9  # reaped by wait4: keep Popen quiet
    checkpoint()  # cancelled from another thread: the child was killed for that
    return Waited(status, timed_out, time.perf_counter() - started)


def run_captured(
    argv: Sequence[str],
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True)`` for short tool calls, but the
    tool gets its own process group, registered with the current run and killed whole on a
    timeout (``subprocess.TimeoutExpired``) or an interruption.
    """
    with subprocess.Popen(
        list(argv),
        cwd=cwd,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else {**os.environ, **env},
        start_new_session=True,
    ) as proc:
        share_priority(proc.pid)
        with tracked_group(proc.pid):
            try:
                out, err = proc.communicate(input_text, timeout=timeout_s)
            except BaseException:
                kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
        checkpoint()
        return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _until_exited(pid: int, timeout_s: float, exited: Callable[[], bool]) -> bool:
    """Ask ``exited()`` (which reaps the child once it has ended) until it says so, or
    ``timeout_s`` passes (False). A pidfd wakes us the moment the child exits (no polling
    latency added to every run); where the kernel has none, short polls."""
    deadline = time.monotonic() + timeout_s
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        delay = 0.0005
        while not exited():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if pidfd is not None:
                select.select([pidfd], [], [], remaining)
            else:
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, 0.02)
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _wait_exit(pid: int, timeout_s: float) -> tuple[int, resource.struct_rusage] | None:
    """Reap ``pid`` if it exits within ``timeout_s``; ``None`` if it is still running."""
    reaped: list[tuple[int, resource.struct_rusage]] = []

    def exited() -> bool:
        got, status, rusage = os.wait4(pid, os.WNOHANG)
        if got == pid:
            reaped.append((status, rusage))
        return bool(reaped)

    return reaped[0] if _until_exited(pid, timeout_s, exited) else None


def wait_process(process: subprocess.Popen[Any], timeout_s: float) -> int | None:
    """``process.wait(timeout_s)`` that returns the moment it exits: its status, or
    ``None`` if it is still running. ``Popen.wait`` with a timeout polls with doubling
    sleeps, so it noticed an exit up to ~2 ms late (QEMU's 3 ms teardown often so)."""
    if _until_exited(process.pid, timeout_s, lambda: process.poll() is not None):
        return process.returncode
    return None


def wait_child(
    pid: int, timeout_s: float, grace_s: float
) -> tuple[int, resource.struct_rusage | None, bool]:
    """Reap a child started in its own process group: ``(status, rusage, timed_out)``.

    At the timeout the whole group gets SIGTERM, then SIGKILL after ``grace_s``; Ctrl-C
    kills the group too before it propagates.
    """
    try:
        done = _wait_exit(pid, timeout_s)
        if done is not None:
            return done[0], done[1], False
        kill_group(pid, signal.SIGTERM)
        done = _wait_exit(pid, grace_s)
        if done is not None:
            return done[0], done[1], True
        kill_group(pid, signal.SIGKILL)
        _, status, rusage = os.wait4(pid, 0)
        return status, rusage, True
    except KeyboardInterrupt:
        kill_group(pid, signal.SIGKILL)
        os.wait4(pid, 0)
        raise


def decode_status(status: int, timed_out: bool) -> tuple[int | None, int | None]:
    """``(returncode, signal)`` from a wait status; the return code is None when we killed it."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return (None if timed_out else -sig), sig
    return (None if timed_out else os.WEXITSTATUS(status)), None


def kill_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def describe_exit(run: ProcessRun, timeout_s: float) -> ExecutionError | None:
    """Map how a program ended to a typed error (None when it exited 0)."""
    if run.timed_out:
        return ExecutionError(
            f"The program did not finish within {timeout_s:g} s and was killed",
            hint="It may be stuck, or the benchmark is long: raise DeployConfig.run_timeout "
            "(--timeout) or lower nb_iterations.",
            log_path=run.stdout_path,
        )
    if run.signal is not None:
        name = signal.Signals(run.signal).name
        return ExecutionError(
            f"The program crashed with signal {run.signal} ({name})",
            hint="Check the export (input sizes, memory) and the log; rebuild with "
            "aidge_cmp to compare layer outputs with Aidge.",
            log_path=run.stdout_path,
        )
    if run.returncode not in (0, None):
        stderr_tail = "\n".join(run.stderr.splitlines()[-10:])
        return ExecutionError(
            f"The program exited with status {run.returncode}"
            + (f":\n{stderr_tail}" if stderr_tail else ""),
            hint="See the log for what it printed before failing.",
            log_path=run.stdout_path,
        )
    return None
