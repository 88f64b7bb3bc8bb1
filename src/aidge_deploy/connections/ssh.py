"""SSH connection to a Linux board (Raspberry Pi, Jetson, ...): run, upload, download.

Why this module exists: it is the one object the SBC deploy targets talk to. It is built on
asyncssh (fast, real ssh_config support, SSH signals, concurrent streams) and offers
``AsyncSshConnection`` for async callers and ``SshConnection``, a small synchronous facade for
the synchronous deploy pipeline. Policy lives here: connecting and idempotent reads (download,
home) are retried after a reconnect, a command run is never retried, and every failure becomes
a typed error (``ConnectError``, ``TransferError``, ``ExecutionError``) saying what was being
done, where the partial log is, and what to check. The pieces live in ``ssh_settings``
(what to connect to), ``ssh_connect`` (connect + host keys + auth), ``ssh_exec`` (one remote
command) and ``ssh_transfer`` (SFTP).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import asyncssh

from aidge_deploy import runcontrol
from aidge_deploy.connections.ssh_connect import open_connection
from aidge_deploy.connections.ssh_exec import (
    ConnectionLostDuringRun,
    LineSink,
    RemoteRunResult,
    SessionNotOpened,
    reap_command,
    run_remote,
)
from aidge_deploy.connections.ssh_settings import SshSettings
from aidge_deploy.connections.ssh_transfer import (
    DEFAULT_EXCLUDE,
    FileSentCallback,
    TransferConnectionLost,
    TransferReport,
    download,
    remove_tree,
    transfer_error,
    upload_dir,
)
from aidge_deploy.errors import ConnectError, ExecutionError

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
_REAP_TIMEOUT_S = 10.0
# How sh/bash/busybox report that the `timeout` wrapper itself is missing on the board.
_MISSING_TIMEOUT = re.compile(
    r"\btimeout['‘’\"]?: (?:(?:command )?not found|No such file or directory)"
)


class AsyncSshConnection:
    """One SSH connection to a board (asyncio API). Reconnects lazily after a drop."""

    def __init__(self, settings: SshSettings) -> None:
        self.settings = settings
        self._conn: asyncssh.SSHClientConnection | None = None
        self._active: set[asyncssh.SSHClientProcess[Any]] = set()

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"AsyncSshConnection({self.target}, {state})"

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    @property
    def target(self) -> str:
        """``user@host:port`` as resolved by the live connection (settings before that)."""
        if self._conn is None:
            return self.settings.label
        user = self._conn.get_extra_info("username") or self.settings.user or "?"
        peer = self._conn.get_extra_info("peername") or (self.settings.host, self.settings.port)
        address = f"{user}@{peer[0]}:{peer[1]}"
        return f"{self.settings.name} ({address})" if self.settings.name else address

    async def connect(self) -> None:
        """Open the connection if it is not open (idempotent)."""
        if not self.connected:
            self._conn = await open_connection(self.settings)
            _log.info("Connected to %s", self.target)

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.wait_closed(), timeout=5.0)
            self._conn = None

    async def _live(self) -> asyncssh.SSHClientConnection:
        if self._conn is not None:
            # Between synchronous calls the loop is idle: let it notice a peer that hung up.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        await self.connect()
        if self._conn is None:  # connect() either sets it or raises
            raise ConnectError(f"Not connected to {self.target}", stage="connect")
        return self._conn

    def _forget_if_gone(self, conn: asyncssh.SSHClientConnection, exc: object) -> bool:
        """True (and the connection dropped, so the next use reconnects) if ``conn`` is dead.

        A channel open on a connection whose transport just went away fails with
        ``ChannelOpenError("SSH connection closed")`` before ``is_closed()`` turns true.
        """
        gone = conn.is_closed() or isinstance(exc, asyncssh.DisconnectError)
        if isinstance(exc, asyncssh.ChannelOpenError):
            gone = gone or (
                exc.code == asyncssh.OPEN_CONNECT_FAILED and "connection closed" in exc.reason
            )
        if gone and self._conn is conn:
            conn.abort()
            self._conn = None
        return gone

    async def _reap(self, token: str) -> bool:
        """Kill leftovers of a run (by token), reconnecting once if needed."""
        try:
            async with asyncio.timeout(_REAP_TIMEOUT_S + self.settings.connect_timeout_s):
                conn = await self._live()  # reconnects after a drop
                await conn.run(reap_command(token), check=False)
            return True
        except (asyncssh.Error, OSError, TimeoutError, ConnectError) as exc:
            _log.warning("Could not stop remote processes of %s on %s: %s", token, self.target, exc)
            return False

    async def run(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        stdout_sink: LineSink | None = None,
        stderr_sink: LineSink | None = None,
        log_path: Path | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RemoteRunResult:
        """Run ``command`` (a shell line) on the board; never retried.

        A non-zero exit or a timeout is a *result* (see ``RemoteRunResult.timed_out``); a lost
        connection or an unopenable session raises ``ExecutionError`` with the partial log.
        """
        limit = timeout_s if timeout_s is not None else self.settings.command_timeout_s
        what = f"running `{command}` on {self.target}"
        try:
            for attempt in (1, 2):
                conn = await self._live()
                try:
                    result = await run_remote(
                        conn,
                        command,
                        target=self.target,
                        timeout_s=limit,
                        kill_after_s=self.settings.kill_after_s,
                        reaper=self._reap,
                        stdout_sink=stdout_sink,
                        stderr_sink=stderr_sink,
                        log_path=log_path,
                        cwd=cwd,
                        env=env,
                    )
                    break
                except SessionNotOpened as not_opened:
                    # The command never started, so this one retry is safe: the connection
                    # died while idle (board rebooted, NAT timeout) and is reopened.
                    if attempt == 2 or not self._forget_if_gone(conn, not_opened.__cause__):
                        raise
                    _log.info("Connection to %s was lost while idle; reconnecting", self.target)
        except ConnectionLostDuringRun as lost:
            leftovers = (
                "its remote processes were stopped after reconnecting"
                if lost.reaped
                else f"its remote processes could not be stopped and end at the remote "
                f"timeout ({limit:g} s); check with `pgrep -af {lost.token}` on the board"
            )
            raise ExecutionError(
                f"Connection lost after {lost.partial.duration_s:.1f} s while {what}; {leftovers}",
                "Check the board's power and network (a reboot or an out-of-memory kill of "
                "sshd also drops the session); the output received so far is in the log.",
                log_path=log_path,
                stage="execute",
            ) from None
        except SessionNotOpened as exc:
            raise ExecutionError(
                f"The board refused to open a session while {what}: {exc}",
                "Check MaxSessions in the board's sshd_config and that the account has a "
                "valid shell.",
                log_path=log_path,
                stage="execute",
            ) from None
        if result.exit_status == 127 and _MISSING_TIMEOUT.search(result.stderr):
            raise ExecutionError(
                f"The board has no `timeout` command, needed to bound {what}",
                "Install GNU coreutils on the board (apt-get install coreutils); every remote "
                "command runs under `timeout` so that nothing outlives its time limit.",
                log_path=log_path,
                stage="execute",
            )
        return result

    async def _open_sftp(self, doing: str) -> asyncssh.SFTPClient:
        """Open an SFTP session, reconnecting once if the connection died while idle."""
        for attempt in (1, 2):
            conn = await self._live()
            try:
                return await asyncio.wait_for(
                    conn.start_sftp_client(), timeout=self.settings.connect_timeout_s
                )
            except (asyncssh.Error, OSError, TimeoutError) as exc:
                if attempt == 1 and self._forget_if_gone(conn, exc):
                    _log.info("Connection to %s was lost while idle; reconnecting", self.target)
                    continue
                raise transfer_error(
                    exc, doing=doing, target=self.target, remote="", done="nothing transferred"
                ) from None
        raise ConnectError(f"Cannot open SFTP to {self.target}", stage="transfer")  # unreachable

    async def _sftp_op(self, doing: str, op: Callable[[asyncssh.SFTPClient], Awaitable[_T]]) -> _T:
        sftp = await self._open_sftp(doing)
        try:
            async with asyncio.timeout(self.settings.transfer_timeout_s):
                return await op(sftp)
        except (asyncssh.Error, OSError, TimeoutError) as exc:  # outside the op's own mapping
            raise transfer_error(
                exc, doing=doing, target=self.target, remote="", done="interrupted"
            ) from None
        finally:
            sftp.exit()

    async def _idempotent(
        self, doing: str, op: Callable[[asyncssh.SFTPClient], Awaitable[_T]]
    ) -> _T:
        """An SFTP read that may be repeated: retry after reconnecting on a drop."""
        attempts = self.settings.connect_attempts
        for attempt in range(1, attempts + 1):
            try:
                return await self._sftp_op(doing, op)
            except TransferConnectionLost:
                if attempt == attempts:
                    raise
                _log.info(
                    "Connection lost while %s; reconnecting (%d/%d)", doing, attempt, attempts
                )
                await asyncio.sleep(self.settings.retry_backoff_s * 2 ** (attempt - 1))
        raise ConnectError(f"Gave up {doing}", stage="transfer")  # unreachable: loop raises

    async def upload_dir(
        self,
        local: Path,
        remote: str,
        *,
        exclude: Sequence[str] = DEFAULT_EXCLUDE,
        on_file: FileSentCallback | None = None,
    ) -> TransferReport:
        """Mirror ``local`` into ``remote``, sending only changed files (not retried)."""
        return await self._sftp_op(
            f"uploading {local} to {remote}",
            lambda sftp: upload_dir(
                sftp, local, remote, target=self.target, exclude=exclude, on_file=on_file
            ),
        )

    async def download(self, remote: str, local: Path) -> TransferReport:
        """Copy a remote file or tree to ``local``; retried after a reconnect."""
        return await self._idempotent(
            f"downloading {remote}",
            lambda sftp: download(sftp, remote, local, target=self.target),
        )

    async def remove_tree(self, remote: str) -> bool:
        """Remove a remote file or tree; ``False`` if absent. Refuses ``/`` and home."""
        return await self._sftp_op(
            f"removing {remote}", lambda sftp: remove_tree(sftp, remote, target=self.target)
        )

    async def home(self) -> str:
        """The board user's home directory (absolute)."""

        async def realpath(sftp: asyncssh.SFTPClient) -> str:
            path = await sftp.realpath(".")
            return path.decode() if isinstance(path, bytes) else str(path)

        return await self._idempotent("reading the home directory", realpath)


