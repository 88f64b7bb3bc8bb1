"""``hwmon[:NAME]``: Linux power sensors (INA219/226/228/3221 drivers, Jetson rails).

Units (kernel ``Documentation/hwmon/sysfs-interface.rst``): ``in*_input`` mV, ``curr*_input``
mA, ``power*_input`` µW, ``energy*_input`` µJ. A chip is found by its ``name`` file under
``class/hwmon/hwmon*``; NAME may also be a rail label (``VDD_IN`` on a Jetson). Energy
counters are preferred where the chip has them (INA228); else power (INA226); else bus
voltage x current per channel (INA3221 has no power file), skipping ``NC`` rails and the
summing channel.

Rails are not always siblings: on a Jetson the INA3221's ``VDD_IN`` is the module's input
and ``VDD_CPU_GPU_CV`` / ``VDD_SOC`` are sub-rails *inside* it, so adding them counts their
power twice. A chip with an input rail is read on that rail alone (unless a rail is named);
a chip without one is the sum of its rails. The result says which rails were used and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aidge_deploy.errors import CaptureError
from aidge_deploy.power.poller import MAX_PERIOD_S, MIN_PERIOD_S, PolledMonitor
from aidge_deploy.power.protocol import MonitorIdentity

if TYPE_CHECKING:
    from aidge_deploy.power.sysfs import SysfsReader

HWMON = "class/hwmon"
_NUM = re.compile(r"^(energy|power|in|curr)(\d+)_input$")
#: labels of a board's or module's input rail (Jetson VDD_IN, POM_5V_IN; VIN, SYS_IN...):
#: the other rails of the chip are inside it
INPUT_RAIL = re.compile(r"(^|_)(V?IN|VDD_IN)$|_IN_|^VIN", re.IGNORECASE)


@dataclass(frozen=True)
class Rail:
    label: str
    kind: str  # "energy" (µJ counter), "power" (µW) or "vi" (mV and mA files)
    files: tuple[str, ...]


@dataclass(frozen=True)
class HwmonChip:
    name: str
    directory: str  # relative to the sysfs root
    rails: tuple[Rail, ...]
    update_interval_ms: int | None

    @property
    def kind(self) -> str:
        return self.rails[0].kind

    def describe(self) -> str:
        labels = ", ".join(r.label for r in self.rails)
        return f"{self.name} ({self.directory}): {self.kind} of {labels}"


def _chip(reader: SysfsReader, directory: str) -> HwmonChip | None:
    names = set(reader.list(directory))
    if "name" not in names:
        return None
    (name,) = reader.read([f"{directory}/name"])
    by_kind: dict[str, list[int]] = {}
    for entry in names:
        m = _NUM.match(entry)
        if m:
            by_kind.setdefault(m.group(1), []).append(int(m.group(2)))

    def label(prefix: str, n: int) -> str:
        if f"{prefix}{n}_label" in names:
            return reader.read([f"{directory}/{prefix}{n}_label"])[0]
        return f"{name}.{prefix}{n}"

    rails: list[Rail] = []
    if by_kind.get("energy"):
        for n in sorted(by_kind["energy"]):
            rails.append(Rail(label("energy", n), "energy", (f"{directory}/energy{n}_input",)))
    elif by_kind.get("power"):
        for n in sorted(by_kind["power"]):
            rails.append(Rail(label("power", n), "power", (f"{directory}/power{n}_input",)))
    elif by_kind.get("curr") and by_kind.get("in"):
        for n in sorted(set(by_kind["curr"]) & set(by_kind["in"])):
            text = label("in", n)
            if text.upper() == "NC" or (name == "ina3221" and n > 3):
                continue  # unconnected channel, or the summing channel
            files = (f"{directory}/in{n}_input", f"{directory}/curr{n}_input")
            rails.append(Rail(text, "vi", files))
    if not rails:
        return None
    interval = None
    if "update_interval" in names:
        interval = int(reader.read([f"{directory}/update_interval"])[0])
    return HwmonChip(name, directory, tuple(rails), interval)


def find_hwmon(reader: SysfsReader, wanted: str | None) -> list[HwmonChip]:
    """Power-capable hwmon chips; ``wanted`` narrows to a chip name or a rail label."""
    chips = [c for d in reader.list(HWMON) if (c := _chip(reader, f"{HWMON}/{d}")) is not None]
    if wanted is not None:
        narrowed = []
        for chip in chips:
            if chip.name == wanted:
                narrowed.append(chip)
            else:
                rails = tuple(r for r in chip.rails if r.label == wanted)
                if rails:
                    narrowed.append(
                        HwmonChip(chip.name, chip.directory, rails, chip.update_interval_ms)
                    )
        chips = narrowed
    if not chips:
        what = f" named {wanted!r}" if wanted else ""
        raise CaptureError(
            f"No hwmon power sensor{what} on {reader.where}",
            hint="Load the sensor's driver (ina2xx, ina238, ina3221) or describe it in the "
            "device tree; `aidge-deploy doctor` lists the sensors found.",
        )
    return chips


def input_rail(chip: HwmonChip) -> Rail | None:
    """The chip's input rail, when one of its rails is labelled as one (and only one)."""
    inputs = [r for r in chip.rails if INPUT_RAIL.search(r.label)]
    return inputs[0] if len(inputs) == 1 and len(chip.rails) > 1 else None


