"""What a flasher writes: the loadable bytes of a firmware image and where they go.

A debugger "load" writes every ``PT_LOAD`` segment at its *physical* (load) address, so
``.data``'s initial values land in flash next to the code, exactly as ``qemu -kernel`` and
gdb's ``load`` do. Raw ``.bin`` images carry no address and need one from the caller (the
``flash_addr`` capability). The vector table location is found here too, because resetting
a Cortex-M by hand means reading the initial SP and the reset vector from it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.elf import ElfImage, ElfReadError, is_elf, read_elf
from aidge_deploy.errors import FlashError

#: section names toolchains and SDKs give the Cortex-M vector table (CMSIS, Zephyr, TI, ...)
_VECTOR_SECTIONS = (".isr_vector", ".vectors", ".vector_table", ".intvecs", ".exc_vector_table")
#: symbol names of the vector table, tried when no section name matches
_VECTOR_SYMBOLS = (
    "__isr_vector",
    "__Vectors",
    "g_pfnVectors",
    "_vector_table",
    "__vector_table",
    "g_vectors",
    "vector_table",
)


@dataclass(frozen=True)
class LoadSegment:
    """Bytes to write at a physical address."""

    address: int
    data: bytes

    @property
    def end(self) -> int:
        return self.address + len(self.data)


@dataclass(frozen=True)
class FirmwareImage:
    """A firmware image reduced to what a debugger writes."""

    path: Path
    segments: tuple[LoadSegment, ...]
    #: physical address of the vector table, ``None`` if it cannot be located
    vector_table: int | None

    @property
    def size(self) -> int:
        return sum(len(segment.data) for segment in self.segments)

    def read(self, address: int, length: int) -> bytes | None:
        """Image bytes at ``address`` (load address), or ``None`` if not all inside one segment."""
        for segment in self.segments:
            if segment.address <= address and address + length <= segment.end:
                offset = address - segment.address
                return segment.data[offset : offset + length]
        return None

    def initial_sp_and_entry(self) -> tuple[int, int]:
        """Initial SP and reset vector (Thumb bit set) read from the image's vector table."""
        if self.vector_table is None:
            raise FlashError(
                f"cannot locate the vector table of {self.path}",
                "name its section .isr_vector/.vectors, or reset the target with a monitor "
                "command instead of loading SP/PC from the vector table",
            )
        words = self.read(self.vector_table, 8)
        if words is None:
            raise FlashError(
                f"the vector table of {self.path} at 0x{self.vector_table:08x} is not part of "
                "any loadable segment",
                "check the linker script: the vector table must be in a loaded (PROGBITS) section",
            )
        sp, entry = struct.unpack("<II", words)
        if not entry & 1:
            raise FlashError(
                f"the reset vector 0x{entry:08x} of {self.path} lacks the Thumb bit",
                "this is not a Cortex-M image, or the vector table was not found correctly",
            )
        return sp, entry


def load_elf(path: Path) -> FirmwareImage:
    """Read the PT_LOAD segments (physical addresses) and the vector table of an ELF."""
    try:
        elf = read_elf(path, segment_data=True)
        vector_vma = _find_vector_vma(elf)
        if vector_vma is None:
            # no vector-table section: look for its symbol (parsing the symbol table is
            # most of the cost of reading a firmware, so only when a name is needed)
            elf = read_elf(path, segment_data=True, symbols=True)
            vector_vma = _find_vector_vma(elf)
    except ElfReadError as exc:
        if exc.missing:
            raise FlashError(f"firmware image {path} does not exist", "build it first") from exc
        raise FlashError(
            f"cannot read {path} as an ELF file: {exc.reason}",
            "pass the linked .elf the toolchain produced (raw .bin images need a load address)",
        ) from exc
    segments = tuple(
        LoadSegment(seg.paddr, seg.data)
        for seg in sorted(elf.segments, key=lambda s: s.paddr)
        if seg.filesz > 0 and seg.data is not None
    )
    if not segments:
        raise FlashError(f"{path} has no loadable segment", "check the linker script")
    vector_table = (
        elf.load_address_of(vector_vma) if vector_vma is not None else segments[0].address
    )
    return FirmwareImage(path=path, segments=segments, vector_table=vector_table)


def load_binary(path: Path, address: int) -> FirmwareImage:
    """A raw image written at ``address``; its vector table is assumed at its start."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FlashError(f"cannot read firmware image {path}: {exc}", "build it first") from exc
    if not data:
        raise FlashError(f"firmware image {path} is empty", "check the build output")
    return FirmwareImage(path=path, segments=(LoadSegment(address, data),), vector_table=address)


def load_image(path: Path, load_address: int | None = None) -> FirmwareImage:
    """ELF files by their magic number, anything else as raw binary at ``load_address``."""
    try:
        elf = is_elf(path)
    except OSError as exc:
        raise FlashError(f"cannot read firmware image {path}: {exc}", "build it first") from exc
    if elf:
        return load_elf(path)
    if load_address is None:
        raise FlashError(
            f"{path} is not an ELF file and no load address was given",
            "pass the flash address of the raw image (e.g. 0x08000000 on STM32)",
        )
    return load_binary(path, load_address)


def _find_vector_vma(elf: ElfImage) -> int | None:
    for name in _VECTOR_SECTIONS:
        section = elf.section(name)
        if section is not None and section.size >= 8:
            return section.address
    for name in _VECTOR_SYMBOLS:
        symbol = elf.symbol(name)
        if symbol is not None:
            return symbol.value
    return None
