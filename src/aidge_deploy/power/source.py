"""``--power SOURCE``: which power monitor a run uses, parsed and checked before anything runs.

Grammar: ``joulescope[:SERIAL]``, ``jls:FILE``, ``hwmon[:NAME]``, ``rapl``, ``emulated``,
``reference``. Parsing only checks the spelling (with a did-you-mean); whether the monitor
is really there is Preflight's job (``power.monitors.preflight_checks``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import StrEnum

from aidge_deploy.errors import ConfigError


class PowerSourceKind(StrEnum):
    """The monitors aidge-deploy can read (one module each under ``power/``)."""

    JOULESCOPE = "joulescope"  # JS220/JS110 through pyjoulescope_driver
    JLS = "jls"  # a Joulescope capture file recorded elsewhere
    HWMON = "hwmon"  # Linux hwmon power/energy sensors (INA2xx, INA3221, Jetson rails)
    RAPL = "rapl"  # powercap RAPL energy counters of x86 hosts
    EMULATED = "emulated"  # energy model driven by the emulated PMU (QEMU boards)
    REFERENCE = "reference"  # hardware model's reference current x voltage x latency


#: what each kind takes after the colon: None = nothing, else a description of the argument
_ARGUMENT: dict[PowerSourceKind, tuple[str | None, bool]] = {
    PowerSourceKind.JOULESCOPE: ("SERIAL", False),
    PowerSourceKind.JLS: ("FILE", True),
    PowerSourceKind.HWMON: ("NAME", False),
    PowerSourceKind.RAPL: (None, False),
    PowerSourceKind.EMULATED: (None, False),
    PowerSourceKind.REFERENCE: (None, False),
}

#: what each monitor is, for people (docs page, doctor): syntax, what it reads, provenance
MONITOR_DOCS: dict[PowerSourceKind, tuple[str, str, str]] = {
    PowerSourceKind.JOULESCOPE: (
        "joulescope[:SERIAL]",
        "JS220/JS110 through pyjoulescope_driver: current, voltage, GPI 0 gate; recorded to "
        "JLS in the run folder and analysed like jls:",
        "silicon",
    ),
    PowerSourceKind.JLS: (
        "jls:FILE",
        "a Joulescope capture file recorded elsewhere (pyjls), gated on its first gpi[N]",
        "silicon",
    ),
    PowerSourceKind.HWMON: (
        "hwmon[:NAME]",
        "Linux hwmon sensors (INA219/226/228/3221, Jetson rails), chip name or rail label; "
        "polled on the host or over SSH on the board, host-timed window",
        "host / silicon (SSH board)",
    ),
    PowerSourceKind.RAPL: (
        "rapl",
        "powercap RAPL package energy counters of x86 hosts (wrap handled)",
        "host / silicon (SSH board)",
    ),
    PowerSourceKind.EMULATED: (
        "emulated",
        "energy model of an emulated board's core driven by the emulated PMU counts, gated "
        "by the power firmware's gate functions; per inference and per layer",
        "estimated",
    ),
    PowerSourceKind.REFERENCE: (
        "reference",
        "the hardware model's reference current x supply voltage x N x clean latency",
        "estimated",
    ),
}

SOURCE_HELP = (
    "joulescope[:SERIAL], jls:FILE, hwmon[:NAME], rapl, emulated (QEMU boards) or reference"
)


@dataclass(frozen=True)
class PowerSource:
    """A parsed ``--power`` value: the monitor kind and its argument (serial, file, chip)."""

    kind: PowerSourceKind
    argument: str | None = None

    def __str__(self) -> str:
        return self.kind.value if self.argument is None else f"{self.kind.value}:{self.argument}"


def parse_power_source(value: str | PowerSource) -> PowerSource:
    """``"jls:cap.jls"`` -> ``PowerSource(JLS, "cap.jls")``; ``ConfigError`` with a hint if bad."""
    if isinstance(value, PowerSource):
        return value
    text = str(value).strip()
    name, sep, argument = text.partition(":")
    name = name.strip().lower()
    try:
        kind = PowerSourceKind(name)
    except ValueError:
        close = difflib.get_close_matches(name, [k.value for k in PowerSourceKind], n=1)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"Unknown power source {text!r}.{guess}", hint=f"Use one of: {SOURCE_HELP}."
        ) from None
    arg_name, required = _ARGUMENT[kind]
    argument = argument.strip()
    if sep and not argument:
        raise ConfigError(
            f"Power source {text!r} has an empty argument after ':'",
            hint=f"Write {kind.value}:{arg_name}" + ("" if required else f" or just {kind.value}")
            if arg_name
            else f"Write just {kind.value}.",
        )
    if arg_name is None and argument:
        raise ConfigError(
            f"Power source {kind.value!r} takes no argument (got {argument!r})",
            hint=f"Write just {kind.value}.",
        )
    if required and not argument:
        raise ConfigError(
            f"Power source {kind.value!r} needs a {arg_name}",
            hint=f"Write {kind.value}:{arg_name}, e.g. {kind.value}:capture.jls.",
        )
    return PowerSource(kind, argument or None)


__all__ = ["MONITOR_DOCS", "SOURCE_HELP", "PowerSource", "PowerSourceKind", "parse_power_source"]
