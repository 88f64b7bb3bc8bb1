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

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from elftools.elf.segments import Segment

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
_PT_LOAD = "PT_LOAD"


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
        with path.open("rb") as handle:
            elf = ELFFile(handle)
            loads = [seg for seg in elf.iter_segments() if seg["p_type"] == _PT_LOAD]
            segments = tuple(
                LoadSegment(seg["p_paddr"], seg.data()[: seg["p_filesz"]])
                for seg in sorted(loads, key=lambda s: s["p_paddr"])
                if seg["p_filesz"] > 0
            )
            vector_vma = _find_vector_vma(elf)
            vector_table = _vma_to_lma(vector_vma, loads) if vector_vma is not None else None
    except FileNotFoundError as exc:
        raise FlashError(f"firmware image {path} does not exist", "build it first") from exc
    except (ELFError, OSError, struct.error) as exc:
        raise FlashError(
            f"cannot read {path} as an ELF file: {exc}",
            "pass the linked .elf the toolchain produced (raw .bin images need a load address)",
        ) from exc
    if not segments:
        raise FlashError(f"{path} has no loadable segment", "check the linker script")
    if vector_table is None:
        vector_table = segments[0].address
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
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise FlashError(f"cannot read firmware image {path}: {exc}", "build it first") from exc
    if magic == b"\x7fELF":
        return load_elf(path)
    if load_address is None:
        raise FlashError(
            f"{path} is not an ELF file and no load address was given",
            "pass the flash address of the raw image (e.g. 0x08000000 on STM32)",
        )
    return load_binary(path, load_address)


def _find_vector_vma(elf: ELFFile) -> int | None:
    for name in _VECTOR_SECTIONS:
        section = elf.get_section_by_name(name)
        if section is not None and section["sh_size"] >= 8:
            return int(section["sh_addr"])
    symtab = elf.get_section_by_name(".symtab")
    if isinstance(symtab, SymbolTableSection):
        for name in _VECTOR_SYMBOLS:
            symbols = symtab.get_symbol_by_name(name)
            if symbols:
                return int(symbols[0]["st_value"])
    return None


def _vma_to_lma(vma: int, loads: list[Segment]) -> int:
    """Translate a run-time address into the load address the debugger writes."""
    for seg in loads:
        if seg["p_vaddr"] <= vma < seg["p_vaddr"] + max(seg["p_memsz"], 1):
            return int(seg["p_paddr"] + (vma - seg["p_vaddr"]))
    return vma
