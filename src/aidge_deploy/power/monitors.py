"""The registry of monitors: ``--power SOURCE`` -> a ``PowerMonitor``, Preflight checks, doctor.

Each kind's module is imported only when a run asks for it (the Joulescope packages are
heavy and optional). Preflight calls ``preflight_checks`` so a run asking for a monitor
that is absent fails before anything is built, saying what is missing and how to get it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.errors import ConfigError
from aidge_deploy.power.source import PowerSourceKind, parse_power_source
from aidge_deploy.registry import ToolCheck

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.power.protocol import PowerMonitor


def _qemu_board(target: Any) -> Any:
    board = getattr(target, "board", None)
    if board is None or not getattr(target, "emulated", False):
        return None
    return board


def make_monitor(config: DeployConfig, target: Any) -> PowerMonitor:
    """The monitor ``config.power`` names, for ``target`` (a ``DeployTarget`` instance)."""
    source = parse_power_source(config.power or "")
    kind = source.kind
    if kind is PowerSourceKind.EMULATED:
        from aidge_deploy.power.emulated import EmulatedEnergyMonitor

        board = _qemu_board(target)
        if board is None:
            raise ConfigError(
                "--power emulated needs an emulated (QEMU) board",
                hint="Use it with --target mps2-an386, mps3-an547 or netduinoplus2; on other "
                "targets measure with joulescope, hwmon or rapl.",
            )
        return EmulatedEnergyMonitor(source, board.name, board.cpu_hz)
    if kind is PowerSourceKind.REFERENCE:
        from aidge_deploy.power.reference import ReferenceMonitor

        return ReferenceMonitor(source, str(config.target), target.hardware_target)
    if kind is PowerSourceKind.JLS:
        from aidge_deploy.power.jls_monitor import JlsFileMonitor

        return JlsFileMonitor(source)
    if kind is PowerSourceKind.JOULESCOPE:
        from aidge_deploy.power.joulescope import JoulescopeMonitor

        return JoulescopeMonitor(source)
    from aidge_deploy.power.sysfs import sysfs_monitor

    return sysfs_monitor(source, config, target)


def preflight_checks(config: DeployConfig, target_cls: type) -> list[ToolCheck]:
    """What the requested monitor needs, checked without building anything."""
    from aidge_deploy.power.capability import PowerCapableTarget

    source = parse_power_source(config.power or "")
    kind = source.kind
    if kind is PowerSourceKind.JLS:  # nothing runs: any board whose run it recorded
        from aidge_deploy.power.jls_monitor import jls_checks

        return jls_checks(source, config, target_cls)
    if not issubclass(target_cls, PowerCapableTarget):
        raise ConfigError(
            f"--power {source} was requested, but target {config.target} cannot run a power window",
            hint="Power runs work on the emulated boards, the host and Linux boards over SSH; "
            "a capture of a board's run is analysed with --power jls:FILE.",
        )
    if kind is PowerSourceKind.EMULATED:
        from aidge_deploy.power.energy_model import boards_with_models

        board = getattr(target_cls, "board_name", None)
        if not getattr(target_cls, "emulated", False) or board not in boards_with_models():
            raise ConfigError(
                f"--power emulated needs an emulated board with an energy model (not {config.target})",
                hint=f"Boards with a model: {', '.join(boards_with_models())}.",
            )
        return [ToolCheck("emulated", True, f"energy model of {board}")]
    if kind is PowerSourceKind.REFERENCE:
        from aidge_deploy.power.reference import reference_checks

        return reference_checks(config, target_cls)
    if kind is PowerSourceKind.JOULESCOPE:
        from aidge_deploy.power.joulescope import joulescope_checks

        if getattr(target_cls, "emulated", False):
            raise ConfigError(
                f"--power joulescope measures a board's supply; {config.target} is an emulated "
                "board, with no supply to measure",
                hint="Estimate its energy with --power emulated, or measure the physical board.",
            )
        return joulescope_checks(source.argument)
    from aidge_deploy.power.sysfs import sysfs_checks

    return sysfs_checks(source, config)


def _import_check(module: str, hint: str) -> ToolCheck:
    import importlib.util

    found = importlib.util.find_spec(module) is not None
    return ToolCheck(
        module, found, "installed" if found else "not installed", None if found else hint
    )


def discover_monitors(sysfs_root: Path = Path("/sys")) -> list[ToolCheck]:
    """What ``doctor`` lists: every monitor kind and whether one is usable here."""
    from aidge_deploy.power.jls import INSTALL_HINT
    from aidge_deploy.power.joulescope import joulescope_checks
    from aidge_deploy.power.sysfs import discover_sysfs

    found = [ToolCheck("emulated", True, "energy models of the QEMU boards")]
    found.append(ToolCheck("reference", True, "hardware-model reference currents"))
    found.append(_import_check("pyjls", INSTALL_HINT))
    found += joulescope_checks(None)
    found += discover_sysfs(sysfs_root)
    return found


__all__ = ["discover_monitors", "make_monitor", "preflight_checks"]
