"""``rapl``: the powercap RAPL energy counters of x86 hosts (Intel, and AMD Zen).

Layout (kernel ``Documentation/power/powercap/powercap.rst``): ``class/powercap/intel-rapl:N``
named ``package-N``, each with ``energy_uj`` and ``max_energy_range_uj``. The package zones
are summed. A counter that goes down has wrapped: its range is added back (it wraps within
minutes at full load). Since Linux 5.10 ``energy_uj`` is root-only, and Docker masks the
powercap tree; both show up as a clear Preflight error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aidge_deploy.errors import CaptureError
from aidge_deploy.power.poller import PolledMonitor
from aidge_deploy.power.protocol import MonitorIdentity

if TYPE_CHECKING:
    from aidge_deploy.power.sysfs import SysfsReader

POWERCAP = "class/powercap"
_PACKAGE = re.compile(r"^intel-rapl:(\d+)$")


@dataclass(frozen=True)
class RaplZone:
    name: str  # "package-0"
    directory: str
    max_range_uj: int


def find_rapl_zones(reader: SysfsReader) -> list[RaplZone]:
    zones = []
    for entry in reader.list(POWERCAP):
        if not _PACKAGE.match(entry):
            continue
        directory = f"{POWERCAP}/{entry}"
        name, max_range = reader.read([f"{directory}/name", f"{directory}/max_energy_range_uj"])
        zones.append(RaplZone(name, directory, int(max_range)))
    if not zones:
        raise CaptureError(
            f"No RAPL package zone on {reader.where} (class/powercap/intel-rapl:N)",
            hint="RAPL needs an x86 host with the intel_rapl driver; containers mask "
            "/sys/devices/virtual/powercap.",
        )
    return zones


class RaplMonitor(PolledMonitor):
    cumulative = True
    scope = "CPU package (RAPL)"

    def resolve(self, reader: SysfsReader) -> None:
        self.zones = find_rapl_zones(reader)
        self.scope = f"RAPL {', '.join(z.name for z in self.zones)}"
        self._last: list[int] | None = None
        self._offsets = [0] * len(self.zones)
        self.wraps = 0

    def read_value(self, reader: SysfsReader) -> float:
        raw = reader.read_ints([f"{z.directory}/energy_uj" for z in self.zones])
        if self._last is not None:
            for i, (before, now) in enumerate(zip(self._last, raw, strict=True)):
                if now < before:  # wrapped since the last poll
                    self._offsets[i] += self.zones[i].max_range_uj
                    self.wraps += 1
        self._last = raw
        return sum(v + o for v, o in zip(raw, self._offsets, strict=True)) * 1e-6

    def identity(self) -> MonitorIdentity:
        return MonitorIdentity(
            name="RAPL",
            details={"zones": ", ".join(z.name for z in self.zones), "wraps": str(self.wraps)},
        )


__all__ = ["RaplMonitor", "RaplZone", "find_rapl_zones"]
