"""The GDB RSP client and flashers: framing units, a fake flash server, and real QEMU.

The QEMU tests are the real thing (QEMU's gdbstub, the test firmware, the UART). QEMU
reports no memory map, so the ``vFlash*`` path is exercised against a small in-process
server that stands in for pyOCD/OpenOCD/J-Link with a probe attached — those cannot run
here without hardware. It is a fake, named as such, and only adds to the QEMU tests.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aidge_deploy.connections.qemu import QemuMachine
from aidge_deploy.connections.serial_capture import CaptureOutcome, SerialChannel
from aidge_deploy.errors import ConfigError, ConnectError, FlashError, PreflightError
from aidge_deploy.flash import rsp
from aidge_deploy.flash.gdb_remote import GdbRemoteClient, MemoryKind
from aidge_deploy.flash.image import FirmwareImage, LoadSegment, load_elf, load_image
from aidge_deploy.flash.program import ResetMode, WriteMethod, flash_elf, flash_file, program
from aidge_deploy.flash.registry import (
    FlasherCaps,
    FlashRequest,
    check_request,
    flasher_names,
    get_flasher,
)
from testfw import Variant, fw, needs_qemu

# -- framing ------------------------------------------------------------------------------------


def test_frame_and_checksum_match_gdb() -> None:
    assert rsp.frame(b"?") == b"$?#3f"  # what gdb sends for the halt reason
    assert rsp.frame(b"OK") == b"$OK#9a"
    assert rsp.checksum(b"") == 0


def test_escape_covers_the_four_special_bytes() -> None:
    assert rsp.escape_binary(b"a$b#c}d*e") == b"a}\x04b}\x03c}\x5dd}\x0ae"


@given(st.binary(max_size=512))
def test_escape_round_trips(data: bytes) -> None:
    escaped = rsp.escape_binary(data)
    assert not set(escaped) & set(b"$#*")
    assert rsp.unescape_binary(escaped) == data
    # RLE expansion must leave escaped binary untouched (no '*' outside escapes)
    assert rsp.decode_rle(escaped) == escaped


def test_run_length_decoding() -> None:
    assert rsp.decode_rle(b"0* ") == b"0000"  # the example of the GDB manual
    assert rsp.decode_rle(b'ab*"c') == b"a" + b"b" * 6 + b"c"  # '"' = 34: 5 more
    assert rsp.decode_rle(b"plain") == b"plain"


# -- a fake flash-capable GDB server (stands in for pyOCD/OpenOCD with a probe) -----------------

FLASH_BASE, FLASH_SIZE, BLOCK = 0x08000000, 0x10000, 0x4000
RAM_BASE, RAM_SIZE = 0x20000000, 0x4000

_MEMORY_MAP = f"""<?xml version="1.0"?>
<!DOCTYPE memory-map PUBLIC "+//IDN gnu.org//DTD GDB Memory Map V1.0//EN"
  "http://sourceware.org/gdb/gdb-memory-map.dtd">
<memory-map>
  <memory type="flash" start="0x{FLASH_BASE:x}" length="0x{FLASH_SIZE:x}">
    <property name="blocksize">0x{BLOCK:x}</property>
  </memory>
  <memory type="ram" start="0x{RAM_BASE:x}" length="0x{RAM_SIZE:x}"/>
