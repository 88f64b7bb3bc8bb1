"""Programming a firmware image through a connected GDB remote client, then starting it.

``GdbRemoteClient`` (``flash.gdb_remote``) speaks the protocol; this module decides what to
write where: it splits the image along the server's memory map, erases and writes flash with
``vFlash*`` and RAM with ``M``/``X``, reads everything back, and starts the core. Starting a
Cortex-M by setting SP and PC alone locks it up: xPSR.T must be set too (lab pitfall 2, see
reference/emulation.md section 5b).

A write that does not read back is a ``FlashError`` naming the address range.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from aidge_deploy.errors import FlashError
from aidge_deploy.flash.gdb_remote import GdbRemoteClient, MemoryKind, MemoryRegion
from aidge_deploy.flash.image import FirmwareImage, load_elf, load_image

_log = logging.getLogger(__name__)

_XPSR_THUMB = 1 << 24


class ResetMode(StrEnum):
    """How the target is started after programming."""

    VECTOR = "vector"  # load SP/PC from the image's vector table, set xPSR.T
    MONITOR = "monitor"  # ask the server to reset the core (``monitor <reset_command>``)
    NONE = "none"  # leave the registers alone


class WriteMethod(StrEnum):
    MEMORY = "memory"  # M / X packets
    FLASH = "flash"  # vFlashErase / vFlashWrite / vFlashDone


@dataclass(frozen=True)
class WrittenSegment:
    address: int
    size: int
    method: WriteMethod


@dataclass(frozen=True)
class FlashReport:
    """What one programming run did."""

    image: Path
    segments: tuple[WrittenSegment, ...]
    bytes_written: int
    verified: bool
    reset: ResetMode
    initial_sp: int | None
    entry: int | None
    duration_s: float
    #: the emulator loaded the image itself when it started (QEMU ``-kernel``, from the same
    #: unchanged file): nothing was written, nor read back (``verified`` False)
    preloaded: bool = False


# -- programming --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Part:
    address: int
    data: bytes
    method: WriteMethod
    region: MemoryRegion | None


def program(
    client: GdbRemoteClient,
    image: FirmwareImage,
    *,
    verify: bool = True,
    erase: bool = False,
    reset: ResetMode = ResetMode.VECTOR,
    halt_command: str | None = None,
    reset_command: str = "system_reset",
    detach: bool = True,
) -> FlashReport:
    """Write ``image`` through a connected client, verify it, start it and detach."""
    started = time.monotonic()
    if halt_command:
        client.monitor(halt_command)
    parts = _plan(image, client.memory_map)
    _write(client, parts, erase=erase)
    if verify:
        for part in parts:
            _verify(client, part)
    sp = entry = None
    if reset is ResetMode.VECTOR:
        sp, entry = start_at_vector(client, image)
    elif reset is ResetMode.MONITOR:
        client.monitor(reset_command)
    if detach:
        client.detach()
    return FlashReport(
        image=image.path,
        segments=tuple(WrittenSegment(p.address, len(p.data), p.method) for p in parts),
        bytes_written=sum(len(p.data) for p in parts),
        verified=verify,
        reset=reset,
        initial_sp=sp,
        entry=entry,
        duration_s=time.monotonic() - started,
    )


def start_at_vector(client: GdbRemoteClient, image: FirmwareImage) -> tuple[int, int]:
    """Point the halted core at ``image``'s reset vector: SP and PC from its vector table,
    xPSR.T set; returns (SP, entry)."""
    sp, entry = image.initial_sp_and_entry()
    # A halted-from-reset core with empty memory has EPSR.T = 0; without T the first
    # instruction faults and the core locks up (lab pitfall 2).
    client.write_registers({"sp": sp, "pc": entry & ~1, "xpsr": _XPSR_THUMB})
    return sp, entry


def _write(client: GdbRemoteClient, parts: list[_Part], *, erase: bool) -> None:
    """Erase what flash the parts need (or all of it), write every part, finish flashing."""
    flash_parts = [part for part in parts if part.method is WriteMethod.FLASH]
    if erase:
        for region in client.memory_map:
            if region.kind is MemoryKind.FLASH:
                client.flash_erase(region.start, region.length)
    elif flash_parts:
        for start, end in _erase_ranges(flash_parts):
            client.flash_erase(start, end - start)
    for part in parts:
        _log.debug(
            "writing 0x%08x..0x%08x (%s)", part.address, part.address + len(part.data), part.method
        )
        if part.method is WriteMethod.FLASH:
            client.flash_write(part.address, part.data)
        else:
            client.write_memory(part.address, part.data)
    if flash_parts:
        client.flash_done()


def flash_image(
    host: str,
    port: int,
    image: FirmwareImage,
    *,
    verify: bool = True,
    erase: bool = False,
    reset: ResetMode = ResetMode.VECTOR,
    halt_command: str | None = None,
    reset_command: str = "system_reset",
    timeout: float = 10.0,
) -> FlashReport:
    """Connect to the GDB server at ``host:port``, program ``image``, start it, detach."""
    with GdbRemoteClient(timeout=timeout) as client:
        client.connect(host, port)
        return program(
            client,
            image,
            verify=verify,
            erase=erase,
            reset=reset,
            halt_command=halt_command,
            reset_command=reset_command,
        )


def flash_elf(
    host: str,
    port: int,
    elf_path: Path,
    *,
    verify: bool = True,
    reset: ResetMode | str = ResetMode.VECTOR,
    timeout: float = 10.0,
    erase: bool = False,
    halt_command: str | None = None,
    reset_command: str = "system_reset",
) -> FlashReport:
    """Program an ELF file through the GDB server at ``host:port`` (see ``program``)."""
    return flash_image(
        host,
        port,
        load_elf(Path(elf_path)),
        verify=verify,
        erase=erase,
        reset=ResetMode(reset),
        halt_command=halt_command,
        reset_command=reset_command,
        timeout=timeout,
    )


def flash_file(
    host: str,
    port: int,
    path: Path,
    *,
    load_address: int | None = None,
    verify: bool = True,
    reset: ResetMode | str = ResetMode.VECTOR,
    timeout: float = 10.0,
) -> FlashReport:
    """Program an ELF or a raw ``.bin`` (which needs ``load_address``)."""
    return flash_image(
        host,
        port,
        load_image(Path(path), load_address),
        verify=verify,
        reset=ResetMode(reset),
        timeout=timeout,
    )


def _plan(image: FirmwareImage, memory_map: tuple[MemoryRegion, ...]) -> list[_Part]:
    """Split segments along the server's memory regions and pick the write method of each."""
    if not memory_map:
        return [_Part(s.address, s.data, WriteMethod.MEMORY, None) for s in image.segments]
    parts: list[_Part] = []
    for segment in image.segments:
        at = segment.address
        while at < segment.end:
            region = next((r for r in memory_map if r.start <= at < r.end), None)
            if region is None:
                raise FlashError(
                    f"{image.path}: bytes at 0x{at:08x} (segment 0x{segment.address:08x}.."
                    f"0x{segment.end:08x}) fall outside every memory region the target reports",
                    f"the target's memory map is {_format_map(memory_map)}; fix the linker "
                    "script's MEMORY regions",
                )
            end = min(segment.end, region.end)
            method = WriteMethod.FLASH if region.kind is MemoryKind.FLASH else WriteMethod.MEMORY
            data = segment.data[at - segment.address : end - segment.address]
            parts.append(_Part(at, data, method, region))
            at = end
    return parts


