"""UART capture through pyserial: a loopback TCP peer, a real pty and real QEMU.

The TCP peer is a plain socket server on 127.0.0.1 playing the board's side of
``socket://`` (QEMU's ``-serial tcp``), so timing and disconnects can be scripted; the pty
test uses the kernel's pseudo-terminal, the same driver path as ``/dev/ttyACM0``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aidge_deploy.connections.qemu import QemuMachine
from aidge_deploy.connections.serial_capture import (
    CaptureOutcome,
    SerialChannel,
    capture,
    open_serial,
    parse_end_markers,
)
from aidge_deploy.errors import CaptureError, ConnectError
from aidge_deploy.flash.program import flash_elf
from aidge_deploy.protocols.base import Channel
from testfw import fw, needs_qemu, procs


class Peer:
    """The board side of a socket:// serial port, running ``script(conn)`` in a thread."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self._listener.getsockname()[1]}"
        self.stop = threading.Event()
        self._script = script
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            self._script(conn)

    def close(self) -> None:
        self.stop.set()
        self._listener.close()
        self._thread.join(5)


@pytest.fixture
def peer_factory() -> Iterator[Callable[[Callable[[socket.socket], None]], Peer]]:
    peers: list[Peer] = []

    def make(script: Callable[[socket.socket], None]) -> Peer:
        peers.append(Peer(script))
        return peers[-1]

    yield make
    for peer in peers:
        peer.close()


def test_parse_end_markers() -> None:
    assert parse_end_markers("END DEMO|BENCHMARK_DONE") == ("END DEMO", "BENCHMARK_DONE")
    assert parse_end_markers(" END DEMO ||") == ("END DEMO",)
    assert parse_end_markers(["VALIDATION_DONE"]) == ("VALIDATION_DONE",)


def test_end_marker_line_endings_and_log(peer_factory: Callable[..., Peer], tmp_path: Path) -> None:
    def script(conn: socket.socket) -> None:
        conn.sendall(b"banner\r\nsecond line\n\rthird\n")
        time.sleep(0.05)
        conn.sendall(b"***** BENCHMARK_DONE *****\r\nafter the marker\r\n")
        peer.stop.wait(5)

    peer = peer_factory(script)
    log = tmp_path / "logs" / "uart.log"
    result = capture(peer.url, end_markers="END DEMO|BENCHMARK_DONE", timeout_s=10, log_path=log)
    assert result.outcome is CaptureOutcome.END
    assert result.matched_marker == "BENCHMARK_DONE"
    lines = result.text.splitlines()
    assert lines[:4] == ["banner", "second line", "third", "***** BENCHMARK_DONE *****"]
    assert log.read_bytes() == result.raw
    assert result.raw.startswith(b"banner\r\nsecond line\n\rthird\n")
    assert result.log_path == log


def test_disconnect_right_after_output_loses_nothing(
    peer_factory: Callable[..., Peer], tmp_path: Path
) -> None:
    payload = b"".join(b"line %05d\r\n" % i for i in range(4000)) + b"unterminated tail"

    def script(conn: socket.socket) -> None:
        conn.sendall(payload)  # then close at once, like QEMU after a semihosting exit

    peer = peer_factory(script)
    result = capture(peer.url, end_markers="END DEMO", timeout_s=20, log_path=tmp_path / "u.log")
    assert result.outcome is CaptureOutcome.EXITED
    assert result.raw == payload
    assert result.text.splitlines()[-1] == "unterminated tail"
    assert (tmp_path / "u.log").read_bytes() == payload


def test_output_already_received_is_taken_in_one_read(
    peer_factory: Callable[..., Peer], tmp_path: Path
) -> None:
    """pyserial's socket ports say 0 or 1 byte is waiting; the channel asks the socket how
    many there are, so a burst is one read, not one read a byte (an emulated UART's output
    used to cost ~600 wake-ups a run)."""
    payload = b"".join(b"line %03d\r\n" % i for i in range(100))
    sent = threading.Event()

    def script(conn: socket.socket) -> None:
        conn.sendall(payload + b"END DEMO\r\n")
        sent.set()
        peer.stop.wait(10)

    peer = peer_factory(script)
    port = open_serial(peer.url)
    reads: list[int] = []
    read = port.read

    def counted(size: int = 1) -> bytes:
        reads.append(size)
        return bytes(read(size))

    port.read = counted  # type: ignore[method-assign]
    with SerialChannel(port, tmp_path / "u.log") as channel:
        assert sent.wait(5)
        time.sleep(0.2)  # everything is in the socket's buffer before the first read
        result = channel.capture(end_markers="END DEMO", timeout_s=10)
    assert result.outcome is CaptureOutcome.END
    assert result.raw == payload + b"END DEMO\r\n"
    assert reads == [1, len(result.raw) - 1]


def test_inactivity_timeout_keeps_what_was_received(
    peer_factory: Callable[..., Peer], tmp_path: Path
) -> None:
    def script(conn: socket.socket) -> None:
        conn.sendall(b"started\r\nhalf a li")
        peer.stop.wait(10)

    peer = peer_factory(script)
    log = tmp_path / "uart.log"
    result = capture(
        peer.url, end_markers="END DEMO", timeout_s=10, inactivity_timeout_s=0.3, log_path=log
    )
    assert result.outcome is CaptureOutcome.TIMEOUT
    assert result.reason == "no output for 0.3 s"
    assert 0.3 <= result.duration_s < 5
    assert result.text == "started\nhalf a li"
    assert log.read_bytes() == b"started\r\nhalf a li"


