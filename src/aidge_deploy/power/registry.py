"""The power-monitor registry: ``--power NAME[:ARG]`` -> the kind of monitor that reads it.

(``config`` below is a ``DeployConfig``, typed ``Any``: ``config`` checks ``--power`` with
``parse_power_source`` when it is built, so this module cannot name its type.)

One ``extensions.Registry`` (entry-point group ``aidge_deploy.power_monitors``), the shape of
every extension point. A ``MonitorKind`` says how ``--power`` spells it (its argument), what
it reads and with which provenance, what this machine needs for it (``doctor``), what a run
needs (Preflight, before anything is built), and opens a ``PowerMonitor`` for a run. Each
kind's module is imported only when a run or ``doctor`` asks for it (the Joulescope packages
are heavy and optional).
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from aidge_deploy.errors import ConfigError
from aidge_deploy.extensions import Registry
from aidge_deploy.power.source import BUILT_IN, PowerSource, PowerSourceKind
from aidge_deploy.readiness import ToolCheck
from aidge_deploy.targetspec import TargetCaps

if TYPE_CHECKING:
    from aidge_deploy.power.protocol import PowerMonitor


#: where ``doctor`` looks for this machine's sensors
SYSFS_ROOT = Path("/sys")


@dataclass(frozen=True)
class ThisMachine:
    """What ``doctor`` tells a monitor kind when it asks whether one is usable here."""

    #: where sysfs is mounted (hwmon and RAPL sensors)
    sysfs_root: Path = SYSFS_ROOT
    #: the registered deploy targets, ``(target, backend, class)``: a monitor usable with
    #: some targets only says which
    targets: tuple[tuple[str, str, type], ...] = ()
    #: each of those targets' capabilities (``aidge_deploy.targetcaps``), by ``(target, backend)``
    caps: Mapping[tuple[str, str], TargetCaps] = field(default_factory=dict)


class MonitorKind(ABC):
    """One kind of power monitor, as ``--power`` names it."""

    name: ClassVar[str]
    #: what follows ``NAME:`` (``SERIAL``, ``FILE``, ``NAME``); None: nothing may follow
    argument: ClassVar[str | None] = None
    argument_required: ClassVar[bool] = False
    #: what it reads, for people (docs, doctor)
    reads: ClassVar[str] = ""
    #: the provenance of its figures (``silicon``, ``host``, ``estimated``...), for people
    provenance: ClassVar[str] = ""
    #: a run must execute a gated window on a ``PowerCapableTarget`` (False: a capture
    #: recorded elsewhere is analysed, whatever the target can run)
    runs_a_window: ClassVar[bool] = True

    @classmethod
    def syntax(cls) -> str:
        if cls.argument is None:
            return cls.name
        return (
            f"{cls.name}:{cls.argument}"
            if cls.argument_required
            else f"{cls.name}[:{cls.argument}]"
        )

    @classmethod
    def on_this_machine(cls, here: ThisMachine) -> list[ToolCheck]:
        """What ``doctor`` lists: whether one such monitor is usable here, or what is missing."""
        return []

    @classmethod
    def preflight(
        cls, source: PowerSource, config: Any, target_cls: type, caps: TargetCaps
    ) -> list[ToolCheck]:
        """What a run with ``source`` on ``target_cls`` (whose capabilities are ``caps``,
        ``aidge_deploy.targetcaps``: what it is, how it is reached) needs, checked before anything is
        built (``ConfigError`` for a combination no run can measure)."""
        return cls.on_this_machine(ThisMachine())

    @classmethod
    @abstractmethod
    def create(
        cls, source: PowerSource, config: Any, target: Any, caps: TargetCaps
    ) -> PowerMonitor:
        """The monitor of one run on ``target`` (a ``DeployTarget`` instance, whose
        capabilities are ``caps``)."""


_K = TypeVar("_K", bound=type[MonitorKind])


#: the --power NAME -> its kind (entry points ``aidge_deploy.power_monitors``)
POWER_MONITORS: Registry[type[MonitorKind]] = Registry("power_monitors", MonitorKind)


def register_power_monitor(name: str) -> Callable[[_K], _K]:
    """Class decorator: register a ``MonitorKind`` under the ``--power`` name ``name``."""
    return POWER_MONITORS.registering(name)


def monitor_kind(name: str) -> type[MonitorKind]:
    """The kind ``--power`` calls ``name``; ``ConfigError`` with a did-you-mean otherwise."""
    found = POWER_MONITORS.find(name)
    if found is None:
        names = POWER_MONITORS.names()
        close = difflib.get_close_matches(name, names, n=1)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"Unknown power source {name!r}.{guess}", hint=f"Use one of: {source_help()}."
        )
    return found


def source_help() -> str:
    """Every ``--power`` spelling: ``joulescope[:SERIAL], jls:FILE, ...``."""
    return ", ".join(kind.syntax() for kind in POWER_MONITORS.all().values())


def parse_power_source(value: str | PowerSource) -> PowerSource:
    """``"jls:cap.jls"`` -> ``PowerSource(JLS, "cap.jls")``; ``ConfigError`` with a hint if bad.

    Only the spelling is checked (the kind is registered, its argument is given or not as it
    takes one); whether the monitor is really there is Preflight's job."""
    if isinstance(value, PowerSource):
        return value
    text = str(value).strip()
    name, sep, argument = text.partition(":")
    name = name.strip().lower()
    spec = monitor_kind(name)
    kind: str = PowerSourceKind(name) if name in BUILT_IN else name
    arg_name, required = spec.argument, spec.argument_required
    label = str(kind)
    argument = argument.strip()
    if sep and not argument:
        raise ConfigError(
            f"Power source {text!r} has an empty argument after ':'",
            hint=f"Write {label}:{arg_name}" + ("" if required else f" or just {label}")
            if arg_name
            else f"Write just {label}.",
        )
    if arg_name is None and argument:
        raise ConfigError(
            f"Power source {label!r} takes no argument (got {argument!r})",
            hint=f"Write just {label}.",
        )
    if required and not argument:
        raise ConfigError(
            f"Power source {label!r} needs a {arg_name}",
            hint=f"Write {label}:{arg_name}, e.g. {label}:capture.jls.",
        )
    return PowerSource(kind, argument or None)


__all__ = [
    "POWER_MONITORS",
    "SYSFS_ROOT",
    "MonitorKind",
    "ThisMachine",
    "monitor_kind",
    "parse_power_source",
    "register_power_monitor",
    "source_help",
]
