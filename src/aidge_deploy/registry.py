"""Deploy-target registry: ``(target, backend)`` -> the class that knows the mechanics.

The target dimension selects hardware identity (``aidge_core.hw_model``, authoritative for
hardware facts, resolved on first use: a host run never imports ``aidge_core``); the backend
how the board is reached. Third parties register theirs with the same decorator. This table
is the single source of truth behind ``aidge-deploy targets``.

A board of an existing kind needs no class: its record (``aidge_deploy.targetspec.TargetSpec``,
declared in the entry-point group ``aidge_deploy.boards``) is enough, and for each backend it
names the registry makes its deploy target from the implementation of its kind
(``IMPLEMENTATIONS``: a subclass per board and backend, carrying the record). A class
registered for a pair (``register_deploy_target``, or an ``aidge_deploy.targets`` entry
point) is used for that pair instead, and still carries the board's record when one exists.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from aidge_deploy.backendoptions import FarmOptions
from aidge_deploy.boardspecs import (
    BOARDS,
    board_records,
    board_spec,
    hardware_model_of,
    register_board,
    resolve_hardware_class,
)
from aidge_deploy.config import Backend
from aidge_deploy.errors import ConfigError
from aidge_deploy.extensions import Declared, Registry
from aidge_deploy.metrics import Provenance
from aidge_deploy.readiness import ToolCheck
from aidge_deploy.targetspec import BackendCaps, Lane, TargetKind, TargetSpec

if TYPE_CHECKING:
    from pathlib import Path

    from aidge_deploy.config import DeployConfig
    from aidge_deploy.exportspec import Export
    from aidge_deploy.profiling.binary import MemoryCapacity
    from aidge_deploy.progress import ProgressCallback
    from aidge_deploy.protocols.base import ProtocolResult
    from aidge_deploy.results import BuildResult, DeployContext, DeployResult, ExecutionResult
    from aidge_deploy.timing import RunTimes


class _HardwareClass:
    """``DeployTarget.hardware_target_class``: the ``aidge_core.hw_model`` class of the
    target, resolved (and checked) on first access, then kept on the registered class."""

    def __get__(self, instance: object, owner: type[DeployTarget]) -> type:
        resolved = owner.__dict__.get("_hardware_class")
        if resolved is None:
            resolved = resolve_hardware_class(
                owner.hardware_model or owner.target_name, owner.hardware_model_module
            )
            owner._hardware_class = resolved
        return resolved


class DeployTarget(ABC):
    """Core lifecycle: ``prepare`` → ``build`` → ``execute`` → ``parse_output``.

    Hardware facts come from ``self.hardware_target`` (the ``aidge_core.hw_model`` object),
    session facts from ``self.config``; nothing here re-declares what the hardware model
    or the manifest already say.
    """

    target_name: ClassVar[str]
    backend_name: ClassVar[str]
    hardware_target_class = _HardwareClass()
    _hardware_class: ClassVar[type | None] = None
    #: the module whose import registers this target's hardware model with
    #: ``aidge_core.hw_model`` (a plug-in such as ``aidge_qemu_boards``), imported when the
    #: hardware model is first asked for — not before: a run that reads its facts elsewhere
    #: (``memory_capacities``, a board descriptor) never pays for it; None: built into Aidge
    hardware_model_module: ClassVar[str | None] = None
    #: the ``aidge_core.hw_model`` name of the board when it is not the target's name (a
    #: board record naming the hardware model it shares: ``TargetSpec.hardware_model``)
    hardware_model: ClassVar[str | None] = None
    #: the board's record, when it has one (a target made from a record always does)
    spec: ClassVar[TargetSpec | None] = None
    #: what sort of board this implementation deploys (a record's kind overrides it)
    target_kind: ClassVar[TargetKind] = TargetKind.MCU
    #: how this backend reaches the board, as data (the rest of its capabilities are
    #: derived from its mixins and its record: ``aidge_deploy.targetcaps.target_caps``)
    reach: ClassVar[BackendCaps] = BackendCaps()
    description: ClassVar[str] = ""
    #: runs a heterogeneous export (``application_config.heterogeneous_deploy``: a program
    #: per core, built, loaded and started together); the others refuse one in Preflight
    runs_heterogeneous: ClassVar[bool] = False
    #: what this target's times are (silicon, host, estimated, ...) and what its counts are
    #: (silicon, host, emulated): every concrete target declares both — there is no
    #: default, registration refuses a target without them
    timing_provenance: ClassVar[Provenance]
    counter_provenance: ClassVar[Provenance]
    #: the counter source it counts with, by name, built with it (``counter_source``);
    #: None: none, unless its board's record names one (``TargetSpec.counters``)
    counts_with: ClassVar[str | None] = None
    #: RAM and flash budgeted against the hardware model's memories (a firmware); False for
    #: a program an OS runs and sizes (the host: its model is not even loaded for it)
    fixed_memories: ClassVar[bool] = True
    #: name and unit under which the program's "cycles" counter is reported
    cycle_metric: ClassVar[tuple[str, str]] = ("cycles", "cycles")
    #: width of the hardware counter behind the program's "cycles" (32 for DWT CYCCNT);
    #: None when the figure is not a wrapping hardware counter (no wrap rule applies)
    cycle_counter_bits: ClassVar[int | None] = None
    #: RAM per timed iteration of its benchmark entry (8 B for Aidge's; bounds --iterations)
    benchmark_bytes_per_iteration: ClassVar[int] = 8

    @classmethod
    def spec_attributes(cls, spec: TargetSpec) -> dict[str, Any]:
        """The class attributes a target made from ``spec`` with this implementation sets
        (an emulated board's QEMU descriptor): none by default."""
        return {}

    def convert_cycles(self, value: float) -> float:
        """Map a raw counter value printed by the program to ``cycle_metric`` units."""
        return value

    def run_times(self, parsed: ProtocolResult, app_config: Mapping[str, Any] | None) -> RunTimes:
        """The run's times and how they were obtained (``timing.TimingInfo``).

        Real targets report the program's own readings, with the step of the protocol's
        timer; an emulated board overrides this to report instructions ÷ core clock.
        """
        from aidge_deploy.protocols.registry import get_protocol
        from aidge_deploy.timing import RunTimes, protocol_timing

        info = protocol_timing(
            get_protocol(parsed.protocol).timer,
            self.timing_provenance,
            parsed.timings_ms,
            app_config,
            has_layer_times=bool(parsed.layer_times_ms),
        )
        return RunTimes(info, parsed.timings_ms, parsed.layer_times_ms)

    def __init__(self, config: DeployConfig | None = None) -> None:
        from aidge_deploy.config import DeployConfig

        self.config = (
            config
            if config is not None
            else DeployConfig(target=self.target_name, backend=self.backend_name)
        )

    @cached_property
    def hardware_target(self) -> Any:
        """The hardware-model object of this target (built once per instance)."""
        return self.hardware_target_class()

    def memory_capacities(self) -> tuple[MemoryCapacity, ...]:
        """The flash and RAM the program must fit (none when the operating system sizes
        it): the hardware model's memories, unless a target knows them more cheaply."""
        if not self.fixed_memories:
            return ()
        from aidge_deploy.profiling.binary import memory_capacities

        return memory_capacities(self.hardware_target)

    def preflight(self) -> list[ToolCheck]:
        """What this target needs on this machine for this config (``doctor`` lists it for
        each of ``variants``); a missing one stops the deploy in Preflight, in the words
        ``doctor`` prints."""
        return []

    def run_needs(self) -> list[str]:
        """What a run needs that only the run can provide (a board's address, a probe
        plugged in): ``doctor`` lists it beside the readiness."""
        return []

    @classmethod
    def variants(cls) -> dict[str, dict[str, Any]]:
        """The ways of running this target whose needs differ, for ``doctor``: the options
        that select one (``--cross-compile``) -> the ``DeployConfig`` values they set."""
        return {"": {}}

    def check_config(self) -> None:  # noqa: B027 - optional hook
        """Raise ``ConfigError`` when the session config lacks what this target needs."""

    @abstractmethod
    def prepare(self, ctx: DeployContext) -> None:
        """Read manifest and runtime settings; create the build location."""

    @abstractmethod
    def build(self, ctx: DeployContext) -> BuildResult:
        """Compile the export (or reuse an identical build)."""

    @abstractmethod
    def execute(self, ctx: DeployContext, build: BuildResult) -> ExecutionResult:
        """Run the artifact on the target and capture its output."""

    @abstractmethod
    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        """Turn the captured output into a protocol result."""

    def cleanup(self, ctx: DeployContext) -> None:  # noqa: B027 - optional hook
        """Release resources (remote workdirs, processes); called even after a failure."""


class TransferableTarget(ABC):
    """Mixin: the artifact (or the export) must be copied to a remote host first."""

    @abstractmethod
    def transfer(self, ctx: DeployContext, build: BuildResult) -> None: ...


class FlashableTarget(ABC):
    """Mixin: the firmware must be programmed into the device before it runs."""

    @abstractmethod
    def flash(self, ctx: DeployContext, build: BuildResult) -> None: ...


class RemoteBuildTarget(ABC):
    """Mixin: the build happens on a remote machine; ``build_remote`` replaces ``build``."""

    @abstractmethod
    def build_remote(self, ctx: DeployContext) -> BuildResult: ...

    def builds_remotely(self) -> bool:
        """Whether this run builds remotely (a target may also offer a local cross build)."""
        return True


class RemoteBackend(ABC):
    """A backend that runs the whole deploy elsewhere and hands back its ``DeployResult``
    (the board farm's ``api``): ``deploy()`` gives it the export and the config, and no
    local stage runs. One class serves every target; an instance is bound to one target.

    Registered once per backend name (``register_remote_backend``); the registry lists
    ``(target, backend)`` for every target that has a local implementation, whose hardware
    facts it shares.
    """

    backend_name: ClassVar[str]
    description: ClassVar[str] = ""
    #: the whole deploy runs elsewhere: its jobs wait in a lane of their own
    reach: ClassVar[BackendCaps] = BackendCaps(
        remote=True, lane=Lane.REMOTE, options=(FarmOptions,)
    )

    def __init__(self, target: str, config: DeployConfig | None = None) -> None:
        from aidge_deploy.config import DeployConfig

        self.target_name = target
        self.config = config if config is not None else DeployConfig(target=target)

    @property
    def local_target_class(self) -> type[DeployTarget]:
        """The target's own implementation (its hardware model and memories)."""
        return local_target_class(self.target_name)

    def memory_capacities(self) -> tuple[MemoryCapacity, ...]:
        return self.local_target_class(self.config).memory_capacities()

    def check_config(self) -> None:  # noqa: B027 - optional hook
        """Raise ``ConfigError`` when the session config lacks what this backend needs."""

    def preflight(self) -> list[ToolCheck]:
        """What this machine needs to use the backend (``doctor`` lists it)."""
        return []

    def run_needs(self) -> list[str]:
        """What a run through this backend needs that only the run provides (``doctor``)."""
        return []

    @abstractmethod
    def deploy(
        self,
        artifact: Export,
        *,
        work_dir: Path,
        progress: ProgressCallback | None = None,
    ) -> DeployResult:
        """Run the deploy of ``artifact`` elsewhere; the result, as a local deploy's."""


T = TypeVar("T", bound=type[DeployTarget])
R = TypeVar("R", bound=type[RemoteBackend])


def _target_key(target: str, backend: str) -> str:
    """The name of ``(target, backend)`` in the registry and its entry points: ``host/local``."""
    return f"{target.lower()}/{backend.lower()}"


def _split_pair(name: str) -> tuple[str, str]:
    target, _, backend = name.partition("/")
    if not (target and backend):
        raise ConfigError(
            f"Deploy target entry point {name!r} is not named TARGET/BACKEND",
            hint='Name it after the pair it registers, e.g. "my-board/local".',
        )
    return target, backend


def _name_target(name: str, cls: type) -> None:
    """A target class carries its pair (``target_name``, ``backend_name``), the name it is
    registered under; a class registered under another pair is refused."""
    target, backend = _split_pair(name)
    own = cls.__dict__
    registered = f"{own.get('target_name')}/{own.get('backend_name')}"
    if "target_name" in own and registered != name:
        raise ConfigError(
            f"Deploy target entry point {name!r} names {cls.__qualname__}, registered as "
            f"{registered}",
            hint="Name the entry point after the pair the class registers.",
        )
    cls.target_name = target  # type: ignore[attr-defined]
    cls.backend_name = backend  # type: ignore[attr-defined]


def _check_target(name: str, cls: type) -> None:
    """A target declares what its figures are; its hardware model is resolved now when
    ``aidge_core`` is already imported (a plug-in registering its board with it: an unknown
    target is refused here), else on first access."""
    for attribute in ("timing_provenance", "counter_provenance"):
        declared = getattr(cls, attribute, None)
        if not isinstance(declared, Provenance):
            raise ConfigError(
                f"Deploy target {cls.__qualname__} ({name}) does not declare what its "
                f"figures are ({attribute} = {declared!r})",
                hint=f"Set the class attribute {attribute} to a Provenance "
                f"({', '.join(p.value for p in Provenance)}).",
            )
    hw_class: type | None = None
    if "aidge_core.hw_model" in sys.modules and cls.hardware_model_module is None:  # type: ignore[attr-defined]
        hw_class = resolve_hardware_class(
            cls.hardware_model or name.partition("/")[0]  # type: ignore[attr-defined]
        )
    cls._hardware_class = hw_class  # type: ignore[attr-defined]
    if "spec" not in cls.__dict__:  # a class of its own: the board's record, if it has one
        target, backend = _split_pair(name)
        spec = board_spec(target)
        # (not a parent's: a plug-in's subclass of the host target is not the host)
        cls.spec = spec if spec is not None and backend in spec.backends else None  # type: ignore[attr-defined]


#: (kind, backend) -> the implementation a board of that kind is deployed with there, and
#: the attributes its targets set (the host over SSH is this machine: its figures are)
IMPLEMENTATIONS: dict[tuple[TargetKind, str], tuple[str, dict[str, Any]]] = {
    (TargetKind.HOST, "local"): ("aidge_deploy.boards.host.local:HostLocalTarget", {}),
    (TargetKind.HOST, "ssh"): (
        "aidge_deploy.boards.sbc.base:SbcSshTarget",
        {"timing_provenance": Provenance.HOST, "counter_provenance": Provenance.HOST},
    ),
    (TargetKind.HOST, "ssh_docker"): (
        "aidge_deploy.boards.sbc.base:SbcSshDockerTarget",
        {"timing_provenance": Provenance.HOST, "counter_provenance": Provenance.HOST},
    ),
    (TargetKind.LINUX_BOARD, "ssh"): ("aidge_deploy.boards.sbc.base:SbcSshTarget", {}),
    (TargetKind.LINUX_BOARD, "ssh_docker"): (
        "aidge_deploy.boards.sbc.base:SbcSshDockerTarget",
        {},
    ),
    (TargetKind.EMULATED_MCU, "local"): (
        "aidge_deploy.boards.baremetal.qemu.targets:QemuBoardTarget",
        {},
    ),
    (TargetKind.MCU, "local"): ("aidge_deploy.boards.baremetal.probe:ProbeBoardTarget", {}),
}


def _class_name(spec: TargetSpec, backend: str) -> str:
    words = f"{spec.name} {backend}".replace("-", " ").replace("_", " ").replace(".", " ")
    return "".join(w[:1].upper() + w[1:] for w in words.split()) + "Target"


def _import(where: str) -> Any:
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


def target_from_spec(spec: TargetSpec, backend: str) -> type[DeployTarget]:
    """The deploy target of board ``spec`` through ``backend``: a subclass of its kind's
    implementation there, carrying the record (made once, then registered)."""
    key = _target_key(spec.name, backend)
    made = TARGETS.registered().get(key)
    if made is not None:
        return made
    implementation = IMPLEMENTATIONS.get((spec.kind, backend))
    if implementation is None or backend not in spec.backends:
        ways = sorted(b for k, b in IMPLEMENTATIONS if k is spec.kind)
        raise ConfigError(
            f"Board {spec.name!r} ({spec.kind}) has no implementation for backend {backend!r}",
            hint=f"A {spec.kind} board is reached through {', '.join(ways)}: name those in "
            "its record's backends, or register a class for the pair "
            "(register_deploy_target).",
        )
    where, attributes = implementation
    base: type[DeployTarget] = _import(where)
    made = TARGETS.registered().get(key)  # importing the implementation registered it
    if made is not None:
        return made
    name = _class_name(spec, backend)
    namespace: dict[str, Any] = {
        "__module__": base.__module__,
        "__qualname__": name,
        "__doc__": f"{spec.name} ({spec.kind}) through {backend}, made from its record.",
        **attributes,
        **dict(spec.settings),
        **base.spec_attributes(spec),
        "spec": spec,
        "runs_heterogeneous": spec.runs_heterogeneous,
    }
    if spec.hardware_model is not None:
        namespace["hardware_model"] = spec.hardware_model
    if spec.hardware_model_module is not None:
        namespace["hardware_model_module"] = spec.hardware_model_module
    if spec.description:
        namespace["description"] = spec.description
    cls = type(name, (base,), namespace)  # a counter source the record names is built with it
    TARGETS.register(key, TARGETS.adopt(key, cls))
    return cls


class _TargetRegistry(Registry[type[DeployTarget]]):
    """The targets: the classes declared or registered for a pair, and the pairs of every
    board record (``aidge_deploy.boards``) no class is declared for, made on first use."""

    def declared(self, *, everywhere: bool = True) -> dict[str, Declared]:
        classes = super().declared(everywhere=everywhere)
        made: dict[str, Declared] = {}
        for spec, distribution in board_records(everywhere=everywhere):
            for backend in spec.backends:
                key = _target_key(spec.name, backend)
                if key in classes or key in made:
                    continue
                made[key] = Declared(
                    key,
                    f"the {spec.kind} board record {spec.name!r}",
                    distribution,
                    None,
                    loader=functools.partial(target_from_spec, spec, backend),
                )
        return {**made, **classes}


#: ``TARGET/BACKEND`` -> the class that deploys there (entry points ``aidge_deploy.targets``,
#: and the pairs of the board records of ``aidge_deploy.boards``)
TARGETS: Registry[type[DeployTarget]] = _TargetRegistry(
    "targets", DeployTarget, name_onto=_name_target, check=_check_target
)


#: backends that run the whole deploy elsewhere (``RemoteBackend``), by backend name, for
#: every target (entry points ``aidge_deploy.remote_backends``: ``api = ...farm.remote:...``)
REMOTE_BACKENDS: Registry[type[RemoteBackend]] = Registry(
    "remote_backends", RemoteBackend, name_attribute="backend_name"
)


def register_remote_backend(backend: str) -> Callable[[R], R]:
    """Class decorator registering a ``RemoteBackend`` under ``backend`` (for every target)."""
    return REMOTE_BACKENDS.registering(backend.lower())


def remote_backend(backend: str) -> type[RemoteBackend] | None:
    """The ``RemoteBackend`` registered under ``backend``, or None (a local-pipeline backend).

    Only the entry point of that name is loaded (an ``api`` deploy imports no board module);
    our own targets' backends are answered without scanning every installed distribution.
    """
    name = backend.lower()
    found = REMOTE_BACKENDS.find(name, everywhere=False)
    if found is not None or name in (Backend.LOCAL, Backend.SSH, Backend.SSH_DOCKER):
        return found
    own = {key.partition("/")[2] for key in TARGETS.declared(everywhere=False)}
    return None if name in own else REMOTE_BACKENDS.find(name)


def register_deploy_target(target: str, backend: str) -> Callable[[T], T]:
    """Class decorator registering a deploy implementation for ``(target, backend)``.

    ``hardware_target_class`` is ``target`` resolved through
    ``aidge_core.hw_model.get_target_class()``: when ``aidge_core`` is already imported
    (a plug-in registering its board with it), now, so an unknown target is refused here;
    otherwise (the built-in targets, and a target naming its ``hardware_model_module``)
    on first access. A plug-in also declares the class as an entry point of the group
    ``aidge_deploy.targets`` named ``TARGET/BACKEND``, so that it is found without being
    imported first (``aidge-deploy targets``, a deploy naming it).
    """
    return TARGETS.registering(_target_key(target, backend))


#: what a ``(target, backend)`` pair of the registry maps to
TargetImplementation = type[DeployTarget] | type[RemoteBackend]


def _pairs(load: bool) -> dict[tuple[str, str], type[DeployTarget]]:
    items = TARGETS.all() if load else TARGETS.registered()
    return {(cls.target_name, cls.backend_name): cls for cls in items.values()}


def registered_targets(load: bool = True) -> dict[tuple[str, str], TargetImplementation]:
    """All registered ``(target, backend)`` pairs, sorted: the local implementations, and
    each remote backend for every target that has one."""
    local = _pairs(load)
    remotes = REMOTE_BACKENDS.all() if load else REMOTE_BACKENDS.registered()
    pairs: dict[tuple[str, str], TargetImplementation] = dict(local)
    for target in {t for t, _ in local}:
        for name, remote in remotes.items():
            pairs.setdefault((target, name), remote)
    return dict(sorted(pairs.items()))


def target_classes(target: str) -> list[type[DeployTarget]]:
    """Every implementation of ``target`` (each backend), loading only its entry points."""
    prefix = f"{target.lower()}/"
    found = [TARGETS.find(name) for name in TARGETS.names() if name.startswith(prefix)]
    return [cls for cls in found if cls is not None]


def local_target_class(target: str) -> type[DeployTarget]:
    """The implementation of ``target`` its remote backends share facts with: its
    ``local`` one, else the first registered (``ConfigError`` for an unknown target)."""
    found = TARGETS.find(_target_key(target, "local"))
    if found is None:
        name = _canonical(target)
        found = TARGETS.find(_target_key(name, "local")) or next(iter(target_classes(name)), None)
    if found is None:
        raise _unknown_target(target)
    return found


def get_deploy_target_class(target: str, backend: str) -> TargetImplementation:
    """The class registered for ``(target, backend)``; ``ConfigError`` says what to use instead:
    a close target name for a typo, the backends (and options) a known target needs."""
    remote = remote_backend(backend)
    if remote is not None:
        local_target_class(target)  # a known target (did-you-mean otherwise)
        return remote
    return pipeline_target_class(target, backend)


def pipeline_target_class(target: str, backend: str) -> type[DeployTarget]:
    """The local-pipeline implementation of ``(target, backend)`` (``get_deploy_target_class``
    for a backend that is not remote). Only the entry point of that pair is loaded: a host
    run imports the host target's module, an emulated board's run its own module only."""
    cls = TARGETS.find(_target_key(target, backend))
    if cls is not None:
        return cls
    name = _canonical(target)  # an alias of a known target
    cls = TARGETS.find(_target_key(name, backend))
    if cls is not None:
        return cls
    same_target = sorted(
        {c.backend_name for c in target_classes(name)}
        | (set(REMOTE_BACKENDS.names()) if _known(name) else set())
    )
    if same_target:
        needs = {
            "ssh": "--backend ssh with --ssh-host (and --ssh-user, --ssh-key-path)",
            "ssh_docker": "--backend ssh_docker with --ssh-host and --docker-image",
            "local": "--backend local",
            "api": "--backend api with --api-url",
        }
        ways = "; or ".join(needs.get(b, f"--backend {b}") for b in same_target)
        raise ConfigError(
            f"Target {name!r} cannot be reached with backend {backend!r} "
            f"(its backends: {', '.join(same_target)})",
            hint=f"Use {ways}.",
        )
    raise _unknown_target(target)


def _target_names() -> list[str]:
    return sorted({name.partition("/")[0] for name in TARGETS.names()})


def _known(target: str) -> bool:
    return target in _target_names()


def _unknown_target(target: str) -> ConfigError:
    targets = _target_names()
    close = difflib.get_close_matches(_canonical(target), targets, n=3, cutoff=0.6)
    suggestion = f"Did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return ConfigError(
        f"Unknown target {target!r}",
        hint=f"{suggestion}`aidge-deploy targets` lists them: {', '.join(targets)}.",
    )


