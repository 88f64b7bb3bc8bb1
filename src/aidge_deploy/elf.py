"""The one ELF reader: sections, loadable segments and symbols of a built program.

Why this module exists: the memory report (section sizes), the flashers (the bytes a debugger
writes and the vector table) and the emulated PMU (the addresses of ``model_forward`` and the
cycle read) all read the same firmware. They read it here, through pyelftools, into plain
frozen data, so the ELF rules (load vs run addresses, Thumb bits, what counts as code) and
the error for a file that is not an ELF are written once.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_ST_INFO_TYPE
from elftools.elf.sections import SymbolTableSection

ELF_MAGIC = b"\x7fELF"


class ElfReadError(Exception):
    """``path`` is missing, unreadable or not an ELF file; callers turn it into their typed error."""

    def __init__(self, path: Path, reason: str, *, missing: bool = False) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.missing = missing


@dataclass(frozen=True)
class ElfSection:
    name: str
    address: int
    size: int
    #: "text" | "rodata" | "data" | "bss" (allocated), "other" (not loaded: debug info, ...)
    kind: str


@dataclass(frozen=True)
class ElfSegment:
    """One ``PT_LOAD`` segment: run-time (virtual) and load (physical) addresses."""

    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    #: the file bytes (``filesz`` of them), read only when asked for
    data: bytes | None = None

    def load_address_of(self, vaddr: int) -> int | None:
        """The load address of run-time address ``vaddr`` if this segment holds it."""
        if self.vaddr <= vaddr < self.vaddr + max(self.memsz, 1):
            return self.paddr + (vaddr - self.vaddr)
        return None


@dataclass(frozen=True)
class ElfSymbol:
    name: str
    #: the symbol's value; for Thumb functions bit 0 is set (see ``address``)
    value: int
    type: str  # "STT_FUNC", "STT_OBJECT", ...

    @property
    def address(self) -> int:
        """Where the symbol is: a function's value without the Thumb bit."""
        return self.value & ~1 if self.type == "STT_FUNC" else self.value


@dataclass(frozen=True)
class ElfImage:
    """What the readers of a built program need from its ELF."""

    path: Path
    machine: str
    sections: tuple[ElfSection, ...]
    segments: tuple[ElfSegment, ...]
    symbols: tuple[ElfSymbol, ...] = ()

    def section(self, name: str) -> ElfSection | None:
        return next((s for s in self.sections if s.name == name), None)

    def symbol(self, name: str) -> ElfSymbol | None:
        return next((s for s in self.symbols if s.name == name), None)

    def functions(self) -> Iterator[ElfSymbol]:
        """Defined function symbols, in symbol-table order."""
        return (s for s in self.symbols if s.type == "STT_FUNC" and s.value)

    def load_address_of(self, vaddr: int) -> int:
        """The address a debugger writes run-time address ``vaddr`` at (itself if unloaded)."""
        for segment in self.segments:
            lma = segment.load_address_of(vaddr)
            if lma is not None:
                return lma
        return vaddr


def is_elf(path: Path) -> bool:
    """True when ``path`` starts with the ELF magic number (``OSError`` if unreadable)."""
    with path.open("rb") as handle:
        return handle.read(4) == ELF_MAGIC


def _kind(flags: int, sh_type: str) -> str:
    if not flags & SH_FLAGS.SHF_ALLOC:
        return "other"
    if sh_type == "SHT_NOBITS":
        return "bss"
    if flags & SH_FLAGS.SHF_EXECINSTR:
        return "text"
    if flags & SH_FLAGS.SHF_WRITE:
        return "data"
    return "rodata"


#: ``st_info & 0xf`` -> the type name pyelftools gives it
_SYMBOL_TYPES = {value: name for name, value in ENUM_ST_INFO_TYPE.items() if isinstance(value, int)}


def _symbols(elf: ELFFile, table: SymbolTableSection) -> tuple[ElfSymbol, ...]:
    """The named symbols of ``table``, unpacked in bulk.

    pyelftools parses each symbol through its ``construct`` structures, about 100 µs apiece:
    most of the time a deploy spent reading a firmware of a few hundred symbols. The
    section and its string table still come from pyelftools; only the fixed-size entries
    (``Elf32_Sym``/``Elf64_Sym``) are unpacked here, with one struct format.
    """
    endian = "<" if elf.little_endian else ">"
    if elf.elfclass == 32:  # st_name, st_value, st_size, st_info, st_other, st_shndx
        fmt, name_at, value_at, info_at = f"{endian}IIIBBH", 0, 1, 3
    else:  # st_name, st_info, st_other, st_shndx, st_value, st_size
        fmt, name_at, value_at, info_at = f"{endian}IBBHQQ", 0, 4, 1
    size = struct.calcsize(fmt)
    data = table.data()
    strings = elf.get_section(int(table["sh_link"])).data()
    out = []
    for entry in struct.iter_unpack(fmt, data[: len(data) - len(data) % size]):
        start = entry[name_at]
        if not start or start >= len(strings):
            continue
        end = strings.find(b"\0", start)
        name = strings[start : end if end >= 0 else len(strings)].decode("utf-8", "replace")
        kind = _SYMBOL_TYPES.get(entry[info_at] & 0xF, str(entry[info_at] & 0xF))
        out.append(ElfSymbol(name, int(entry[value_at]), kind))
    return tuple(out)


