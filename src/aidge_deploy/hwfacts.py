"""Hardware facts of a target, each in the unit it is in and with where it comes from.

``aidge_core.hw_model`` is the authority on a board: its clock and its memories. Those
numbers are printed as they are declared — an STM32's flash declared as 1,000,000 bytes is
"1 MB", not "977 KiB", and an emulated board's 4,194,304 bytes are "4 MiB" — and each says
it comes from the hardware model. One fact is known better here than there: the memory of
*this* machine, which the hardware model's ``host`` only stands in for (1 GB); the local
host target reports the real amount, read from the operating system, and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["HardwareFact", "bytes_in_own_unit", "clock_in_own_unit", "machine_memory_bytes"]

#: where a fact declared by the hardware model comes from
HW_MODEL = "aidge_core.hw_model"
#: where this machine's memory comes from
THIS_MACHINE = "this machine (sysconf)"


def _exact(value: float) -> str | None:
    """``value`` with at most 3 decimals when that is exact, else None."""
    for decimals in range(4):
        if abs(round(value, decimals) - value) < 1e-9:
            return f"{value:,.{decimals}f}"
    return None


_BINARY = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_DECIMAL = (("GB", 10**9), ("MB", 10**6), ("kB", 10**3))


def bytes_in_own_unit(n: int) -> str:
    """A byte count in the unit family it was declared in: 4194304 -> "4 MiB",
    1000000 -> "1 MB" (not "977 KiB"), 320000 -> "320 kB", 13500000 -> "13.5 MB".

    A multiple of 1000 was declared in decimal units (640_000 is "640 kB" even though it
    is also 625 KiB); anything else in binary ones. The largest unit of the family that shows it exactly (at most 3
    decimals, under 10,000) is used; a count exact in none is printed in bytes with an
    approximate figure beside it ("25,276,059,648 B (23.54 GiB)").
    """
    if n <= 0:
        return f"{n:,} B"
    decimal = n % 1000 == 0
    family = _DECIMAL if decimal else _BINARY
    for unit, scale in family:
        value = n / scale
        if 1 <= value < 10_000:
            text = _exact(value)
            if text is not None:
                return f"{text} {unit}"
    for unit, scale in family:
        if n >= scale:
            return f"{n:,} B ({n / scale:.2f} {unit})"
    return f"{n:,} B"


def clock_in_own_unit(hz: float) -> str:
    """A clock in the unit it is exact in: 25000000 -> "25 MHz", 32768 -> "32.768 kHz"."""
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if hz >= scale:
            text = _exact(hz / scale)
            if text is not None:
                return f"{text} {unit}"
    return f"{hz:,.0f} Hz"


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine, from the operating system (None if it will not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class HardwareFact:
    """One fact: what (``clock``, a memory name), its value and unit, and its source."""

    name: str
    value: float | int | None
    unit: str  # "Hz" or "B"
    source: str
    #: why the value is None
    unavailable_reason: str | None = None

    @property
    def text(self) -> str:
        if self.value is None:
            return f"unavailable ({self.unavailable_reason or 'not declared'})"
        if self.unit == "B" and self.source == THIS_MACHINE:
            return f"{int(self.value) / (1 << 30):.1f} GiB"  # a count of pages, no declared unit
        if self.unit == "B":
            return bytes_in_own_unit(int(self.value))
        if self.unit == "Hz":
            return clock_in_own_unit(float(self.value))
        return f"{self.value} {self.unit}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "text": self.text,
            "source": self.source,
            "unavailable_reason": self.unavailable_reason,
        }


def clock_fact(hardware_target: Any) -> HardwareFact:
    pe = getattr(hardware_target, "main_pe", None)
    hz = getattr(pe, "frequency_hz", None)
    if not hz:
        return HardwareFact(
            "clock", None, "Hz", HW_MODEL, "the hardware model declares no core clock"
        )
    return HardwareFact("clock", float(hz), "Hz", HW_MODEL)


def memory_facts(hardware_target: Any, *, this_machine: bool = False) -> list[HardwareFact]:
    """The memories of the hardware model; with ``this_machine`` (the local host target) the
    main memory is this machine's, read from the operating system."""
    try:
        memories = dict(getattr(hardware_target, "memories", {}) or {})
    except Exception:  # a hardware class whose property needs more setup
        memories = {}
    facts = []
    for name, mem in memories.items():
        capacity = getattr(mem, "capacity", None)
        facts.append(
            HardwareFact(str(name), int(capacity), "B", HW_MODEL)
            if capacity
            else HardwareFact(str(name), None, "B", HW_MODEL, "no capacity declared")
        )
    if this_machine:
        real = machine_memory_bytes()
        if real is not None:
            facts = [HardwareFact("mem", real, "B", THIS_MACHINE)]
    return facts