class SshConnection:
    """Synchronous facade over ``AsyncSshConnection`` for the deploy pipeline.

    Use as a context manager. It owns a private event loop (``asyncio.Runner``), so it must
    not be used from inside a running event loop (use ``AsyncSshConnection`` there). Ctrl-C
    during ``run`` stops the remote process before ``KeyboardInterrupt`` propagates.
    """

    def __init__(self, settings: SshSettings) -> None:
        self.settings = settings
        self._async = AsyncSshConnection(settings)
        self._runner: asyncio.Runner | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False

    def __repr__(self) -> str:
        state = "connected" if self._async.connected else "not connected"
        return f"SshConnection({self._async.target}, {state})"

    @property
    def target(self) -> str:
        return self._async.target

    @property
    def connected(self) -> bool:
        return self._async.connected

    async def _tracked(self, coro: Coroutine[Any, Any, _T]) -> _T:
        self._task = asyncio.current_task()
        if self._cancel_requested:  # cancelled between scheduling and starting
            coro.close()
            raise asyncio.CancelledError
        return await coro

    def _cancel_task(self) -> None:
        """On the loop's thread: cancel the running call (a cancellation of the run)."""
        self._cancel_requested = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._runner is None:
            self._runner = asyncio.Runner()
        control = runcontrol.current()
        if control is not None and control.cancelled:
            coro.close()
            raise control.interruption()
        loop = self._runner.get_loop()
        self._cancel_requested = False

        # A cancellation from another thread cancels the task on the loop's thread; run_remote
        # answers that by stopping the remote process, as for Ctrl-C.
        def cancel_from_any_thread() -> None:
            loop.call_soon_threadsafe(self._cancel_task)

        key = control.add_cleanup(cancel_from_any_thread) if control is not None else None
        try:
            return self._runner.run(self._tracked(coro))
        except KeyboardInterrupt:
            # asyncio.Runner turns SIGINT into a cancellation of the task, and run_remote
            # answers that by stopping the remote process. If the interrupt was raised some
            # other way (our SIGTERM/SIGHUP handler), the task is still pending: cancel it and
            # let it clean up the same way before propagating.
            task = self._task
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    self._runner.get_loop().run_until_complete(task)
            raise
        except asyncio.CancelledError:
            if control is not None and control.cancelled:
                raise control.interruption() from None
            raise
        finally:
            self._task = None
            if control is not None and key is not None:
                control.forget(key)

    def connect(self) -> Self:
        self._call(self._async.connect())
        return self

    def close(self) -> None:
        if self._runner is None:
            return
        try:
            self._runner.run(self._async.close())
        finally:
            self._runner.close()
            self._runner = None

    def __enter__(self) -> Self:
        try:
            return self.connect()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def run(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        stdout_sink: LineSink | None = None,
        stderr_sink: LineSink | None = None,
        log_path: Path | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RemoteRunResult:
        """See ``AsyncSshConnection.run``."""
        return self._call(
            self._async.run(
                command,
                timeout_s=timeout_s,
                stdout_sink=stdout_sink,
                stderr_sink=stderr_sink,
                log_path=log_path,
                cwd=cwd,
                env=env,
            )
        )

    def upload_dir(
        self,
        local: Path,
        remote: str,
        *,
        exclude: Sequence[str] = DEFAULT_EXCLUDE,
        on_file: FileSentCallback | None = None,
    ) -> TransferReport:
        """See ``AsyncSshConnection.upload_dir``."""
        return self._call(self._async.upload_dir(local, remote, exclude=exclude, on_file=on_file))

    def download(self, remote: str, local: Path) -> TransferReport:
        """See ``AsyncSshConnection.download``."""
        return self._call(self._async.download(remote, local))

    def remove_tree(self, remote: str) -> bool:
        """See ``AsyncSshConnection.remove_tree``."""
        return self._call(self._async.remove_tree(remote))

    def home(self) -> str:
        """See ``AsyncSshConnection.home``."""
        return self._call(self._async.home())


__all__ = [
    "AsyncSshConnection",
    "RemoteRunResult",
    "SshConnection",
    "SshSettings",
    "TransferReport",
]
