"""Flash and RAM use of a built program, read from its ELF (``aidge_deploy.elf``).

For MCU firmware the numbers are checked against the hardware model's memories before
anything is flashed. Sections are classified by address against the linker's load/run
split (``.data`` costs flash and RAM; ``.bss`` RAM only), so no toolchain ``size`` is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aidge_deploy.elf import ElfReadError, read_elf
from aidge_deploy.errors import MemoryFitError
from aidge_deploy.metrics import Metric, Provenance


@dataclass(frozen=True)
class SectionSize:
    name: str
    address: int
    size: int
    kind: str  # "text" | "rodata" | "data" | "bss" | "other"


@dataclass(frozen=True)
class MemoryCapacity:
    """One memory of the hardware model, as the fit check sees it."""

    name: str
    capacity: int
    role: str  # "flash" | "ram" | "other"


@dataclass(frozen=True)
class BinaryInfo:
    """Sizes of one program and the capacities they are checked against."""

    path: Path
    machine: str
    flash_bytes: int  # what must be stored: sum of PT_LOAD file sizes
    ram_bytes: int  # static RAM: writable allocated sections (data + bss + heap/stack sections)
    text_bytes: int
    data_bytes: int
    bss_bytes: int
    sections: tuple[SectionSize, ...] = ()
    capacities: tuple[MemoryCapacity, ...] = field(default_factory=tuple)

    @property
    def flash_capacity(self) -> int | None:
        caps = [c.capacity for c in self.capacities if c.role == "flash"]
        return sum(caps) if caps else None

    @property
    def ram_capacity(self) -> int | None:
        caps = [c.capacity for c in self.capacities if c.role == "ram"]
        return sum(caps) if caps else None

    def check_fits(self, target: str) -> None:
        """Raise ``MemoryFitError`` when flash or RAM use exceeds the target's capacity."""
        for used, cap, what in (
            (self.flash_bytes, self.flash_capacity, "flash"),
            (self.ram_bytes, self.ram_capacity, "RAM"),
        ):
            if cap is not None and used > cap:
                raise MemoryFitError(
                    f"{self.path.name} needs {used} B of {what} but {target} has {cap} B "
                    f"({used / cap:.0%} of capacity)",
                    hint="Use a smaller model, quantise it (--dtype int8), or pick a board with "
                    "more memory; nothing was flashed.",
                )

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "machine": self.machine,
            "flash_bytes": self.flash_bytes,
            "ram_bytes": self.ram_bytes,
            "text_bytes": self.text_bytes,
            "data_bytes": self.data_bytes,
            "bss_bytes": self.bss_bytes,
            "flash_capacity": self.flash_capacity,
            "ram_capacity": self.ram_capacity,
            "sections": [s.__dict__ for s in self.sections],
        }


#: (figure name, key of ``BinaryInfo.as_dict``, description): flash exists on a
#: microcontroller (its hardware model has a flash capacity); a host or Linux-board program
#: is a file whose loadable bytes are not "flash"
_FIRMWARE_SIZES = (
    ("flash_bytes", "flash_bytes", "flash use of the firmware (loadable bytes of its ELF)"),
    ("ram_bytes", "ram_bytes", "static RAM of the firmware (data + bss of its ELF)"),
)
_PROGRAM_SIZES = (
    ("image_bytes", "flash_bytes", "loadable bytes of the program's ELF"),
    ("static_data_bytes", "ram_bytes", "static data of the program (data + bss)"),
)


def size_metrics(binary: Mapping[str, Any] | None) -> list[Metric]:
    """The sizes of a built program (``BinaryInfo.as_dict``) as static ``Metric`` objects,
    named for what the program is: a firmware's flash and RAM, a program's image and data."""
    if not isinstance(binary, Mapping):
        return []
    names = _FIRMWARE_SIZES if binary.get("flash_capacity") is not None else _PROGRAM_SIZES
    return [
        Metric(name, int(binary[key]), "B", Provenance.STATIC, what)
        for name, key, what in names
        if binary.get(key) is not None
    ]


def sizes_json(binary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``BinaryInfo.as_dict`` as ``--json`` prints it: the sizes under the names of
    ``size_metrics`` (a host program has no "flash"), with the rest of the ELF's facts."""
    if not isinstance(binary, Mapping):
        return None
    renamed = {"flash_bytes", "ram_bytes", "flash_capacity", "ram_capacity"}
    out: dict[str, Any] = {k: v for k, v in binary.items() if k not in renamed}
    out.update({m.name: m.value for m in size_metrics(binary)})
    if binary.get("flash_capacity") is not None:
        out["flash_capacity"] = binary["flash_capacity"]
        out["ram_capacity"] = binary.get("ram_capacity")
    out["provenance"] = Provenance.STATIC.value
    return out


def memory_capacities(hardware_target: Any) -> tuple[MemoryCapacity, ...]:
    """Flash/RAM capacities from the ``aidge_core.hw_model`` device (microcontrollers only)."""
    if hardware_target is None:
        return ()
    try:
        memories = dict(getattr(hardware_target, "memories", {}) or {})
    except Exception:
        return ()
    is_mcu = getattr(hardware_target, "hal_board", None) is not None or (
        str(getattr(getattr(hardware_target, "build_system", ""), "value", "")).lower() == "make"
    )
    if not is_mcu:
        return ()
    out = []
    for name, mem in memories.items():
        capacity = int(getattr(mem, "capacity", 0) or 0)
        lname = name.lower()
        role = "flash" if ("flash" in lname or "mram" in lname or "rom" in lname) else "ram"
        if capacity > 0:
            out.append(MemoryCapacity(name, capacity, role))
    return tuple(out)


def inspect_binary(path: Path, capacities: tuple[MemoryCapacity, ...] = ()) -> BinaryInfo:
    """Read section sizes of an ELF (a non-ELF artifact yields file size only), to be checked
    against ``capacities`` (``DeployTarget.memory_capacities()``)."""
    try:
        elf = read_elf(path)
    except ElfReadError:
        size = path.stat().st_size
        return BinaryInfo(path, "unknown", size, 0, size, 0, 0, (), capacities)
    sections = [
        SectionSize(sec.name, sec.address, sec.size, sec.kind)
        for sec in elf.sections
        if sec.kind != "other" and sec.size
    ]
    flash = sum(seg.filesz for seg in elf.segments)
    machine = elf.machine
    text = sum(s.size for s in sections if s.kind in ("text", "rodata"))
    data = sum(s.size for s in sections if s.kind == "data")
    bss = sum(s.size for s in sections if s.kind == "bss")
    return BinaryInfo(
        path, machine, flash, data + bss, text, data, bss, tuple(sections), capacities
    )
