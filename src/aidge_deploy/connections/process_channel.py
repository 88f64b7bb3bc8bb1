"""A ``Channel`` over a child process's stdin/stdout, for interactive protocol sessions.

Host programs, ``qemu-system-arm -serial stdio`` and test peers all talk through pipes. A
reader thread drains stdout (and stderr, kept apart) as bytes arrive, so ``read_line`` can
wait with a timeout instead of blocking forever on a silent child, and nothing the child
prints is lost from the transcript.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from aidge_deploy.cpupriority import share_priority
from aidge_deploy.errors import CaptureError
from aidge_deploy.runcontrol import register_group

_READ_CHUNK = 65536


class ProcessChannel:
    """Start ``argv`` and expose its stdio as a line channel (implements ``Channel``).

    ``read_line`` returns lines without ``\\n`` and with every ``\\r`` removed; ``None`` once
    the child closed stdout and every line was read; ``CaptureError`` on timeout. The child
    runs in its own process group, so ``close`` stops it and everything it spawned.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.log_path = log_path
        self._cond = threading.Condition()
        self._received = bytearray()  # everything from stdout, for the transcript
        self._consumed = 0  # offset in _received up to which lines were returned
        self._eof = False
        self._stderr = bytearray()
        try:
            self._proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=None if env is None else {**os.environ, **env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise CaptureError(
                f"Cannot start {self.argv[0]}: {exc.strerror}",
                hint="Check that the program exists and is executable.",
                stage="execute",
            ) from exc
        share_priority(self._proc.pid)
        # a cancellation of the run (another thread, a signal) stops the child too
        self._forget_group = register_group(self._proc.pid)
        # both are pipes (PIPE above); fileno() is taken once, the threads own the reads
        out_fd = _fileno(self._proc.stdout)
        err_fd = _fileno(self._proc.stderr)
        self._threads = [
            threading.Thread(target=self._pump_stdout, args=(out_fd,), daemon=True),
            threading.Thread(target=self._pump_stderr, args=(err_fd,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- reader threads ----------------------------------------------------------------------

    def _pump_stdout(self, fd: int) -> None:
        while True:
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError:
                chunk = b""
            with self._cond:
                if not chunk:
                    self._eof = True
                    self._cond.notify_all()
                    return
                self._received.extend(chunk)
                self._cond.notify_all()

    def _pump_stderr(self, fd: int) -> None:
        while True:
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError:
                return
            if not chunk:
                return
            with self._cond:
                self._stderr.extend(chunk)

    # -- Channel -------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        stdin = self._proc.stdin
        if stdin is None:
            raise CaptureError("The program's stdin is closed", stage="execute")
        try:
            stdin.write(data)
            stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise CaptureError(
                f"Cannot write to {self.argv[0]}: it closed its input (exit code "
                f"{self._proc.poll()})",
                hint="The program exited or crashed; read the transcript and its stderr.",
                log_path=self.log_path,
                stage="execute",
            ) from exc

    def read_line(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                end = self._received.find(b"\n", self._consumed)
                if end >= 0:
                    raw = bytes(self._received[self._consumed : end])
                    self._consumed = end + 1
                    return _decode(raw)
                if self._eof:
                    if self._consumed < len(self._received):  # a last line without "\n"
                        raw = bytes(self._received[self._consumed :])
                        self._consumed = len(self._received)
                        return _decode(raw)
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CaptureError(
                        f"No complete line from {self.argv[0]} within {timeout:g} s",
                        hint="The program hangs or waits for input; check the transcript.",
                        log_path=self.log_path,
                        stage="execute",
                    )
                self._cond.wait(remaining)

    def transcript(self) -> str:
        with self._cond:
            return bytes(self._received).decode("utf-8", errors="replace")

    # -- process control -----------------------------------------------------------------------

    def stderr_text(self) -> str:
        with self._cond:
            return bytes(self._stderr).decode("utf-8", errors="replace")

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close_input(self) -> None:
        """Close the child's stdin (it reads end of file)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()

    def wait(self, timeout: float) -> int:
        """Wait for the child to exit; ``CaptureError`` if it is still running after ``timeout``."""
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise CaptureError(
                f"{self.argv[0]} did not exit within {timeout:g} s",
                hint="The program hangs; close() stops it.",
                log_path=self.log_path,
                stage="execute",
            ) from exc
        self._join_readers(timeout=2.0)
        return code

    def close(self, grace_s: float = 2.0) -> int | None:
        """Stop the child (SIGTERM, then SIGKILL after ``grace_s``) and its process group."""
        self.close_input()
        if self._proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self._proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self._proc.wait(grace_s)
        self._forget_group()
        self._join_readers(timeout=grace_s)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.write_bytes(bytes(self._received))
        return self._proc.returncode

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def _join_readers(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def __enter__(self) -> ProcessChannel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _fileno(stream: IO[bytes] | None) -> int:
    if stream is None:
        raise CaptureError("The child process has no pipe to read", stage="execute")
    return stream.fileno()


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").replace("\r", "")


__all__ = ["ProcessChannel"]