def get_deploy_target(
    target: str, backend: str = "local", config: DeployConfig | None = None
) -> DeployTarget | RemoteBackend:
    """Instantiate the deploy implementation registered for ``(target, backend)``: a local
    ``DeployTarget``, or a ``RemoteBackend`` bound to ``target``."""
    remote = remote_backend(backend)
    if remote is not None:
        local_target_class(target)
        return remote(target.lower(), config)
    return pipeline_target_class(target, backend)(config)


def get_pipeline_target(
    target: str, backend: str = "local", config: DeployConfig | None = None
) -> DeployTarget:
    """The local-pipeline implementation of ``(target, backend)``, instantiated."""
    return pipeline_target_class(target, backend)(config)


def _canonical(target: str) -> str:
    name = target.lower()
    if _known(name):
        return name
    from aidge_deploy.artifact import canonical_target

    return canonical_target(name)


__all__ = [
    "BOARDS",
    "IMPLEMENTATIONS",
    "REMOTE_BACKENDS",
    "TARGETS",
    "DeployTarget",
    "FlashableTarget",
    "RemoteBackend",
    "RemoteBuildTarget",
    "TargetImplementation",
    "ToolCheck",
    "TransferableTarget",
    "board_spec",
    "get_deploy_target",
    "get_deploy_target_class",
    "get_pipeline_target",
    "hardware_model_of",
    "local_target_class",
    "pipeline_target_class",
    "register_board",
    "register_deploy_target",
    "register_remote_backend",
    "registered_targets",
    "remote_backend",
    "target_classes",
    "target_from_spec",
]
