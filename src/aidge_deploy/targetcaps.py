"""What a deploy target can do, as data: ``target_caps`` derives its ``TargetCaps`` once.

Why this module exists: a stage, a listing, a campaign or a check that needs to know whether
a target transfers, flashes, builds on the board, counts events, measures energy, runs on
this machine or elsewhere used to test the target's class (``isinstance(target,
PowerCapableTarget)``) or its name (``target == "host"``, ``backend in ("ssh",
"ssh_docker")``). They ask its capabilities instead, and this is the one place they are
derived, from three declarations:

* the board's record (``aidge_deploy.targetspec.TargetSpec``): its kind, the counter source
  it names, the power ability it withholds, its lane;
* the backend's ``BackendCaps`` (``DeployTarget.reach``, ``RemoteBackend.reach``): a process
  of this machine, a board of its own, over SSH, in a container, the whole deploy elsewhere;
* the implementation's class: the mixins it adopts (``TransferableTarget``,
  ``FlashableTarget``, ``RemoteBuildTarget``, a ``PowerCapableTarget``) and the counter
  source it names (``counts_with``), so that a third party's class registered with
  ``register_deploy_target`` has its capabilities without declaring them twice.

A counter source is composed with the target, never inherited: ``counter_source(target)``
builds the named source with the target it counts for.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, cast

from aidge_deploy.errors import ConfigError
from aidge_deploy.power.capability import PowerCapableTarget
from aidge_deploy.profiling.capability import COUNTER_SOURCES, CounterSource
from aidge_deploy.registry import (
    DeployTarget,
    FlashableTarget,
    RemoteBackend,
    RemoteBuildTarget,
    TransferableTarget,
    local_target_class,
)
from aidge_deploy.targetspec import (
    DEFAULT_LANES,
    Lane,
    PowerAbility,
    TargetCaps,
    TargetSpec,
    WindowRule,
)

if TYPE_CHECKING:
    from aidge_deploy.registry import TargetImplementation


def target_caps(target: TargetImplementation | DeployTarget | RemoteBackend) -> TargetCaps:
    """The capabilities of a deploy target or remote backend (class or instance). A remote
    backend bound to a target has that target's kind; its class serves every kind."""
    if isinstance(target, RemoteBackend):
        caps = _caps(type(target))
        kind = _caps(local_target_class(target.target_name)).kind
        return TargetCaps(**{**_fields(caps), "kind": kind})
    return _caps(target if isinstance(target, type) else type(target))


def pair_caps(target: str, backend: str) -> TargetCaps:
    """The capabilities of ``(target, backend)`` (``ConfigError`` for an unknown pair)."""
    from aidge_deploy.registry import get_deploy_target_class

    cls = get_deploy_target_class(target, backend)
    caps = _caps(cls)
    if caps.kind is None:  # a remote backend reaching this target
        caps = TargetCaps(**{**_fields(caps), "kind": _caps(local_target_class(target)).kind})
    return caps


def _fields(caps: TargetCaps) -> dict[str, Any]:
    return {name: getattr(caps, name) for name in TargetCaps.__dataclass_fields__}


@functools.cache
def _caps(cls: type) -> TargetCaps:
    if issubclass(cls, RemoteBackend):
        reach = cls.reach
        return TargetCaps(
            None,
            cls.backend_name,
            lane=reach.lane or Lane.REMOTE,
            remote=True,
            options=reach.options,
        )
    target = cast(type[DeployTarget], cls)
    spec = target.spec
    kind = spec.kind if spec is not None else target.target_kind
    reach = target.reach
    counters = _counters(target, spec)
    power, window = _power(target, spec)
    # the record's own lane, else the backend's, else its kind's
    lane = (spec.lane if spec is not None else None) or reach.lane or DEFAULT_LANES[kind]
    return TargetCaps(
        kind,
        target.backend_name,
        transfers=issubclass(target, TransferableTarget),
        flashes=issubclass(target, FlashableTarget),
        builds_remotely=issubclass(target, RemoteBuildTarget),
        counters=counters,
        power=power,
        power_window=window,
        lane=lane,
        runs_here=reach.runs_here,
        over_ssh=reach.over_ssh,
        in_container=reach.in_container,
        options=reach.options,
        own_hardware_model=target.hardware_model_module is not None,
    )