#: the last images read, by file identity (path, inode, mtime, size): one deploy reads its
#: firmware three times (the memory check, the flasher, the emulated PMU's boundaries)
_READ: dict[tuple[str, int, int, int, int], tuple[ElfImage, bool, bool]] = {}
_READ_KEPT = 8


def read_elf(path: Path, *, segment_data: bool = False, symbols: bool = False) -> ElfImage:
    """Read ``path``; ``segment_data`` loads the bytes of each ``PT_LOAD`` segment and
    ``symbols`` the symbol table (both cost time on large host programs, so only on demand).

    An image already read (same file, unchanged: inode, mtime and size) is not parsed again;
    it may then carry more than was asked (segment data, symbols read for another caller).
    Raises ``ElfReadError`` when the file is missing, unreadable or not an ELF.
    """
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise ElfReadError(path, "does not exist", missing=True) from exc
    except OSError as exc:
        raise ElfReadError(path, f"not a readable ELF file ({exc})") from exc
    key = (str(path), st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    kept = _READ.get(key)
    if kept is not None:
        image, has_data, has_symbols = kept
        if (has_data or not segment_data) and (has_symbols or not symbols):
            return image
        segment_data, symbols = segment_data or has_data, symbols or has_symbols
    image = _read_elf(path, segment_data=segment_data, symbols=symbols)
    _READ.pop(key, None)
    _READ[key] = (image, segment_data, symbols)
    while len(_READ) > _READ_KEPT:
        _READ.pop(next(iter(_READ)))
    return image


def _read_elf(path: Path, *, segment_data: bool, symbols: bool) -> ElfImage:
    try:
        with path.open("rb") as handle:
            elf = ELFFile(handle)
            sections = tuple(
                ElfSection(
                    sec.name,
                    int(sec["sh_addr"]),
                    int(sec["sh_size"]),
                    _kind(int(sec["sh_flags"]), sec["sh_type"]),
                )
                for sec in elf.iter_sections()
            )
            segments = tuple(
                ElfSegment(
                    vaddr=int(seg["p_vaddr"]),
                    paddr=int(seg["p_paddr"]),
                    filesz=int(seg["p_filesz"]),
                    memsz=int(seg["p_memsz"]),
                    data=seg.data()[: seg["p_filesz"]] if segment_data else None,
                )
                for seg in elf.iter_segments()
                if seg["p_type"] == "PT_LOAD"
            )
            table = elf.get_section_by_name(".symtab") if symbols else None
            syms = _symbols(elf, table) if isinstance(table, SymbolTableSection) else ()
            machine = str(elf["e_machine"])
    except FileNotFoundError as exc:
        raise ElfReadError(path, "does not exist", missing=True) from exc
    except (ELFError, OSError, struct.error) as exc:
        raise ElfReadError(path, f"not a readable ELF file ({exc})") from exc
    return ElfImage(path, machine, sections, segments, syms)


@dataclass(frozen=True)
class SymbolExtent:
    """Where a data symbol's bytes are, in memory and in the file."""

    name: str
    address: int
    size: int
    section: str
    #: where its bytes start in the file (None: the section has none, e.g. ``.bss``)
    file_offset: int | None
    little_endian: bool


def symbol_extent(path: Path, name: str) -> SymbolExtent | None:
    """The extent of the defined symbol ``name`` of ``path`` (None: no such symbol).

    For the readers that rewrite a built program's data in place (``validate`` feeding each
    input to one build): its section, its size and its file offset. Raises
    ``ElfReadError`` when the file is not a readable ELF.
    """
    try:
        with path.open("rb") as handle:
            elf = ELFFile(handle)
            table = elf.get_section_by_name(".symtab")
            if not isinstance(table, SymbolTableSection):
                return None
            endian = "<" if elf.little_endian else ">"
            if elf.elfclass == 32:  # st_name, st_value, st_size, st_info, st_other, st_shndx
                fmt, at = f"{endian}IIIBBH", (0, 1, 2, 5)
            else:  # st_name, st_info, st_other, st_shndx, st_value, st_size
                fmt, at = f"{endian}IBBHQQ", (0, 4, 5, 3)
            size = struct.calcsize(fmt)
            data = table.data()
            strings = elf.get_section(int(table["sh_link"])).data()
            wanted = name.encode() + b"\0"
            for entry in struct.iter_unpack(fmt, data[: len(data) - len(data) % size]):
                start, value, length, index = (entry[i] for i in at)
                if not start or strings[start : start + len(wanted)] != wanted:
                    continue
                if index == 0 or index >= elf.num_sections():  # undefined, absolute, common
                    continue
                section = elf.get_section(index)
                offset: int | None = None
                if section["sh_type"] != "SHT_NOBITS":
                    offset = int(section["sh_offset"]) + int(value) - int(section["sh_addr"])
                return SymbolExtent(
                    name, int(value), int(length), section.name, offset, elf.little_endian
                )
    except FileNotFoundError as exc:
        raise ElfReadError(path, "does not exist", missing=True) from exc
    except (ELFError, OSError, struct.error) as exc:
        raise ElfReadError(path, f"not a readable ELF file ({exc})") from exc
    return None


__all__ = [
    "ELF_MAGIC",
    "ElfImage",
    "ElfReadError",
    "ElfSection",
    "ElfSegment",
    "ElfSymbol",
    "SymbolExtent",
    "is_elf",
    "read_elf",
    "symbol_extent",
]