def test_deadline_timeout_with_a_chatty_peer(
    peer_factory: Callable[..., Peer], tmp_path: Path
) -> None:
    def script(conn: socket.socket) -> None:
        while not peer.stop.is_set():
            try:
                conn.sendall(b"tick\r\n")
            except OSError:
                return
            time.sleep(0.01)

    peer = peer_factory(script)
    result = capture(
        peer.url,
        end_markers="END DEMO",
        timeout_s=0.5,
        inactivity_timeout_s=0.3,
        log_path=tmp_path / "u.log",
    )
    assert result.outcome is CaptureOutcome.TIMEOUT
    assert "deadline of 0.5 s" in result.reason
    assert result.text.count("tick") > 5


def test_unterminated_marker_counts_at_end_of_stream(
    peer_factory: Callable[..., Peer], tmp_path: Path
) -> None:
    peer = peer_factory(lambda conn: conn.sendall(b"x\r\nEND DEMO"))
    result = capture(peer.url, end_markers=["END DEMO"], timeout_s=10, log_path=tmp_path / "u.log")
    assert result.outcome is CaptureOutcome.END
    assert result.matched_marker == "END DEMO"


def test_channel_read_line_timeout_and_eof(
    peer_factory: Callable[..., Peer], tmp_path: Path
) -> None:
    release = threading.Event()

    def script(conn: socket.socket) -> None:
        conn.sendall(b"hello\r\n")
        release.wait(10)
        conn.sendall(b"bye\n\rlast")

    peer = peer_factory(script)
    log = tmp_path / "uart.log"
    with SerialChannel.open(peer.url, log) as channel:
        assert isinstance(channel, Channel)
        assert channel.read_line(5) == "hello"
        with pytest.raises(CaptureError) as info:
            channel.read_line(0.2)
        assert info.value.log_path == log
        assert log.read_bytes() == b"hello\r\n"  # on disk before anything else happens
        release.set()
        assert channel.read_line(5) == "bye"
        assert channel.read_line(5) == "last"  # the tail is delivered at end of stream
        assert channel.read_line(5) is None
        assert channel.transcript() == "hello\r\nbye\n\rlast"


def test_pty_device_path(tmp_path: Path) -> None:
    """A real pseudo-terminal: the /dev/tty* code path of pyserial."""
    master, slave = os.openpty()
    try:
        with SerialChannel.open(
            os.ttyname(slave), tmp_path / "pty.log", baudrate=115200
        ) as channel:
            os.write(master, b"from the board\r\nEND")
            assert channel.read_line(5) == "from the board"
            os.write(master, b" DEMO\r\nextra\r\n")
            result = channel.capture(end_markers="END DEMO", timeout_s=5)
            assert result.outcome is CaptureOutcome.END
            channel.write(b"to the board\n")
            assert os.read(master, 100).startswith(b"to the board")
    finally:
        os.close(master)
        os.close(slave)


def test_open_serial_errors_are_connect_errors(tmp_path: Path) -> None:
    with pytest.raises(ConnectError, match="cannot open serial port"):
        open_serial(str(tmp_path / "ttyNOPE"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        with pytest.raises(ConnectError):
            open_serial(f"socket://127.0.0.1:{sock.getsockname()[1]}")


# -- real QEMU ------------------------------------------------------------------------------


@needs_qemu
@pytest.mark.qemu
def test_interactive_echo_over_qemu_uart(
    firmware: Callable[[str, object], Path], tmp_path: Path
) -> None:
    elf = firmware("mps2-an386", fw.Variant.ECHO)
    log = tmp_path / "uart.log"
    with QemuMachine("mps2-an386", tmp_path) as qemu, SerialChannel(qemu.serial, log) as channel:
        flash_elf("127.0.0.1", qemu.gdb_port, elf)
        seen = []
        while (line := channel.read_line(10)) != "READY":
            assert line is not None
            seen.append(line)
        assert seen[0] == "BOOT aidge-deploy test firmware"
        for text in ("one", "two three"):
            channel.write(text.encode() + b"\n")
            assert channel.read_line(10) == f"ECHO {text}"
        channel.write(b"quit\r\n")
        result = channel.capture(end_markers="END DEMO", timeout_s=10, linger_s=2)
        assert result.outcome is CaptureOutcome.END
        assert qemu.wait(5) == 0
    assert b"ECHO two three\r\n" in log.read_bytes()
    assert log.read_bytes() == result.raw
    assert procs.qemu_pids_mentioning(str(tmp_path)) == []


@needs_qemu
@pytest.mark.qemu
def test_hang_capture_times_out_and_logs(
    firmware: Callable[[str, object], Path], tmp_path: Path
) -> None:
    elf = firmware("netduinoplus2", fw.Variant.HANG)
    log = tmp_path / "uart.log"
    with QemuMachine("netduinoplus2", tmp_path) as qemu:
        flash_elf("127.0.0.1", qemu.gdb_port, elf)
        result = capture(qemu.serial, end_markers="END DEMO", timeout_s=0.7, log_path=log)
    assert result.outcome is CaptureOutcome.TIMEOUT
    assert result.text.splitlines()[-1] == "HANGING"
    assert b"HANGING\r\n" in log.read_bytes()
    assert procs.qemu_pids_mentioning(str(tmp_path)) == []