def _counters(cls: type[DeployTarget], spec: TargetSpec | None) -> str | None:
    """The counter source's name: the implementation's (``counts_with``), else the one its
    record names; ``ConfigError`` for a record naming a source that does not exist or one
    its kind's implementation already counts with another."""
    own = cls.counts_with
    named = spec.counters if spec is not None else None
    if named is None or named == own:
        return own
    if own is not None:
        raise ConfigError(
            f"Board {spec.name!r} names the counter source {named!r}, and its "  # type: ignore[union-attr]
            f"{cls.target_kind} implementation ({cls.__qualname__}) counts with {own!r}",
            hint="Leave counters out of the record: its kind's source counts.",
        )
    if COUNTER_SOURCES.find(named) is None:
        raise ConfigError(
            f"Board {cls.target_name!r} counts with {named!r}, which is no counter source",
            hint=f"The counter sources: {', '.join(COUNTER_SOURCES.names())}.",
        )
    return named


def _power(cls: type[DeployTarget], spec: TargetSpec | None) -> tuple[PowerAbility, WindowRule]:
    if not issubclass(cls, PowerCapableTarget):
        ability, window = PowerAbility.NONE, WindowRule.MATCH
    else:
        ability = PowerAbility.FIRMWARE_WINDOW if cls.power_variant else PowerAbility.REPEATED_RUN
        window = cls.power_window_rule
    wanted = spec.power if spec is not None else None
    if wanted is None or wanted is ability:
        return ability, window
    if wanted is PowerAbility.NONE:  # the record withholds what its kind could do
        return PowerAbility.NONE, WindowRule.MATCH
    raise ConfigError(
        f"Board {cls.target_name!r} declares power {wanted.value!r}, and its implementation "
        f"({cls.__qualname__}) measures {ability.value!r}",
        hint="A record can only withhold power (PowerAbility.NONE); leave it out otherwise.",
    )


def counter_source(target: DeployTarget) -> CounterSource[Any] | None:
    """What counts for ``target``: its counter source built with it, or None
    (``caps.counters`` is None)."""
    source = counter_source_class(type(target))
    return source(target) if source is not None else None


def counter_source_class(cls: type[DeployTarget]) -> type[CounterSource[Any]] | None:
    """The counter source class of a target class, for what is asked before a run
    (``counter_needs``, the counter domain)."""
    name = target_caps(cls).counters
    if name is None:
        return None
    source = COUNTER_SOURCES.find(name)
    if source is None:
        raise ConfigError(
            f"{cls.target_name}/{cls.backend_name} counts with {name!r}, which is no counter "
            "source",
            hint=f"The counter sources: {', '.join(COUNTER_SOURCES.names())}; "
            "`aidge-deploy doctor` lists the plug-ins that failed to load.",
        )
    return source


def power_target(target: DeployTarget) -> PowerCapableTarget | None:
    """``target`` as the runner of its power window, when its caps say it has one."""
    if target_caps(target).power is PowerAbility.NONE:
        return None
    return cast(PowerCapableTarget, target)


def transferring(target: DeployTarget) -> TransferableTarget | None:
    return cast(TransferableTarget, target) if target_caps(target).transfers else None


def flashing(target: DeployTarget) -> FlashableTarget | None:
    return cast(FlashableTarget, target) if target_caps(target).flashes else None


def building_remotely(target: DeployTarget) -> RemoteBuildTarget | None:
    """``target`` as its remote builder, when it may build remotely and this run does."""
    if not target_caps(target).builds_remotely:
        return None
    builder = cast(RemoteBuildTarget, target)
    return builder if builder.builds_remotely() else None


__all__ = [
    "building_remotely",
    "counter_source",
    "counter_source_class",
    "flashing",
    "pair_caps",
    "power_target",
    "target_caps",
    "transferring",
]
