"""A pure-Python GDB Remote Serial Protocol client: connection, memory, registers, monitor.

The same client talks to an emulated board (QEMU's gdbstub) and a real one (pyOCD,
OpenOCD, J-Link GDB servers): no gdb binary is needed. ``flash.program`` drives it to do what
gdb's ``load`` + ``compare-sections`` + register setup + ``detach`` do. The client itself
avoids the protocol pitfalls found in the lab (see reference/emulation.md section 5b):

* QEMU answers ``P`` with an empty reply until the client has read ``target.xml``, so the
  target description is always read before any register write;
* a client that advertised ``multiprocess+`` must detach with ``D;pid``;
* writes into regions the server's memory map calls *flash* must use
  ``vFlashErase``/``vFlashWrite``/``vFlashDone`` (QEMU reports no map; real servers do), so
  the map is read at connection time.

Failures are typed: an unreachable or silent server is a ``ConnectError``; a write the
target rejects is a ``FlashError`` naming the address range.
"""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType

from aidge_deploy.errors import ConnectError, FlashError
from aidge_deploy.flash.rsp import (
    RspTimeout,
    RspTransport,
    escape_binary,
    hex_decode,
    hex_encode,
    unescape_binary,
)

_log = logging.getLogger(__name__)

#: what we tell the server we understand; ``multiprocess+`` is what gdb sends, and it makes
#: detach need ``D;pid`` (lab pitfall 3), which this client handles
_CLIENT_FEATURES = "multiprocess+;xmlRegisters=arm"
#: packet size assumed when the server does not announce one (gdb's historical default)
_DEFAULT_PACKET_SIZE = 400
#: room kept in every packet for the command, address, length and framing
_HEADER_ROOM = 32
#: ARM register numbers of gdb's classic ARM layout, used when no target.xml is offered
_FALLBACK_REGISTERS = {"sp": (13, 32), "pc": (15, 32), "xpsr": (25, 32)}
_REG_RE = re.compile(r"<reg\b([^>]*)/?>", re.IGNORECASE)
_ATTR_RE = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
# Target descriptions use ``xi:include`` without declaring the namespace prefix, which a
# strict XML parser rejects, so they are scanned with regular expressions instead.
_INCLUDE_RE = re.compile(r'<xi:include\s+href="([^"]+)"', re.IGNORECASE)


class MemoryKind(StrEnum):
    RAM = "ram"
    ROM = "rom"
    FLASH = "flash"


