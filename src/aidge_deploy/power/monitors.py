"""The built-in power monitor kinds, and ``--power`` for a run: its monitor and its checks.

Each kind is a ``MonitorKind`` registered under its ``--power`` name (entry points
``aidge_deploy.power_monitors``); its module is imported only when a run or ``doctor`` asks
for it. Preflight calls ``preflight_checks`` so a run asking for a monitor that is absent
fails before anything is built, saying what is missing and how to get it, in the words
``doctor`` prints (``on_this_machine``).
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from typing import TYPE_CHECKING, Any

from aidge_deploy.errors import CaptureError, ConfigError
from aidge_deploy.power.registry import (
    POWER_MONITORS,
    MonitorKind,
    ThisMachine,
    parse_power_source,
)
from aidge_deploy.power.source import PowerSource
from aidge_deploy.readiness import ToolCheck, module_check
from aidge_deploy.targetspec import PowerAbility, TargetCaps

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.power.protocol import PowerMonitor
    from aidge_deploy.power.sysfs import SysfsReader


class JoulescopeMonitorKind(MonitorKind):
    argument = "SERIAL"
    reads = (
        "JS220/JS110 through pyjoulescope_driver: current, voltage, GPI 0 gate; recorded to "
        "JLS in the run folder and analysed like jls:"
    )
    provenance = "silicon"

    @classmethod
    def on_this_machine(cls, here: ThisMachine) -> list[ToolCheck]:
        from aidge_deploy.power.joulescope import joulescope_checks

        return joulescope_checks(None)

    @classmethod
    def preflight(
        cls, source: PowerSource, config: DeployConfig, target_cls: type, caps: TargetCaps
    ) -> list[ToolCheck]:
        from aidge_deploy.power.joulescope import joulescope_checks

        if caps.emulated:
            raise ConfigError(
                f"--power joulescope measures a board's supply; {config.target} is an emulated "
                "board, with no supply to measure",
                hint="Estimate its energy with --power emulated, or measure the physical board.",
            )
        return joulescope_checks(source.argument)

    @classmethod
    def create(
        cls, source: PowerSource, config: DeployConfig, target: Any, caps: TargetCaps
    ) -> PowerMonitor:
        from aidge_deploy.power.joulescope import JoulescopeMonitor

        return JoulescopeMonitor(source)


class JlsMonitorKind(MonitorKind):
    argument = "FILE"
    argument_required = True
    reads = "a Joulescope capture file recorded elsewhere (pyjls), gated on its first gpi[N]"
    provenance = "silicon"
    runs_a_window = False  # nothing runs: any board whose run it recorded

    @classmethod
    def on_this_machine(cls, here: ThisMachine) -> list[ToolCheck]:
        from aidge_deploy.power.jls import INSTALL_HINT

        return [module_check("pyjls", INSTALL_HINT)]

    @classmethod
    def preflight(
        cls, source: PowerSource, config: DeployConfig, target_cls: type, caps: TargetCaps
    ) -> list[ToolCheck]:
        from aidge_deploy.power.jls_monitor import jls_checks

        return jls_checks(source, config, target_cls, caps)

    @classmethod
    def create(
        cls, source: PowerSource, config: DeployConfig, target: Any, caps: TargetCaps
    ) -> PowerMonitor:
        from aidge_deploy.power.jls_monitor import JlsFileMonitor

        return JlsFileMonitor(source)


class SysfsMonitorKind(MonitorKind):
    """hwmon and RAPL: sensors read from sysfs where the program runs (this machine, or
    the SSH board), in a host-timed window."""

    provenance = "host / silicon (SSH board)"

    @classmethod
    @abstractmethod
    def find(cls, reader: SysfsReader, source: PowerSource) -> list[ToolCheck]:
        """The sensors ``source`` reads on ``reader`` (``CaptureError`` when there are none)."""

    @classmethod
    def on_this_machine(cls, here: ThisMachine) -> list[ToolCheck]:
        from aidge_deploy.power.sysfs import LocalSysfs

        try:
            return cls.find(LocalSysfs(here.sysfs_root), PowerSource(cls.name))
        except CaptureError as exc:
            return [ToolCheck(cls.name, False, exc.message, exc.hint)]

    @classmethod
    def preflight(
        cls, source: PowerSource, config: DeployConfig, target_cls: type, caps: TargetCaps
    ) -> list[ToolCheck]:
        return sysfs_checks(source, config, ssh=caps.over_ssh)


class HwmonMonitorKind(SysfsMonitorKind):
    argument = "NAME"
    reads = (
        "Linux hwmon sensors (INA219/226/228/3221, Jetson rails), chip name or rail label; "
        "polled on the host or over SSH on the board, host-timed window"
    )

    @classmethod
    def find(cls, reader: SysfsReader, source: PowerSource) -> list[ToolCheck]:
        from aidge_deploy.power.hwmon import find_hwmon

        chips = find_hwmon(reader, source.argument)
        return [
            ToolCheck(f"hwmon:{c.name}", True, f"{c.describe()} on {reader.where}") for c in chips
        ]

    @classmethod
    def create(
        cls, source: PowerSource, config: DeployConfig, target: Any, caps: TargetCaps
    ) -> PowerMonitor:
        from aidge_deploy.power.hwmon import HwmonMonitor
        from aidge_deploy.power.sysfs import make_reader

        return HwmonMonitor(source, lambda: make_reader(config, ssh=caps.over_ssh))


class RaplMonitorKind(SysfsMonitorKind):
    reads = "powercap RAPL package energy counters of x86 hosts (wrap handled)"

    @classmethod
    def find(cls, reader: SysfsReader, source: PowerSource) -> list[ToolCheck]:
        from aidge_deploy.power.rapl import find_rapl_zones

        zones = find_rapl_zones(reader)
        return [ToolCheck("rapl", True, ", ".join(z.name for z in zones))]

    @classmethod
    def create(
        cls, source: PowerSource, config: DeployConfig, target: Any, caps: TargetCaps
    ) -> PowerMonitor:
        from aidge_deploy.power.rapl import RaplMonitor
        from aidge_deploy.power.sysfs import make_reader

        return RaplMonitor(source, lambda: make_reader(config, ssh=caps.over_ssh))


def sysfs_checks(source: PowerSource, config: DeployConfig, *, ssh: bool) -> list[ToolCheck]:
    """Preflight of hwmon/rapl: the sensor exists where the program will run (over SSH for
    boards reached so: ``ssh``)."""
    from aidge_deploy.power.sysfs import make_reader

    kind = POWER_MONITORS.find(source.kind)
    if not (isinstance(kind, type) and issubclass(kind, SysfsMonitorKind)):
        raise ConfigError(f"{source} is not read from sysfs", hint="Use hwmon or rapl.")
    try:
        reader = make_reader(config, ssh=ssh)
    except Exception as exc:  # connection refused, unknown host key...
        message = getattr(exc, "message", str(exc))
        return [
            ToolCheck(
                str(source),
                False,
                f"cannot reach the board's sysfs: {message}",
                getattr(exc, "hint", None),
            )
        ]
    try:
        return [
            dataclasses.replace(c, detail=f"{c.detail} on {reader.where}")
            for c in kind.find(reader, source)
        ]
    except CaptureError as exc:
        return [ToolCheck(str(source), False, exc.message, exc.hint)]
    finally:
        reader.close()


class ReferenceMonitorKind(MonitorKind):
    reads = "the hardware model's reference current x supply voltage x N x clean latency"
    provenance = "estimated"

    @classmethod
    def on_this_machine(cls, here: ThisMachine) -> list[ToolCheck]:
        """Which registered targets a ``--power reference`` run would pass Preflight on (a
        power window, and reference values in the hardware model): ready only when a target
        of this machine is one of them (SSH boards are said, not counted)."""
        from aidge_deploy.config import DeployConfig

        usable = []
        local = []
        for target, backend, target_cls in here.targets:
            config = DeployConfig(target=target, backend=backend, power=cls.name)
            caps = here.caps.get((target, backend))
            if caps is None:
                continue
            try:
                if all(c.ok for c in preflight_checks(config, target_cls, caps)):
                    usable.append(f"{target}/{backend}")
                    if caps.from_here:
                        local.append(usable[-1])
            except Exception:  # refused for this target (no window, no hardware model here)
                continue
        if local:
            return [ToolCheck("reference", True, f"usable on {', '.join(usable)}")]
        elsewhere = (
            f"; boards reached over a backend that can: {', '.join(usable)}" if usable else ""
        )
        return [
            ToolCheck(
                "reference",
                False,
                "no target of this machine (backend local) has reference current and voltage "
                f"and runs a power window{elsewhere}",
                "Measure instead (--power joulescope, jls:FILE, hwmon, rapl), or estimate an "
                "emulated board with --power emulated.",
            )
        ]

    @classmethod
    def preflight(
        cls, source: PowerSource, config: DeployConfig, target_cls: type, caps: TargetCaps
    ) -> list[ToolCheck]:
        from aidge_deploy.power.reference import reference_checks

        return reference_checks(config, target_cls)

    @classmethod
    def create(
        cls, source: PowerSource, config: DeployConfig, target: Any, caps: TargetCaps
    ) -> PowerMonitor:
        from aidge_deploy.power.reference import ReferenceMonitor

        return ReferenceMonitor(source, str(config.target), target.hardware_target)


def make_monitor(config: DeployConfig, target: Any, caps: TargetCaps) -> PowerMonitor:
    """The monitor ``config.power`` names, for ``target`` (a ``DeployTarget`` instance)
    whose capabilities are ``caps``."""
    source = parse_power_source(config.power or "")
    return _kind(source).create(source, config, target, caps)


def preflight_checks(config: DeployConfig, target_cls: type, caps: TargetCaps) -> list[ToolCheck]:
    """What the requested monitor needs, checked without building anything; ``caps`` are the
    target's (``aidge_deploy.targetcaps``): a window needs its power ability."""
    source = parse_power_source(config.power or "")
    kind = _kind(source)
    if kind.runs_a_window and caps.power is PowerAbility.NONE:
        raise ConfigError(
            f"--power {source} was requested, but target {config.target} cannot run a power window",
            hint="Power runs work on the emulated boards, the host and Linux boards over SSH; "
            "a capture of a board's run is analysed with --power jls:FILE.",
        )
    return kind.preflight(source, config, target_cls, caps)


def monitor_checks(here: ThisMachine) -> dict[str, list[ToolCheck]]:
    """What ``doctor`` lists: every registered kind and whether one is usable ``here``."""
    return {name: kind.on_this_machine(here) for name, kind in POWER_MONITORS.all().items()}


def discover_monitors(here: ThisMachine) -> list[ToolCheck]:
    """``monitor_checks`` as one list."""
    return [check for checks in monitor_checks(here).values() for check in checks]


def _kind(source: PowerSource) -> type[MonitorKind]:
    from aidge_deploy.power.registry import monitor_kind

    return monitor_kind(str(source.kind))


__all__ = [
    "HwmonMonitorKind",
    "JlsMonitorKind",
    "JoulescopeMonitorKind",
    "RaplMonitorKind",
    "ReferenceMonitorKind",
    "discover_monitors",
    "make_monitor",
    "monitor_checks",
    "preflight_checks",
    "sysfs_checks",
]
