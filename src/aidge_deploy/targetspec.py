"""What a board *is*, as data: one ``TargetSpec`` record per board, and what it can do.

Why this module exists: a board of an existing kind (another Linux board over SSH, another
emulated Cortex-M under a lab's name) differs from its siblings only in facts — its name,
the hardware model that describes it, the ways it is reached — not in code. Such a board is
one record, declared as an entry point of the group ``aidge_deploy.boards``
(``"lab-pi" = "my_lab.boards:LAB_PI"``); the registry (``aidge_deploy.registry``) makes
its deploy target from the implementation of its kind for each backend it names. A board
whose mechanics differ (two cores, its own flashing) keeps a class of its own, registered
with ``register_deploy_target`` as before, and its record still says what it is.

Hardware facts stay with the hardware model, as the deploy guide prescribes: a record
names its ``aidge_core.hw_model`` target (``hardware_model``) and the module whose import
registers it, and never repeats the core, clock or memories that model declares (the core
and memories a listing shows are read from it).

The vocabulary is here, below every package, so that a stage, a listing and a campaign ask
a target's declared capabilities (``TargetCaps``) instead of testing its class or its name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from aidge_deploy.backendoptions import BackendOptions


class TargetKind(StrEnum):
    """What sort of board it is: decides which implementation deploys it, per backend."""

    #: this machine (built and run here, or reached over SSH as a board would be)
    HOST = "host"
    #: a Linux board reached over SSH (Raspberry Pi, Jetson, K230)
    LINUX_BOARD = "linux-board"
    #: a Cortex-M board emulated by QEMU (flashed over GDB RSP, UART captured)
    EMULATED_MCU = "emulated-mcu"
    #: a microcontroller on a debug probe and a UART
    MCU = "mcu"


class Lane(StrEnum):
    """How a run on a board may share the machine with others (``multitarget``): a host
    benchmark alone, emulated boards in parallel, a physical board's runs one at a time,
    farm jobs remote."""

    PARALLEL = "parallel"
    PER_BOARD = "per-board"
    ALONE = "alone"
    REMOTE = "remote"


class PowerAbility(StrEnum):
    """How a target's energy per inference can be measured (``--power``)."""

    #: the target has no gated power window: a monitor's reading is not the model's
    NONE = "none"
    #: the program is run repeatedly for the monitor's window (host, SSH boards)
    REPEATED_RUN = "repeated-run"
    #: a power firmware variant runs a window the emulator's monitor reads
    FIRMWARE_WINDOW = "firmware-window"