def _erase_ranges(parts: list[_Part]) -> list[tuple[int, int]]:
    """Block-aligned, merged ranges covering every flash part."""
    ranges = []
    for part in parts:
        region = part.region
        block = region.blocksize if region is not None and region.blocksize else 1
        base = region.start if region is not None else 0
        start = base + (part.address - base) // block * block
        end = base + -(-(part.address + len(part.data) - base) // block) * block
        ranges.append((start, end))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _verify(client: GdbRemoteClient, part: _Part) -> None:
    end = part.address + len(part.data)
    try:
        readback = client.read_memory(part.address, len(part.data))
    except FlashError as exc:
        raise FlashError(
            f"verification failed: {exc.message}",
            exc.hint,
        ) from exc
    if readback == part.data:
        return
    first = next(i for i, (a, b) in enumerate(zip(readback, part.data, strict=True)) if a != b)
    mismatches = sum(1 for a, b in zip(readback, part.data, strict=True) if a != b)
    raise FlashError(
        f"verification failed: 0x{part.address + first:08x} reads back "
        f"0x{readback[first]:02x} instead of 0x{part.data[first]:02x} "
        f"({mismatches} of {len(part.data)} bytes differ in 0x{part.address:08x}..0x{end:08x})",
        f"nothing writable is mapped at 0x{part.address:08x}..0x{end:08x} on this target, or "
        "the write did not stick; check the linker script's MEMORY regions against the "
        "board's memory map",
    )


def _format_map(memory_map: tuple[MemoryRegion, ...]) -> str:
    return ", ".join(f"{r.kind} 0x{r.start:08x}..0x{r.end:08x}" for r in memory_map)


__all__ = [
    "FlashReport",
    "ResetMode",
    "WriteMethod",
    "WrittenSegment",
    "flash_elf",
    "flash_file",
    "flash_image",
    "program",
    "start_at_vector",
]
