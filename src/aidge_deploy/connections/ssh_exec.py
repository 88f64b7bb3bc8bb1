"""Running one command on a board over SSH: streaming, logging, timeouts, no orphans.

Why this module exists: without a pty, closing an SSH channel does NOT stop the remote program
(verified with OpenSSH 9.2), so a client-side timeout or Ctrl-C would leave a benchmark running
on the board. Three layers prevent that:

1. the command runs as ``exec timeout --signal=TERM --kill-after=K T sh -c '<cmd>' <token>``,
   so the board itself ends it after ``T`` seconds (GNU timeout signals its whole process group);
2. on a client-side timeout, cancellation (KeyboardInterrupt) or a sink error, TERM is sent
   through the channel (an SSH ``signal`` request, which ``timeout`` forwards to the group);
3. as a fallback (old sshd ignoring signal requests, connection lost mid-run) the caller kills
   every process whose command line carries the run's unique ``token`` (``pkill -f``).

stdout and stderr are read concurrently line by line, handed to the caller's sinks and written
to the local log as they arrive (flushed per line), so a partial log survives any failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import asyncssh

LineSink = Callable[[str], None]
# Kills the processes of a run token on the board; returns whether it could reach the board.
Reaper = Callable[[str], Awaitable[bool]]

TIMEOUT_EXIT_STATUS = 124  # GNU timeout: the command timed out (TERM)
KILLED_EXIT_STATUS = 137  # 128 + SIGKILL: still alive kill-after seconds after TERM
CLIENT_GRACE_S = 3.0  # extra wait beyond the remote timeout before the client gives up
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class RemoteRunResult:
    """Outcome of one remote command. ``exit_status`` is ``None`` when killed by a signal."""

    command: str
    exit_status: int | None
    signal: str | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out


class ConnectionLostDuringRun(Exception):
    """Internal: the SSH connection ended before the command reported its exit."""

    def __init__(self, partial: RemoteRunResult, reaped: bool, token: str) -> None:
        super().__init__("connection lost")
        self.partial = partial
        self.reaped = reaped
        self.token = token


class SessionNotOpened(Exception):
    """Internal: the session channel could not be opened; the command never started."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.cause = cause


def new_run_token() -> str:
    """A unique marker put on the remote command line so leftovers can be found."""
    return f"aidge-run-{secrets.token_hex(6)}"


def _seconds(value: float) -> str:
    return f"{max(value, 0.01):.2f}".rstrip("0").rstrip(".")