#: the lane of a board of each kind, when its record names none
DEFAULT_LANES: dict[TargetKind, Lane] = {
    TargetKind.HOST: Lane.ALONE,
    TargetKind.LINUX_BOARD: Lane.PER_BOARD,
    TargetKind.EMULATED_MCU: Lane.PARALLEL,
    TargetKind.MCU: Lane.PER_BOARD,
}

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class TargetSpec:
    """One board: its name, its kind, the hardware model describing it, how it is reached.

    ``backends`` are the local-pipeline backends it is reached through (``local``, ``ssh``,
    ``ssh_docker``); the remote ones (the farm's ``api``) serve every board. ``counters``
    names a counter source of ``aidge_deploy.counters`` for an implementation that counts
    with none (None: the implementation's own, if any); ``power`` is
    ``PowerAbility.NONE`` for a board whose energy cannot be measured although its kind's
    can (None: the implementation's ability); ``lane`` how its runs share the machine
    (None: its kind's). ``settings`` are values the implementation of its kind
    reads from the board (pyOCD's part name), as ``(attribute, value)`` pairs.
    """

    name: str
    kind: TargetKind
    backends: tuple[str, ...]
    #: the ``aidge_core.hw_model`` name of the board (None: ``name``): the authority on its
    #: core, clock, memories and BSP; an export generated for it deploys to this board
    hardware_model: str | None = None
    #: the module whose import registers that hardware model (None: built into Aidge, or
    #: the one the implementation of the kind names)
    hardware_model_module: str | None = None
    counters: str | None = None
    power: PowerAbility | None = None
    lane: Lane | None = None
    #: the line `aidge-deploy targets` shows (empty: the implementation's own)
    description: str = ""
    #: runs a heterogeneous export (a program per core)
    runs_heterogeneous: bool = False
    settings: tuple[tuple[str, str | int | float | bool | None], ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(
                f"board record name {self.name!r}: lower-case letters, digits, '.', '_', '-'"
            )
        if not self.backends:
            raise ValueError(f"board record {self.name!r} names no backend")
        object.__setattr__(self, "kind", TargetKind(self.kind))
        object.__setattr__(self, "backends", tuple(b.lower() for b in self.backends))

    @property
    def hardware_name(self) -> str:
        """The hardware model's name of the board."""
        return self.hardware_model or self.name

    @property
    def run_lane(self) -> Lane:
        return self.lane if self.lane is not None else DEFAULT_LANES[self.kind]


class WindowRule(StrEnum):
    """What "consistent with N x clean latency" means for a captured power window."""

    MATCH = "match"  # it lasts N x clean latency, within the tolerance
    AT_LEAST = "at_least"  # it holds N inferences and more (program start-ups): not shorter


@dataclass(frozen=True)
class BackendCaps:
    """How a backend reaches its board, declared as data by each implementation
    (``DeployTarget.reach``, ``RemoteBackend.reach``): a host process, QEMU, a probe, SSH,
    SSH into a container, the farm. What the mixins already say (transfer, flash, counters,
    power) is not repeated here: the registry derives it from them."""

    #: the program runs on this machine (a host process, an emulator), not on a board
    runs_here: bool = False
    #: the board is reached over SSH (its settings, its board's sensors)
    over_ssh: bool = False
    #: the program runs in a container on the board (Docker over SSH)
    in_container: bool = False
    #: the whole deploy runs elsewhere and hands its result back (the farm's ``api``)
    remote: bool = False
    #: how its runs share this machine when the backend decides it (None: the board's lane)
    lane: Lane | None = None
    #: the option records it reads (``config.ssh``, ``config.farm``...): its own options
    options: tuple[type[BackendOptions], ...] = ()


@dataclass(frozen=True)
class TargetCaps:
    """What a deploy target can do, declared as data (as the flashers' ``FlasherCaps``):
    the pipeline's stages, listings and campaigns ask these instead of testing the class
    or the board's name. The registry derives them once per class
    (``aidge_deploy.targetcaps.target_caps``) from the board's record, the backend's
    ``BackendCaps`` and the mixins the class adopts."""

    #: what sort of board it is (None: a remote backend's class, which serves every board)
    kind: TargetKind | None
    #: the backend's name (``local``, ``ssh``, ``ssh_docker``, ``api``, a plug-in's)
    backend: str = "local"
    #: copies the build (or the export) to a remote host (``transfer``)
    transfers: bool = False
    #: programs a firmware into the device (``flash``)
    flashes: bool = False
    #: may build on a remote machine (``build_remote``; the run decides, cross builds exist)
    builds_remotely: bool = False
    #: the counter source it counts with, by name (None: no hardware counters)
    counters: str | None = None
    power: PowerAbility = PowerAbility.NONE
    #: how a power window of this target is judged against N x clean latency
    power_window: WindowRule = WindowRule.MATCH
    lane: Lane = Lane.PARALLEL
    #: the program runs on this machine (a host process, an emulator)
    runs_here: bool = False
    #: reached over SSH (its settings, its board's sensors)
    over_ssh: bool = False
    #: runs in a container on the board
    in_container: bool = False
    #: the whole deploy runs elsewhere (no local stage runs)
    remote: bool = False
    #: the option records its backend reads (``aidge_deploy.backendoptions``)
    options: tuple[type[BackendOptions], ...] = ()
    #: the target brings a hardware model of its own (a plug-in's board run on this machine
    #: as a stand-in): its facts are that model's, not this machine's
    own_hardware_model: bool = False

    @property
    def this_machine(self) -> bool:
        """This machine is the board: its figures (memory, clock, power) are this machine's."""
        return self.kind is TargetKind.HOST and self.runs_here and not self.own_hardware_model

    @property
    def emulated(self) -> bool:
        return self.kind is TargetKind.EMULATED_MCU

    @property
    def physical(self) -> bool:
        """A board of its own (a probe's MCU, a Linux board over SSH), not this machine,
        an emulator or the farm: its runs hold it one at a time."""
        return not (self.runs_here or self.remote)

    @property
    def from_here(self) -> bool:
        """The pipeline drives the board from this machine itself (a process, an emulator,
        a probe), not over SSH nor through a remote backend."""
        return not (self.over_ssh or self.remote)

    @property
    def power_variant(self) -> bool:
        """The BSP builds a dedicated power firmware (a gated window of N inferences)."""
        return self.power is PowerAbility.FIRMWARE_WINDOW


__all__ = [
    "DEFAULT_LANES",
    "BackendCaps",
    "Lane",
    "PowerAbility",
    "TargetCaps",
    "TargetKind",
    "TargetSpec",
    "WindowRule",
]