@dataclass(frozen=True)
class MemoryRegion:
    """One entry of the server's ``qXfer:memory-map:read`` answer."""

    kind: MemoryKind
    start: int
    length: int
    blocksize: int | None = None

    @property
    def end(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class RegisterInfo:
    number: int
    bitsize: int


class GdbRemoteClient:
    """A GDB RSP client: connect, read/write memory and registers, flash, monitor, detach."""

    def __init__(self, *, timeout: float = 10.0, pipeline: int = 1) -> None:
        self.timeout = timeout
        #: memory packets sent before their replies are read (1: one at a time, the RSP
        #: default); more for a server known to read its packets in order (QEMU's stub)
        self.pipeline = max(1, pipeline)
        self._transport: RspTransport | None = None
        self._features: dict[str, str] = {}
        self._registers: dict[str, RegisterInfo] = {}
        self._memory_map: tuple[MemoryRegion, ...] = ()
        self._stop_reply = ""
        self._pid = 1
        self._binary_writes: bool | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def connect(
        self, host: str, port: int, timeout: float | None = None, *, describe: bool = True
    ) -> None:
        """Connect and run the handshake: qSupported, ?, target.xml, memory map.

        Without ``describe``, for a QEMU M-profile core the caller knows: ``?`` and the
        first document of the target description in one round trip (QEMU's stub takes
        register writes only from a client that read it), which must name the M profile;
        no features, includes or memory map are read, and registers have the numbers every
        M-profile description gives (sp 13, pc 15, xpsr 25)."""
        if timeout is not None:
            self.timeout = timeout
        self._transport = RspTransport.connect(host, port, self.timeout)
        try:
            if describe:
                self._handshake()
            else:
                self._brief_handshake()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def __enter__(self) -> GdbRemoteClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def features(self) -> Mapping[str, str]:
        """The server's qSupported answer: feature name -> ``+``, ``-``, ``?`` or a value."""
        return dict(self._features)

    @property
    def packet_size(self) -> int:
        value = self._features.get("PacketSize")
        return int(value, 16) if value else _DEFAULT_PACKET_SIZE

    @property
    def registers(self) -> Mapping[str, RegisterInfo]:
        """Register name (lower case) -> number and width, from the target description."""
        return dict(self._registers)

    @property
    def memory_map(self) -> tuple[MemoryRegion, ...]:
        return self._memory_map

    @property
    def stop_reply(self) -> str:
        return self._stop_reply

    # -- generic requests -----------------------------------------------------------------

    def request(self, payload: str | bytes, timeout: float | None = None) -> bytes:
        """Send one packet and return the server's reply payload."""
        data = payload.encode("ascii") if isinstance(payload, str) else payload
        return self._conn().request(data, timeout)

    def _conn(self) -> RspTransport:
        if self._transport is None:
            raise ConnectError("the GDB client is not connected", "call connect() first")
        return self._transport

    def _handshake(self) -> None:
        reply = self.request(f"qSupported:{_CLIENT_FEATURES}").decode("ascii", "replace")
        for item in filter(None, reply.split(";")):
            if "=" in item:
                name, value = item.split("=", 1)
                self._features[name] = value
            elif item[-1] in "+-?":
                self._features[item[:-1]] = item[-1]
        if (
            self._features.get("QStartNoAckMode") == "+"
            and self.request("QStartNoAckMode") == b"OK"
        ):
            self._conn().ack_mode = False
        # "?" and the target description's first document go together when the client may
        # pipeline (one round trip fewer; their answers decide nothing for each other)
        stop, description = self._requests_and_xfers([b"?"], "features", ["target.xml"])
        self._read_stop_reply(stop[0])
        self._registers = self._read_target_description(description[0])
        self._memory_map = self._read_memory_map()
        _log.debug(
            "GDB server %s: packet size %d, %d registers, %d memory regions, stop %s",
            self._conn().peer,
            self.packet_size,
            len(self._registers),
            len(self._memory_map),
            self._stop_reply,
        )

    def _brief_handshake(self) -> None:
        stop, top = self._requests([b"?", self._xfer_packet("features", "target.xml", 0)])
        self._read_stop_reply(stop)
        if top[:1] not in (b"l", b"m") or b"m-profile" not in top:
            raise ConnectError(
                f"the GDB server at {self._conn().peer} does not describe an M-profile core "
                f"({_describe(top[:60])})",
                "connect with the full handshake (describe=True)",
            )

    def _read_stop_reply(self, reply: bytes) -> None:
        self._stop_reply = reply.decode("ascii", "replace")
        self._pid = _pid_from_stop_reply(self._stop_reply)

    def read_xfer(self, obj: str, annex: str) -> bytes | None:
        """Read a whole ``qXfer:<obj>:read:<annex>`` object; ``None`` if unsupported."""
        return self.read_xfers(obj, [annex])[0]

    def read_xfers(self, obj: str, annexes: Sequence[str]) -> list[bytes | None]:
        """Several ``qXfer`` objects; their first chunks in one round trip when the client
        may pipeline."""
        return self._requests_and_xfers([], obj, annexes)[1]

    def _requests_and_xfers(
        self, payloads: Sequence[bytes], obj: str, annexes: Sequence[str]
    ) -> tuple[list[bytes], list[bytes | None]]:
        """The replies of ``payloads``, then the ``qXfer`` objects ``annexes`` (``None``
        each if the server has no such object), the first chunks sent together."""
        supported = self._features.get(f"qXfer:{obj}:read") == "+"
        firsts = [self._xfer_packet(obj, annex, 0) for annex in annexes] if supported else []
        batch = [*payloads, *firsts]
        if self.pipeline > 1:
            replies = self._requests(batch) if batch else []
        else:
            replies = [self._conn().request(packet) for packet in batch]
        own, chunks = replies[: len(payloads)], replies[len(payloads) :]
        if not supported:
            return own, [None] * len(annexes)
        return own, [
            self._xfer_rest(obj, annex, first) for annex, first in zip(annexes, chunks, strict=True)
        ]

    def _xfer_packet(self, obj: str, annex: str, offset: int) -> bytes:
        chunk = self.packet_size - _HEADER_ROOM
        return f"qXfer:{obj}:read:{annex}:{offset:x},{chunk:x}".encode("ascii")

    def _xfer_rest(self, obj: str, annex: str, reply: bytes) -> bytes | None:
        """A ``qXfer`` object from its first reply, reading on while the server says more."""
        data = bytearray()
        while True:
            if not reply or reply.startswith(b"E"):
                return None if not data else bytes(data)
            data.extend(unescape_binary(reply[1:]))
            if reply[:1] == b"l":
                return bytes(data)
            if reply[:1] != b"m":
                raise ConnectError(
                    f"unexpected qXfer reply {reply[:16]!r} from {self._conn().peer}",
                    "the GDB server does not follow the remote protocol; update it",
                )
            reply = self._conn().request(self._xfer_packet(obj, annex, len(data)))

    def _read_target_description(self, top: bytes | None) -> dict[str, RegisterInfo]:
        """Register names and numbers from ``target.xml`` (``top``) and its includes, the
        includes of one document fetched together."""
        registers: dict[str, RegisterInfo] = {}
        seen = {"target.xml"}
        next_number = 0

        def take(document: bytes | None) -> None:
            nonlocal next_number
            if document is None:
                return
            text = document.decode("utf-8", "replace")
            # Includes are spliced where they appear; registers number on from the last one,
            # so keep the order: this document's registers first, then its includes.
            for match in _REG_RE.finditer(text):
                attrs = dict(_ATTR_RE.findall(match.group(1)))
                number = int(attrs["regnum"], 0) if "regnum" in attrs else next_number
                next_number = number + 1
                name = attrs.get("name", "").lower()
                if name and name not in registers:
                    registers[name] = RegisterInfo(number, int(attrs.get("bitsize", "32")))
            includes = [a for a in dict.fromkeys(_INCLUDE_RE.findall(text)) if a not in seen]
            seen.update(includes)
            for included in self.read_xfers("features", includes) if includes else []:
                take(included)

        take(top)
        return registers

    def _read_memory_map(self) -> tuple[MemoryRegion, ...]:
        document = self.read_xfer("memory-map", "")
        if not document:
            return ()
        try:
            root = ET.fromstring(document.decode("utf-8", "replace"))
        except ET.ParseError as exc:
            raise FlashError(
                f"the GDB server at {self._conn().peer} sent an unreadable memory map: {exc}",
                "update the GDB server",
            ) from exc
        regions = []
        for memory in root.iter("memory"):
            kind = MemoryKind(memory.get("type", "ram").lower())
            blocksize = None
            for prop in memory.iter("property"):
                if prop.get("name") == "blocksize" and prop.text:
                    blocksize = int(prop.text.strip(), 0)
            regions.append(
                MemoryRegion(
                    kind,
                    int(memory.get("start", "0"), 0),
                    int(memory.get("length", "0"), 0),
                    blocksize,
                )
            )
        return tuple(sorted(regions, key=lambda r: r.start))

    # -- memory -------------------------------------------------------------------------------

    def read_memory(self, address: int, length: int) -> bytes:
        """Read ``length`` bytes with ``m`` packets (the server may return short chunks)."""
        data = bytearray()
        chunk = max(1, (self.packet_size - _HEADER_ROOM) // 2)
        while len(data) < length:
            starts = range(address + len(data), address + length, chunk)[: self.pipeline]
            sizes = [min(chunk, address + length - at) for at in starts]
            requests = [
                f"m{at:x},{size:x}".encode("ascii") for at, size in zip(starts, sizes, strict=True)
            ]
            for at, size, reply in zip(starts, sizes, self._requests(requests), strict=True):
                if not reply or reply.startswith(b"E"):
                    raise FlashError(
                        f"the target refused to read 0x{at:08x}..0x{at + size:08x} "
                        f"({_describe(reply)})",
                        f"no readable memory at 0x{at:08x}..0x{at + size:08x}; "
                        "check the linker script's regions against the board's memory map",
                    )
                data.extend(hex_decode(reply))
                if len(reply) < 2 * size:  # a short chunk: ask again from where it ended
                    break
        return bytes(data[:length])

    def _requests(self, payloads: list[bytes]) -> list[bytes]:
        """The replies of ``payloads``, pipelined when the client is allowed to."""
        if len(payloads) == 1:
            return [self._conn().request(payloads[0])]
        return self._conn().request_pipelined(payloads)

    def write_memory(self, address: int, data: bytes) -> None:
        """Write with ``X`` (binary) when the server takes it, else with hex ``M`` packets."""
        if self._binary_writes is None:
            self._binary_writes = self.request(f"X{address:x},0:") == b"OK"
        offset = 0
        while offset < len(data):
            batch: list[tuple[int, int, bytes]] = []  # (address, bytes used, packet)
            while offset < len(data) and len(batch) < self.pipeline:
                at = address + offset
                if self._binary_writes:
                    payload, used = self._binary_chunk(f"X{at:x},", data[offset:])
                else:
                    used = min(len(data) - offset, (self.packet_size - _HEADER_ROOM) // 2)
                    piece = data[offset : offset + used]
                    payload = f"M{at:x},{used:x}:{hex_encode(piece)}".encode("ascii")
                batch.append((at, used, payload))
                offset += used
            replies = self._requests([payload for _, _, payload in batch])
            for (at, used, _), reply in zip(batch, replies, strict=True):
                if reply != b"OK":
                    raise _write_error(at, used, reply, self._conn().peer)

    def _binary_chunk(self, prefix: str, data: bytes) -> tuple[bytes, int]:
        """Largest ``prefix len:escaped`` packet that fits; returns (payload, bytes used)."""
        budget = self.packet_size - _HEADER_ROOM
        used = 0
        size = 0
        for byte in data:
            cost = 2 if byte in b"$#}*" else 1
            if size + cost > budget:
                break
            size += cost
            used += 1
        body = escape_binary(data[:used])
        if prefix.startswith("X"):
            return f"{prefix}{used:x}:".encode("ascii") + body, used
        return prefix.encode("ascii") + body, used

    # -- flash (vFlash*) ------------------------------------------------------------------

    def flash_erase(self, address: int, length: int) -> None:
        reply = self.request(f"vFlashErase:{address:x},{length:x}", timeout=max(self.timeout, 60.0))
        if reply != b"OK":
            raise FlashError(
                f"erasing flash 0x{address:08x}..0x{address + length:08x} failed ({_describe(reply)})",
                "the flash may be protected (read-out/write protection); unlock it with the "
                "vendor tool, or check the probe connection",
            )

    def flash_write(self, address: int, data: bytes) -> None:
        offset = 0
        while offset < len(data):
            at = address + offset
            payload, used = self._binary_chunk(f"vFlashWrite:{at:x}:", data[offset:])
            reply = self.request(payload, timeout=max(self.timeout, 60.0))
            if reply != b"OK":
                raise _write_error(at, used, reply, self._conn().peer)
            offset += used

    def flash_done(self) -> None:
        reply = self.request("vFlashDone", timeout=max(self.timeout, 120.0))
        if reply != b"OK":
            raise FlashError(
                f"the GDB server could not finish programming flash ({_describe(reply)})",
                "see the GDB server's log; the flash may be protected",
            )

    # -- registers ------------------------------------------------------------------------

    def _register(self, name: str) -> RegisterInfo:
        info = self._registers.get(name.lower())
        if info is None and not self._registers and name.lower() in _FALLBACK_REGISTERS:
            number, bits = _FALLBACK_REGISTERS[name.lower()]
            info = RegisterInfo(number, bits)
        if info is None:
            raise FlashError(
                f"the target description has no register {name!r}",
                "the GDB server does not describe a Cortex-M core; use reset='monitor'",
            )
        return info

    def write_register(self, name: str, value: int) -> None:
        self.write_registers({name: value})

    def write_registers(self, values: Mapping[str, int]) -> None:
        """Write registers in order (``P`` packets, pipelined when the client may)."""
        packets: list[tuple[str, bytes]] = []
        for name, value in values.items():
            info = self._register(name)
            encoded = value.to_bytes(info.bitsize // 8, "little").hex()
            packets.append((name, f"P{info.number:x}={encoded}".encode("ascii")))
        for first in range(0, len(packets), self.pipeline):
            batch = packets[first : first + self.pipeline]
            replies = self._requests([packet for _, packet in batch])
            for (name, _), reply in zip(batch, replies, strict=True):
                if reply != b"OK":
                    raise FlashError(
                        f"writing register {name} failed ({_describe(reply)})",
                        "the server refused the register write; use reset='monitor' instead",
                    )

    def read_register(self, name: str) -> int:
        info = self._register(name)
        reply = self.request(f"p{info.number:x}")
        if not reply or reply.startswith(b"E"):
            raise FlashError(f"reading register {name} failed ({_describe(reply)})", None)
        return int.from_bytes(hex_decode(reply), "little")

    # -- monitor and detach -------------------------------------------------------------------

    def monitor(self, command: str, timeout: float | None = None) -> str:
        """Run a server command (``monitor <command>`` in gdb) and return its console output."""
        conn = self._conn()
        conn.send_packet(b"qRcmd," + hex_encode(command.encode()).encode("ascii"), timeout)
        output = []
        while True:
            reply = conn.receive_packet(timeout)
            if reply.startswith(b"O") and reply != b"OK":
                output.append(hex_decode(reply[1:]).decode("utf-8", "replace"))
                continue
            if reply == b"OK":
                break
            if not reply or reply.startswith(b"E"):
                raise FlashError(
                    f"monitor command {command!r} failed ({_describe(reply)})",
                    "check the command name for this GDB server (QEMU: system_reset; "
                    "OpenOCD/pyOCD: reset halt; J-Link: reset)",
                )
            output.append(hex_decode(reply).decode("utf-8", "replace"))
            break
        return "".join(output)

    def resume(self) -> None:
        """Let the target run, the debugger still attached (``c``): its stop reply — for
        QEMU a semihosting exit's ``W<status>``, sent before QEMU exits — is read with
        ``wait_stop``."""
        self._conn().send_packet(b"c")

    def wait_stop(self, timeout: float) -> str | None:
        """The stop reply after ``resume`` (``W00``: exited with status 0), ``None`` if the
        target is still running after ``timeout`` seconds."""
        try:
            return self._conn().receive_packet(timeout).decode("ascii", "replace")
        except RspTimeout:
            return None

    def detach(self) -> None:
        """Detach; the target resumes running."""
        multiprocess = self._features.get("multiprocess") == "+"
        reply = self.request(f"D;{self._pid:x}" if multiprocess else "D")
        if reply not in (b"OK", b""):
            raise FlashError(
                f"detaching from the GDB server failed ({_describe(reply)})",
                "the target may still be halted; restart the GDB server",
            )


def _write_error(address: int, size: int, reply: bytes, peer: str) -> FlashError:
    end = address + size
    return FlashError(
        f"the target at {peer} rejected the write of 0x{address:08x}..0x{end:08x} ({_describe(reply)})",
        f"no writable memory at 0x{address:08x}..0x{end:08x}; check the linker script's "
        "MEMORY regions against the board's memory map",
    )


def _describe(reply: bytes) -> str:
    if not reply:
        return "empty reply: not supported by the server"
    return f"reply {reply[:32].decode('ascii', 'replace')!r}"


def _pid_from_stop_reply(reply: str) -> int:
    """The process id in ``T05thread:p<pid>.<tid>;`` (1 if the server does not say)."""
    match = re.search(r"thread:p([0-9a-fA-F]+)\.", reply)
    return int(match.group(1), 16) if match else 1


__all__ = [
    "GdbRemoteClient",
    "MemoryKind",
    "MemoryRegion",
    "RegisterInfo",
]