def wrap_command(
    command: str,
    *,
    timeout_s: float,
    kill_after_s: float,
    token: str,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The shell line sent to the board (see the module docstring)."""
    script = command if cwd is None else f"cd {shlex.quote(cwd)} && {command}"
    parts = ["exec"]
    if env:
        bad = [name for name in env if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"invalid environment variable name(s): {bad}")
        parts += ["env", *(shlex.quote(f"{k}={v}") for k, v in env.items())]
    parts += [
        "timeout",
        "--signal=TERM",
        f"--kill-after={_seconds(kill_after_s)}",
        _seconds(timeout_s),
        "sh",
        "-c",
        shlex.quote(script),
        token,  # becomes $0 of sh: visible in /proc/*/cmdline for the pkill fallback
    ]
    return " ".join(parts)


def reap_command(token: str) -> str:
    """Shell line stopping every process group holding a process that carries ``token``.

    Whole groups, because the program may have children without the token on their command
    line (GNU ``timeout`` puts itself and the program in their own group). TERM first, KILL a
    second later. ``[a]idge-…`` keeps the pattern from matching this very shell.
    """
    pattern = shlex.quote(f"[{token[0]}]{token[1:]}")
    return (
        f'pids=$(pgrep -f {pattern}); [ -z "$pids" ] && exit 0; groups=; '
        "for p in $pids; do "
        "g=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f3); "
        '[ -n "$g" ] && [ "$g" -gt 1 ] && groups="$groups $g"; done; '
        "for g in $groups; do kill -TERM -- -$g 2>/dev/null; done; kill -TERM $pids 2>/dev/null; "
        "sleep 1; for g in $groups; do kill -KILL -- -$g 2>/dev/null; done; "
        "kill -KILL $pids 2>/dev/null; true"
    )


class _RunLog:
    """Local log of one run, flushed per line so it survives a crash or a drop."""

    def __init__(self, path: Path | None, target: str, command: str) -> None:
        self.path = path
        self._handle: IO[str] | None = None
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("w", encoding="utf-8")
        started = datetime.now(UTC).isoformat(timespec="seconds")
        self._handle.write(f"# ssh {target} at {started}\n# $ {command}\n")
        self._handle.flush()

    def line(self, stream: str, text: str) -> None:
        if self._handle is None:
            return
        prefix = "[stderr] " if stream == "stderr" else ""
        self._handle.write(prefix + text + ("" if text.endswith("\n") else "\n"))
        self._handle.flush()

    def close(self, footer: str) -> None:
        if self._handle is None:
            return
        self._handle.write(f"# {footer}\n")
        self._handle.close()
        self._handle = None


async def _pump(
    reader: asyncssh.SSHReader[str],
    stream: str,
    sink: LineSink | None,
    chunks: list[str],
    log: _RunLog,
) -> None:
    while True:
        try:
            line = await reader.readline()
        except (asyncssh.DisconnectError, asyncssh.ConnectionLost, BrokenPipeError):
            return  # the connection dropped: the caller sees no exit status
        if not line:  # EOF (asyncssh may also yield a final '' on its own)
            return
        chunks.append(line)
        log.line(stream, line)
        if sink is not None:
            sink(line[:-1] if line.endswith("\n") else line)


async def _terminate(proc: asyncssh.SSHClientProcess[Any], wait_s: float) -> None:
    """Send TERM through the channel and wait briefly for the exit."""
    with contextlib.suppress(Exception):
        proc.send_signal("TERM")
    with contextlib.suppress(Exception):
        await asyncio.wait_for(proc.wait_closed(), timeout=wait_s)
    with contextlib.suppress(Exception):
        proc.close()


async def run_remote(
    conn: asyncssh.SSHClientConnection,
    command: str,
    *,
    target: str,
    timeout_s: float,
    kill_after_s: float,
    reaper: Reaper,
    stdout_sink: LineSink | None = None,
    stderr_sink: LineSink | None = None,
    log_path: Path | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> RemoteRunResult:
    """Run ``command`` on the board; see the module docstring for the guarantees.

    Returns the result (``timed_out`` set when either side's timeout ended it). Raises
    ``ConnectionLostDuringRun`` when the connection drops before the exit status arrives;
    re-raises cancellation and sink exceptions after stopping the remote process.
    """
    token = new_run_token()
    wrapped = wrap_command(
        command, timeout_s=timeout_s, kill_after_s=kill_after_s, token=token, cwd=cwd, env=env
    )
    log = _RunLog(log_path, target, command)
    out: list[str] = []
    err: list[str] = []
    start = time.monotonic()
    client_timed_out = False
    footer = "ended"

    def result(exit_status: int | None, signal: str | None, timed_out: bool) -> RemoteRunResult:
        return RemoteRunResult(
            command=command,
            exit_status=exit_status,
            signal=signal,
            stdout="".join(out),
            stderr="".join(err),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            log_path=log_path,
        )

    proc: asyncssh.SSHClientProcess[Any] | None = None
    try:
        try:
            proc = await conn.create_process(wrapped, encoding="utf-8", errors="replace")
        except (asyncssh.Error, OSError) as exc:
            footer = f"session could not be opened: {exc}"
            raise SessionNotOpened(exc) from exc
        proc.stdin.write_eof()
        pumps = asyncio.gather(
            _pump(proc.stdout, "stdout", stdout_sink, out, log),
            _pump(proc.stderr, "stderr", stderr_sink, err, log),
        )
        try:
            async with asyncio.timeout(timeout_s + kill_after_s + CLIENT_GRACE_S):
                await pumps
                await proc.wait_closed()
        except TimeoutError:
            client_timed_out = True
            await _terminate(proc, kill_after_s + 1.0)
            await reaper(token)
        except BaseException:
            pumps.cancel()
            raise
        exit_status = proc.exit_status
        exit_signal = proc.exit_signal[0] if proc.exit_signal else None
        if exit_status is None and exit_signal is None and not client_timed_out:
            footer = "connection lost before the exit status arrived"
            reaped = await reaper(token)
            raise ConnectionLostDuringRun(result(None, None, False), reaped, token)
        if exit_status is not None and exit_status < 0:  # asyncssh: -1 when a signal ended it
            exit_status = None
        elapsed = time.monotonic() - start
        # `timeout` exits 124 after TERM; after KILL the whole group, itself included, dies.
        remote_timed_out = (
            exit_status in (TIMEOUT_EXIT_STATUS, KILLED_EXIT_STATUS) or exit_signal == "KILL"
        ) and elapsed >= timeout_s * 0.98
        timed_out = client_timed_out or remote_timed_out
        footer = (
            f"exit_status={exit_status} signal={exit_signal} timed_out={timed_out} "
            f"duration_s={elapsed:.3f}"
        )
        return result(exit_status, exit_signal, timed_out)
    except (asyncio.CancelledError, KeyboardInterrupt):
        footer = "interrupted: TERM sent to the remote process"
        if proc is not None:
            await _terminate(proc, kill_after_s + 1.0)
        await reaper(token)
        raise
    except (ConnectionLostDuringRun, SessionNotOpened):
        raise
    except (asyncssh.DisconnectError, asyncssh.ConnectionLost) as exc:
        footer = f"connection lost: {exc}"
        reaped = await reaper(token)
        raise ConnectionLostDuringRun(result(None, None, False), reaped, token) from exc
    except Exception as exc:  # a sink raised: stop the board side too
        footer = f"aborted by {type(exc).__name__}: TERM sent to the remote process"
        if proc is not None:
            await _terminate(proc, kill_after_s + 1.0)
        await reaper(token)
        raise
    finally:
        log.close(footer)


__all__ = [
    "KILLED_EXIT_STATUS",
    "TIMEOUT_EXIT_STATUS",
    "ConnectionLostDuringRun",
    "LineSink",
    "Reaper",
    "RemoteRunResult",
    "SessionNotOpened",
    "new_run_token",
    "reap_command",
    "run_remote",
    "wrap_command",
]
