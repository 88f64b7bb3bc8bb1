"""UART capture for boards and emulated boards, through pyserial's ``serial_for_url``.

One code path reads a real board (``/dev/ttyACM0``), a pty and QEMU's TCP serial
(``socket://127.0.0.1:PORT``). Reading follows the lab's findings (reference/emulation.md
section 4): pyserial's ``read(n > 1)`` *discards* bytes it already received when the peer
closes (QEMU exiting right after ``END DEMO``), so we read ``read(1)`` and then
``read(in_waiting)``, keep the unterminated tail, and treat a disconnect as end of stream.
Lines may end in ``\\r\\n`` or ``\\n\\r``; ``\\r`` is stripped from both ends.

A capture stops on the first line containing any end marker (the CLI spells several as
``END DEMO|BENCHMARK_DONE``), on end of stream, on a wall-clock deadline or after a period
without output. Every received byte is appended to the caller's log file *as it arrives*,
so the evidence is on disk whatever happens next (timeout, exception, Ctrl-C).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import socket
import struct
import termios
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import serial
from serial import SerialBase, SerialException
from serial.urlhandler.protocol_socket import Serial as SocketSerial

from aidge_deploy.errors import CaptureError, ConnectError

_log = logging.getLogger(__name__)

#: how long one blocking ``read(1)`` may wait, i.e. the granularity of deadline checks
POLL_INTERVAL_S = 0.05
#: how long a line still arriving is left to gather before the reader looks again: an
#: emulated UART sends each byte as the firmware writes it, and reading each as it came
#: cost a benchmark run on QEMU ~600 reads (~3 ms of CPU beside the emulator); a line is
#: late by at most this much
GATHER_S = 0.001


class CaptureOutcome(StrEnum):
    """Why a capture stopped."""

    END = "end"  # a line contained an end marker
    EXITED = "exited"  # the stream closed (QEMU exited, device unplugged)
    TIMEOUT = "timeout"  # wall-clock deadline or inactivity timeout


@dataclass(frozen=True)
class CaptureResult:
    """What a capture received and why it stopped."""

    #: the received lines joined with ``\\n`` (``\\r`` stripped), unterminated tail included
    text: str
    #: every byte received, exactly as it arrived (also written to ``log_path``)
    raw: bytes
    outcome: CaptureOutcome
    matched_marker: str | None
    duration_s: float
    log_path: Path
    #: human-readable cause, e.g. "no output for 5 s" or "socket disconnected"
    reason: str


def parse_end_markers(spec: str | Sequence[str]) -> tuple[str, ...]:
    """``"END DEMO|BENCHMARK_DONE"`` -> ``("END DEMO", "BENCHMARK_DONE")``; empties dropped."""
    items = spec.split("|") if isinstance(spec, str) else list(spec)
    return tuple(item.strip() for item in items if item.strip())


def open_serial(url: str, *, baudrate: int = 115200, timeout_s: float = 5.0) -> SerialBase:
    """Open ``socket://host:port``, ``/dev/tty*`` or any pyserial URL for reading.

    ``timeout_s`` bounds how long a TCP connection attempt may take; reads poll every
    ``POLL_INTERVAL_S``.
    """
    started = time.monotonic()
    try:
        port = serial.serial_for_url(
            url, baudrate=baudrate, timeout=POLL_INTERVAL_S, do_not_open=True
        )
        port.write_timeout = timeout_s
        if isinstance(port, SocketSerial):
            # pyserial's socket open() ends with reset_input_buffer(), which *discards*
            # whatever the peer sent right after the connect (a running emulator's first
            # lines). Nothing is stale on a fresh TCP connection, so skip that flush.
            port.reset_input_buffer = lambda: None
            try:
                port.open()
            finally:
                del port.reset_input_buffer
        else:
            port.open()
    except (SerialException, OSError, ValueError) as exc:
        raise ConnectError(
            f"cannot open serial port {url}: {exc}",
            "check the port name (ls /dev/ttyACM* /dev/ttyUSB*), that no other program holds it, "
            "and that your user is in the 'dialout' group",
        ) from exc
    _log.debug("opened %s in %.3f s", url, time.monotonic() - started)
    return port


def _bytes_waiting(port: SerialBase) -> int:
    """How many bytes a read can take at once without waiting.

    pyserial's socket ports answer ``in_waiting`` with 0 or 1 (readable or not), which made
    the reader take an emulated UART's output one byte per call; the socket's own count
    (``FIONREAD``) is asked instead. A closed peer reads as 0 bytes there but as readable
    to ``in_waiting``, which is then what answers, so ``read(1)`` still sees the end.
    """
    sock = getattr(port, "_socket", None) if isinstance(port, SocketSerial) else None
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            (count,) = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))
            if count > 0:
                return int(count)
    return int(port.in_waiting)


def close_serial(port: SerialBase) -> None:
    """Close a port; ``socket://`` ports without pyserial's fixed 0.3 s sleep.

    pyserial's socket handler sleeps 0.3 s in ``close()`` "in case of quick reconnects",
    which would triple the cost of an emulated run. Its socket is closed directly instead
    (``_socket`` is stable across pyserial 3.x, which pyproject pins).
    """
    sock = getattr(port, "_socket", None) if isinstance(port, SocketSerial) else None
    try:
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            port._socket = None
            port.is_open = False
        else:
            port.close()
    except (SerialException, OSError) as exc:
        _log.debug("closing %s: %s", port.name, exc)


class SerialChannel:
    """A line channel over a serial port that logs every received byte as it goes.

    Implements ``aidge_deploy.protocols.base.Channel`` for interactive protocol drivers and
    ``capture()`` for plain runs; both share one buffer, so a capture that follows an
    interactive session continues where the driver stopped reading.
    """

    def __init__(
        self,
        port: SerialBase,
        log_path: Path,
        *,
        owns_port: bool = False,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self._port = port
        self._owns_port = owns_port
        self._on_line = on_line
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file: BinaryIO | None = self.log_path.open("wb")
        self._raw = bytearray()
        self._partial = bytearray()
        self._lines: list[str] = []
        self._unread: deque[str] = deque()
        self._eof_reason: str | None = None
        self._last_rx = time.monotonic()
        # Poll in small steps so deadlines are honoured whatever the caller configured.
        if port.timeout is None or port.timeout > POLL_INTERVAL_S:
            port.timeout = POLL_INTERVAL_S

    @classmethod
    def open(
        cls,
        url: str,
        log_path: Path,
        *,
        baudrate: int = 115200,
        on_line: Callable[[str], None] | None = None,
    ) -> SerialChannel:
        return cls(open_serial(url, baudrate=baudrate), log_path, owns_port=True, on_line=on_line)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._owns_port:
            close_serial(self._port)

    def __enter__(self) -> SerialChannel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def at_eof(self) -> bool:
        return self._eof_reason is not None

    # -- Channel protocol -----------------------------------------------------------------

    def write(self, data: bytes) -> None:
        try:
            self._port.write(data)
            self._port.flush()
        except (SerialException, OSError) as exc:
            raise CaptureError(
                f"writing to the serial port failed: {exc}",
                "the board or QEMU went away; see the log",
                log_path=self.log_path,
            ) from exc

    def read_line(self, timeout: float) -> str | None:
        """The next line (``\\r`` stripped); ``None`` at end of stream; ``CaptureError`` on timeout."""
        deadline = time.monotonic() + timeout
        while not self._unread:
            if self.at_eof:
                if self._partial:
                    self._complete_tail()
                    continue
                return None
            if time.monotonic() >= deadline:
                raise CaptureError(
                    f"no complete line from the serial port within {timeout:g} s",
                    "the program is stuck or waiting for input; see the captured log",
                    log_path=self.log_path,
                )
            self._pump()
        return self._unread.popleft()

    def transcript(self) -> str:
        return self._raw.decode("utf-8", "replace")

    # -- capture ------------------------------------------------------------------------------

    @property
    def raw(self) -> bytes:
        return bytes(self._raw)

    def text(self) -> str:
        """All complete lines plus the unterminated tail, ``\\n``-joined."""
        tail = self._decode(self._partial)
        return "\n".join([*self._lines, tail] if tail else self._lines)

    def capture(
        self,
        *,
        end_markers: Sequence[str] | str,
        timeout_s: float,
        inactivity_timeout_s: float | None = None,
        linger_s: float = 0.0,
    ) -> CaptureResult:
        """Read until an end marker, end of stream, the deadline or inactivity.

        Lines already received (also those an interactive driver consumed) count: if one
        holds a marker the capture ends at once. After a marker, reading goes on for up to
        ``linger_s`` (or until end of stream) so a trailing banner or exit is not lost.
        """
        markers = parse_end_markers(end_markers)
        started = time.monotonic()
        deadline = started + timeout_s
        self._last_rx = started
        self._unread.clear()  # the capture consumes everything; history stays in _lines
        outcome: CaptureOutcome | None = None
        matched = next((m for line in self._lines for m in markers if m in line), None)
        reason = ""
        if matched is not None:
            outcome, reason = CaptureOutcome.END, f"end marker {matched!r}"
        while outcome is None:
            checked = len(self._lines)
            self._pump()
            matched = next(
                (m for line in self._lines[checked:] for m in markers if m in line), None
            )
            now = time.monotonic()
            if matched is not None:
                outcome, reason = CaptureOutcome.END, f"end marker {matched!r}"
            elif self.at_eof:
                outcome, reason = CaptureOutcome.EXITED, f"stream closed ({self._eof_reason})"
            elif now >= deadline:
                outcome, reason = CaptureOutcome.TIMEOUT, f"deadline of {timeout_s:g} s reached"
            elif inactivity_timeout_s is not None and now - self._last_rx >= inactivity_timeout_s:
                outcome = CaptureOutcome.TIMEOUT
                reason = f"no output for {inactivity_timeout_s:g} s"
        if outcome is not CaptureOutcome.END:
            # A marker printed without a line terminator still ends the program's output.
            tail = self._decode(self._partial)
            tail_marker = next((m for m in markers if m in tail), None)
            if tail_marker is not None:
                matched, reason = tail_marker, f"end marker {tail_marker!r} (unterminated)"
                outcome = CaptureOutcome.END
        elif linger_s > 0:
            linger_end = time.monotonic() + linger_s
            while not self.at_eof and time.monotonic() < linger_end:
                self._pump()
        self._unread.clear()
        result = CaptureResult(
            text=self.text(),
            raw=self.raw,
            outcome=outcome,
            matched_marker=matched,
            duration_s=time.monotonic() - started,
            log_path=self.log_path,
            reason=reason,
        )
        _log.debug("capture ended: %s (%s) after %.3f s", outcome, reason, result.duration_s)
        return result

    def drain(self, result: CaptureResult) -> CaptureResult:
        """``result`` with what has arrived since, read without waiting: the output a
        program wrote before it was seen to exit (its bytes are already here)."""
        before = len(self._raw)
        try:
            while not self.at_eof and (waiting := _bytes_waiting(self._port)):
                chunk = self._port.read(waiting)
                if not chunk:
                    break
                self._receive(chunk)
        except (SerialException, OSError) as exc:
            self._eof_reason = str(exc) or type(exc).__name__
        self._unread.clear()
        if len(self._raw) == before:
            return result
        return dataclasses.replace(result, text=self.text(), raw=self.raw)

    # -- reading ------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Wait up to one poll interval for data and take in everything available."""
        if self.at_eof:
            return
        # A chatty peer must not keep us here past the caller's deadline.
        budget_end = time.monotonic() + POLL_INTERVAL_S
        try:
            chunk = self._port.read(1)
            # read(1) then read(in_waiting): never ask for more than is there, because
            # pyserial drops a partially filled read(n) when the peer disconnects. Each
            # piece is taken in at once so a disconnect cannot lose what came before it.
            while chunk:
                self._receive(chunk)
                if time.monotonic() >= budget_end:
                    break
                waiting = _bytes_waiting(self._port)
                if not waiting and self._partial:  # the rest of the line is on its way
                    time.sleep(GATHER_S)
                    waiting = _bytes_waiting(self._port)
                chunk = self._port.read(waiting) if waiting else b""
        except (SerialException, OSError) as exc:
            self._eof_reason = str(exc) or type(exc).__name__

    def _receive(self, chunk: bytes) -> None:
        self._last_rx = time.monotonic()
        self._raw.extend(chunk)
        if self._log_file is not None:
            self._log_file.write(chunk)
            self._log_file.flush()
        self._partial.extend(chunk)
        while (newline := self._partial.find(b"\n")) >= 0:
            line = self._decode(self._partial[:newline])
            del self._partial[: newline + 1]
            self._add_line(line)

    def _complete_tail(self) -> None:
        line = self._decode(self._partial)
        self._partial.clear()
        if line:
            self._add_line(line)

    def _add_line(self, line: str) -> None:
        self._lines.append(line)
        self._unread.append(line)
        if self._on_line is not None:
            self._on_line(line)

    @staticmethod
    def _decode(data: bytes | bytearray) -> str:
        return bytes(data).decode("utf-8", "replace").strip("\r")


def capture(
    port: SerialBase | str,
    *,
    end_markers: Sequence[str] | str,
    timeout_s: float,
    log_path: Path,
    inactivity_timeout_s: float | None = None,
    baudrate: int = 115200,
    linger_s: float = 0.0,
) -> CaptureResult:
    """Capture a UART (an open port, or a URL/device path to open) into ``log_path``.

    Returns the result whatever the outcome; turning ``TIMEOUT`` into an error (with the
    log path) is the caller's decision.
    """
    if isinstance(port, str):
        channel = SerialChannel.open(port, log_path, baudrate=baudrate)
    else:
        channel = SerialChannel(port, log_path)
    with channel:
        return channel.capture(
            end_markers=end_markers,
            timeout_s=timeout_s,
            inactivity_timeout_s=inactivity_timeout_s,
            linger_s=linger_s,
        )


__all__ = [
    "POLL_INTERVAL_S",
    "CaptureOutcome",
    "CaptureResult",
    "SerialChannel",
    "capture",
    "close_serial",
    "open_serial",
    "parse_end_markers",
]