def select_rails(chip: HwmonChip, wanted: str | None) -> tuple[HwmonChip, str]:
    """The rails to read and why: a named rail; else a chip's input rail alone (its other
    rails are inside it); else the sum of the chip's rails."""
    labels = [r.label for r in chip.rails]
    if wanted is not None and wanted != chip.name:
        return chip, f"rail {', '.join(labels)} of {chip.name} (named)"
    main = input_rail(chip)
    if main is not None:
        others = ", ".join(r.label for r in chip.rails if r is not main)
        return (
            HwmonChip(chip.name, chip.directory, (main,), chip.update_interval_ms),
            f"input rail {main.label} of {chip.name} (its sub-rails {others} are inside it "
            "and not added)",
        )
    if len(labels) == 1:
        return chip, f"rail {labels[0]} of {chip.name}"
    return chip, f"sum of rails {', '.join(labels)} of {chip.name} (no input rail among them)"


class HwmonMonitor(PolledMonitor):
    scope = "hwmon rails"

    def resolve(self, reader: SysfsReader) -> None:
        chips = find_hwmon(reader, self.source.argument)
        self.chip, self.scope = select_rails(chips[0], self.source.argument)
        if len(chips) > 1:
            self.scope += (
                f"; other sensors not read: {', '.join(c.name for c in chips[1:])} "
                "(name one: hwmon:NAME)"
            )
        self.cumulative = self.chip.kind == "energy"
        if self.chip.update_interval_ms:
            self.period_s = min(MAX_PERIOD_S, max(MIN_PERIOD_S, self.chip.update_interval_ms / 1e3))

    def read_value(self, reader: SysfsReader) -> float:
        files = [f for rail in self.chip.rails for f in rail.files]
        raw = reader.read_ints(files)
        kind = self.chip.kind
        if kind == "energy":
            return sum(raw) * 1e-6  # µJ -> J
        if kind == "power":
            return sum(raw) * 1e-6  # µW -> W
        pairs = zip(raw[0::2], raw[1::2], strict=True)
        return sum(mv * ma for mv, ma in pairs) * 1e-6  # mV x mA = µW -> W

    def identity(self) -> MonitorIdentity:
        return MonitorIdentity(
            name=f"hwmon {self.chip.name}",
            model=self.chip.name,
            details={
                "rails": ", ".join(r.label for r in self.chip.rails),
                "selection": self.scope,
                "path": self.chip.directory,
            },
        )


__all__ = ["HwmonChip", "HwmonMonitor", "Rail", "find_hwmon", "input_rail", "select_rails"]