</memory-map>"""
# pyOCD-style numbering: xpsr is register 16, not QEMU's 25; the client must read it here.
_TARGET_XML = '<target><architecture>arm</architecture><xi:include href="core.xml"/></target>'
_CORE_XML = (
    '<feature name="org.gnu.gdb.arm.m-profile">'
    + "".join(f'<reg name="r{i}" bitsize="32"/>' for i in range(13))
    + '<reg name="sp" bitsize="32"/><reg name="lr" bitsize="32"/><reg name="pc" bitsize="32"/>'
    + '<reg name="xpsr" bitsize="32" regnum="16"/></feature>'
)


def _rle(text: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(text):
        run = 1
        while i + run < len(text) and text[i + run] == text[i] and run < 90:
            run += 1
        extra = run - 1
        while extra >= 3 and chr(extra + 29) in "#$+-":
            extra -= 1
        if extra >= 3:
            out += bytes([text[i], ord("*"), extra + 29])
            i += extra + 1
        else:
            out.append(text[i])
            i += 1
    return bytes(out)


class FakeFlashServer:
    """Minimal RSP server with a flash region that only accepts vFlash* writes."""

    def __init__(self) -> None:
        self.flash = bytearray(b"\xff" * FLASH_SIZE)
        self.ram = bytearray(RAM_SIZE)
        self.commands: list[str] = []
        self.registers: dict[int, int] = {}
        self.erased: list[tuple[int, int]] = []
        self.ack = True
        self._nak_sent = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._listener.close()
        self._thread.join(5)

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            buffer = b""
            while True:
                while b"#" not in buffer or len(buffer) - buffer.index(b"#") < 3:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                start = buffer.index(b"$")
                end = buffer.index(b"#", start)
                payload, cs = buffer[start + 1 : end], buffer[end + 1 : end + 3]
                buffer = buffer[end + 3 :]
                assert int(cs, 16) == rsp.checksum(payload)
                if self.ack and not self._nak_sent:
                    self._nak_sent = True  # refuse the very first packet once
                    conn.sendall(b"-")
                    continue
                if self.ack:
                    conn.sendall(b"+")
                for reply in self._handle(payload):
                    conn.sendall(rsp.frame(reply))
                    if self.ack:
                        while not buffer.startswith(b"+"):
                            buffer += conn.recv(65536)
                        buffer = buffer[1:]
                if payload == b"QStartNoAckMode":
                    self.ack = False
                if payload.startswith(b"D"):
                    return

    def _memory(self, address: int, length: int) -> tuple[bytearray, int] | None:
        for base, store in ((FLASH_BASE, self.flash), (RAM_BASE, self.ram)):
            if base <= address and address + length <= base + len(store):
                return store, address - base
        return None

    def _handle(self, payload: bytes) -> list[bytes]:
        text = payload.decode("latin-1")
        self.commands.append(text.split(":")[0] if text[:1] in "XMv" else text)
        if text.startswith("qSupported"):
            return [
                b"PacketSize=200;qXfer:memory-map:read+;qXfer:features:read+;"
                b"QStartNoAckMode+;multiprocess+"
            ]
        if text in ("QStartNoAckMode",):
            return [b"OK"]
        if text == "?":
            return [b"T05thread:p2a.1;"]
        if text.startswith("qXfer:"):
            _, obj, _, annex, span = text.split(":")
            offset, length = (int(v, 16) for v in span.split(","))
            docs = {"memory-map": _MEMORY_MAP, "target.xml": _TARGET_XML, "core.xml": _CORE_XML}
            document = docs[obj if obj == "memory-map" else annex].encode()
            piece = document[offset : offset + length]
            more = offset + length < len(document)
            return [(b"m" if more else b"l") + rsp.escape_binary(piece)]
        if text.startswith("m"):
            address, length = (int(v, 16) for v in text[1:].split(","))
            found = self._memory(address, length)
            if found is None:
                return [b"E14"]
            store, offset = found
            return [_rle(store[offset : offset + length].hex().encode())]
        if text.startswith(("M", "X")):
            head, data = payload.split(b":", 1)
            address, length = (int(v, 16) for v in head[1:].decode().split(","))
            raw = bytes.fromhex(data.decode()) if text[0] == "M" else rsp.unescape_binary(data)
            found = self._memory(address, length)
            if found is None or found[0] is self.flash:
                return [b"E01"]  # flash is not writable with plain memory writes
            store, offset = found
            store[offset : offset + length] = raw
            return [b"OK"]
        if text.startswith("vFlashErase:"):
            address, length = (int(v, 16) for v in text.split(":")[1].split(","))
            if (address - FLASH_BASE) % BLOCK or length % BLOCK:
                return [b"E02"]
            self.erased.append((address, length))
            self.flash[address - FLASH_BASE : address - FLASH_BASE + length] = b"\xff" * length
            return [b"OK"]
        if text.startswith("vFlashWrite:"):
            _, address_hex, _ = payload.split(b":", 2)
            data = rsp.unescape_binary(payload.split(b":", 2)[2])
            offset = int(address_hex, 16) - FLASH_BASE
            if any(b != 0xFF for b in self.flash[offset : offset + len(data)]):
                return [b"E03"]  # writing unerased flash
            self.flash[offset : offset + len(data)] = data
            return [b"OK"]
        if text == "vFlashDone":
            return [b"OK"]
        if text.startswith("P"):
            number, value = text[1:].split("=")
            self.registers[int(number, 16)] = int.from_bytes(bytes.fromhex(value), "little")
            return [b"OK"]
        if text.startswith("qRcmd,"):
            command = bytes.fromhex(text[6:]).decode()
            return [b"O" + f"ran {command}\n".encode().hex().encode(), b"OK"]
        if text.startswith("D"):
            return [b"OK"]
        return [b""]


@pytest.fixture
def fake_server() -> Iterator[FakeFlashServer]:
    server = FakeFlashServer()
    yield server
    server.close()


def _image(tmp_path: Path) -> FirmwareImage:
    vectors = (RAM_BASE + RAM_SIZE).to_bytes(4, "little") + (FLASH_BASE + 0x101).to_bytes(
        4, "little"
    )
    code = vectors + bytes(range(256)) * 20 + b"$#}*" * 64  # specials need escaping
    return FirmwareImage(
        path=tmp_path / "fake.elf",
        segments=(LoadSegment(FLASH_BASE, code), LoadSegment(RAM_BASE + 0x100, b"\x24\x23" * 300)),
        vector_table=FLASH_BASE,
    )


def test_fake_server_flash_regions_use_vflash_and_memory_map(
    fake_server: FakeFlashServer, tmp_path: Path
) -> None:
    image = _image(tmp_path)
    with GdbRemoteClient(timeout=5) as client:
        client.connect("127.0.0.1", fake_server.port)
        assert [r.kind for r in client.memory_map] == [MemoryKind.FLASH, MemoryKind.RAM]
        assert client.memory_map[0].blocksize == BLOCK
        assert client.registers["xpsr"].number == 16
        assert client.monitor("reset halt") == "ran reset halt\n"
        report = program(client, image, halt_command="reset halt")
    code, ram = image.segments
    assert fake_server.flash[: len(code.data)] == code.data
    assert fake_server.ram[0x100 : 0x100 + len(ram.data)] == ram.data
    assert fake_server.erased == [(FLASH_BASE, BLOCK)]  # block aligned, only what is needed
    assert [s.method for s in report.segments] == [WriteMethod.FLASH, WriteMethod.MEMORY]
    assert report.verified and report.bytes_written == image.size
    assert fake_server.registers == {13: RAM_BASE + RAM_SIZE, 15: FLASH_BASE + 0x100, 16: 1 << 24}
    assert fake_server.commands[-1] == "D;2a"  # multiprocess detach with the stop reply's pid
    assert "QStartNoAckMode" in fake_server.commands and not fake_server.ack
    assert fake_server.commands.count("vFlashDone") == 1
    assert "X20000100,0" in fake_server.commands  # binary writes probed, then used for RAM


def test_pipelined_memory_requests_keep_their_order(fake_server: FakeFlashServer) -> None:
    """With ``pipeline`` > 1 several memory packets go out before their replies are read
    (one round trip for the lot); the bytes land and read back as one at a time would."""
    payload = bytes((i * 7) & 0xFF for i in range(RAM_SIZE - 0x100))
    with GdbRemoteClient(timeout=5, pipeline=4) as client:
        client.connect("127.0.0.1", fake_server.port)
        client.write_memory(RAM_BASE + 0x100, payload)
        assert client.read_memory(RAM_BASE + 0x100, len(payload)) == payload
        client.write_registers({"sp": RAM_BASE + RAM_SIZE, "pc": FLASH_BASE, "xpsr": 1 << 24})
    assert fake_server.ram[0x100:] == payload
    assert fake_server.registers == {13: RAM_BASE + RAM_SIZE, 15: FLASH_BASE, 16: 1 << 24}
    writes = [c for c in fake_server.commands if c.startswith("X") and not c.endswith(",0")]
    reads = [c for c in fake_server.commands if c.startswith("m")]
    assert len(writes) > 4 and len(reads) > 4  # several batches of up to 4
    addresses = [int(c[1:].split(",")[0], 16) for c in writes]
    assert addresses == sorted(addresses) and addresses[0] == RAM_BASE + 0x100


def test_the_brief_handshake_refuses_a_target_that_is_not_m_profile() -> None:
    """``describe=False`` (QEMU's M-profile boards) sends ``?`` and the first target
    document's request together and numbers registers as an M-profile description does: a
    server whose first document does not say M profile is refused rather than written with
    the wrong register numbers. The server is a fake answering as QEMU's stub does (an ack,
    then the reply, without waiting for the client's ack)."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            buffer = b""
            while len(received) < 2:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buffer += chunk
                while b"$" in buffer and b"#" in buffer[buffer.index(b"$") :]:
                    start = buffer.index(b"$")
                    end = buffer.index(b"#", start)
                    if len(buffer) < end + 3:
                        break
                    payload, buffer = buffer[start + 1 : end], buffer[end + 3 :]
                    received.append(payload)
                    reply = (
                        b"S05"
                        if payload == b"?"
                        else b"l<target><architecture>arm</architecture></target>"
                    )
                    conn.sendall(b"+" + rsp.frame(reply))
            conn.recv(4096)  # the client's acks, then its close

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = GdbRemoteClient(timeout=5, pipeline=4)
    with client, pytest.raises(ConnectError, match="does not describe an M-profile core"):
        client.connect("127.0.0.1", listener.getsockname()[1], describe=False)
    thread.join(5)
    listener.close()
    assert received == [b"?", b"qXfer:features:read:target.xml:0,170"]


def test_fake_server_erase_all_flash(fake_server: FakeFlashServer, tmp_path: Path) -> None:
    with GdbRemoteClient(timeout=5) as client:
        client.connect("127.0.0.1", fake_server.port)
        program(
            client, _image(tmp_path), erase=True, reset=ResetMode.MONITOR, reset_command="reset"
        )
    assert fake_server.erased == [(FLASH_BASE, FLASH_SIZE)]
    assert fake_server.registers == {}
    assert any(c.startswith("qRcmd,") for c in fake_server.commands)


def test_fake_server_segment_outside_memory_map(
    fake_server: FakeFlashServer, tmp_path: Path
) -> None:
    image = FirmwareImage(tmp_path / "x.elf", (LoadSegment(0x30000000, b"\0" * 64),), 0x30000000)
    with GdbRemoteClient(timeout=5) as client:
        client.connect("127.0.0.1", fake_server.port)
        with pytest.raises(FlashError) as info:
            program(client, image)
    assert "0x30000000" in info.value.message
    assert "flash 0x08000000..0x08010000" in (info.value.hint or "")
    assert not any(c.startswith(("M", "X3", "vFlash")) for c in fake_server.commands)


def test_silent_server_times_out_with_connect_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = GdbRemoteClient(timeout=0.3)
        with pytest.raises(ConnectError, match=r"did not answer within 0\.3 s"):
            client.connect("127.0.0.1", port)


def test_nobody_listening_is_a_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(ConnectError, match="cannot connect"):
            GdbRemoteClient(timeout=1).connect("127.0.0.1", port)


# -- registry ---------------------------------------------------------------------------------


def test_registry_lists_builtin_flashers_and_rejects_unknown() -> None:
    assert {"gdb-remote", "pyocd"} <= set(flasher_names())
    with pytest.raises(ConfigError, match="unknown flash method"):
        get_flasher("no-such-flasher")


def test_capabilities_are_enforced(tmp_path: Path) -> None:
    class VerifyOnly:
        name = "verify-only"
        caps = FlasherCaps(verify=True)

    request = FlashRequest(image=tmp_path / "fw.bin", erase=True, load_address=0x0)
    with pytest.raises(ConfigError, match="cannot erase, reset, flash_addr"):
        check_request(VerifyOnly(), request)  # type: ignore[arg-type]


def test_pyocd_preflight_without_a_probe() -> None:
    """No debug probe can exist in this sandbox: pyOCD's real probe scan finds none."""
    flasher = get_flasher("pyocd", target="stm32f405rg")
    assert flasher.caps.erase and flasher.caps.verify
    with pytest.raises(PreflightError, match="no debug probe") as info:
        flasher.preflight()
    assert "pyocd list" in (info.value.hint or "")


# -- real QEMU ------------------------------------------------------------------------------


def _capture_to_end(qemu: QemuMachine, log: Path) -> str:
    with SerialChannel(qemu.serial, log) as channel:
        result = channel.capture(end_markers="END DEMO", timeout_s=20)
    assert result.outcome is CaptureOutcome.END, result.text
    assert f"CHECKSUM 0x{fw.expected_checksum():08x}" in result.text.splitlines()
    return result.text


@needs_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "netduinoplus2"])
def test_flash_elf_verifies_and_runs_on_qemu(
    board: str, firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    elf = firmware(board, Variant.DEMO)
    with QemuMachine(board, run_dir) as qemu:
        report = flash_elf("127.0.0.1", qemu.gdb_port, elf, verify=True, reset="vector", timeout=10)
        _capture_to_end(qemu, run_dir / "uart.log")
        assert qemu.wait(5) == 0
    image = load_elf(elf)
    assert report.verified and report.reset is ResetMode.VECTOR
    assert [(s.address, s.size) for s in report.segments] == [
        (s.address, len(s.data)) for s in image.segments
    ]
    assert report.bytes_written == image.size > 12 * 1024  # several 4 KiB packets
    assert (report.initial_sp, report.entry) == image.initial_sp_and_entry()


@needs_qemu
@pytest.mark.qemu
def test_qemu_client_reads_back_what_it_wrote(run_dir: Path) -> None:
    with QemuMachine("mps2-an386", run_dir) as qemu, qemu.connect_gdb() as client:
        assert client.features["qXfer:features:read"] == "+"
        assert client.memory_map == ()  # QEMU reports none: plain memory writes
        assert {name: client.registers[name].number for name in ("sp", "pc", "xpsr")} == {
            "sp": 13,
            "pc": 15,
            "xpsr": 25,
        }
        assert client.pipeline > 1  # QEMU's stub takes memory packets pipelined
        payload = bytes(range(256)) * 160  # 40 KiB: 20 packets, more than one batch
        client.write_memory(0x20001000, payload)
        assert client.read_memory(0x20001000, len(payload)) == payload
        client.write_register("pc", 0x1234)
        assert client.read_register("pc") == 0x1234
        client.detach()


@needs_qemu
@pytest.mark.qemu
def test_monitor_reset_starts_the_image(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    elf = firmware("netduinoplus2", Variant.DEMO)
    with QemuMachine("netduinoplus2", run_dir) as qemu:
        report = flash_elf("127.0.0.1", qemu.gdb_port, elf, reset=ResetMode.MONITOR)
        assert report.reset is ResetMode.MONITOR and report.entry is None
        _capture_to_end(qemu, run_dir / "uart.log")


@needs_qemu
@pytest.mark.qemu
def test_raw_binary_at_a_load_address(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    elf = firmware("netduinoplus2", Variant.DEMO)
    binary = run_dir / "fw.bin"
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", str(elf), str(binary)], check=True)
    with pytest.raises(FlashError, match="no load address"):
        load_image(binary)
    with QemuMachine("netduinoplus2", run_dir) as qemu:
        flasher = get_flasher("gdb-remote", port=qemu.gdb_port)
        flasher.preflight()
        report = flasher.flash(FlashRequest(image=binary, load_address=0x08000000, timeout_s=10))
        assert report.segments[0].address == 0x08000000
        _capture_to_end(qemu, run_dir / "uart.log")


@needs_qemu
@pytest.mark.qemu
def test_write_outside_any_memory_fails_verification_with_hint(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    elf = firmware("mps2-an386", Variant.OUTSIDE_FLASH)
    assert load_elf(elf).segments[0].address == 0x30000000
    with QemuMachine("mps2-an386", run_dir) as qemu:
        with pytest.raises(FlashError) as info:
            flash_file("127.0.0.1", qemu.gdb_port, elf, timeout=10)
        assert qemu.poll() is None  # the failure is ours to report; QEMU is still fine
    assert "verification failed" in info.value.message
    assert "0x30000000" in info.value.message
    assert "0x30000000..0x300" in (info.value.hint or "")


@needs_qemu
@pytest.mark.qemu
def test_missing_elf_is_a_flash_error(tmp_path: Path) -> None:
    with pytest.raises(FlashError, match="does not exist"):
        flash_elf("127.0.0.1", 1, tmp_path / "missing.elf")
