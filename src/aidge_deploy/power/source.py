"""``--power SOURCE``: which power monitor a run uses (``power.registry`` parses and checks it).

A ``PowerSource`` is ``NAME[:ARGUMENT]``: the name of a registered monitor kind and what it
takes after the colon (``joulescope[:SERIAL]``, ``jls:FILE``, ``hwmon[:NAME]``, ``rapl``,
``emulated``, ``reference``, or a plug-in's). This module imports nothing of ours: every
power module (and the monitor protocol) can name a source without the registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PowerSourceKind(StrEnum):
    """The built-in monitor kinds (one module each under ``power/``); a plug-in's kind is
    a plain name."""

    JOULESCOPE = "joulescope"  # JS220/JS110 through pyjoulescope_driver
    JLS = "jls"  # a Joulescope capture file recorded elsewhere
    HWMON = "hwmon"  # Linux hwmon power/energy sensors (INA2xx, INA3221, Jetson rails)
    RAPL = "rapl"  # powercap RAPL energy counters of x86 hosts
    EMULATED = "emulated"  # energy model driven by the emulated PMU (QEMU boards)
    REFERENCE = "reference"  # hardware model's reference current x voltage x latency


#: the names of the built-in kinds
BUILT_IN = frozenset(k.value for k in PowerSourceKind)


@dataclass(frozen=True)
class PowerSource:
    """A parsed ``--power`` value: the monitor kind and its argument (serial, file, chip)."""

    #: a ``PowerSourceKind`` for the built-in kinds, the registered name for a plug-in's
    kind: str
    argument: str | None = None

    def __str__(self) -> str:
        return self.kind if self.argument is None else f"{self.kind}:{self.argument}"


__all__ = ["BUILT_IN", "PowerSource", "PowerSourceKind"]
