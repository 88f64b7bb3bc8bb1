"""One shape for every extension point: a registry of named classes, fed by entry points.

Each extension point is named once, in ``KINDS``: what its things are, the contract (the
class) they implement, its entry-point group ``aidge_deploy.<key>`` and its ``Registry``.
A registry maps a name to a class of the contract, and a distribution adds classes by
declaring Python entry points in the group — pytest's ``pytest11`` model: a plug-in is
found by being installed, never by a list in this program. aidge-deploy declares its own
things the same way in its ``pyproject.toml``, so built-in and third-party things are found,
listed (``aidge-deploy targets``, ``doctor``, the docs) and checked alike.

The entry-point name is the registered name: an entry point names the class
(``"host/local" = "aidge_deploy.boards.host.local:HostLocalTarget"``), loaded by name on
first use (a host run imports the host target's module and no other), and every registry
adopts it by one rule (``Registry.adopt``): a class of the kind's contract, given the name it
is registered under (a class that says another name is refused), passing the kind's own
check. The decorators (``register_deploy_target`` ...) register a class in-process by the
same rule. The entry points of aidge-deploy itself are read first (one file); all installed
distributions are scanned only for a name it does not declare, or to list everything.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from aidge_deploy.errors import ConfigError

#: the distribution whose entry points declare the built-in things
DISTRIBUTION = "aidge-deploy"


@dataclass(frozen=True)
class ExtensionKind:
    """One extension point, named once: its things implement ``contract``, are declared
    in the entry-point group ``aidge_deploy.<key>`` and are found in ``registry``; the
    name of an entry point is the name its thing is registered, listed and asked for by."""

    #: ``flashers``: the group's suffix and the key of ``KINDS``
    key: str
    #: what one thing is, for people: "flasher"
    thing: str
    #: the class every thing of this kind subclasses (``module:Class``)
    contract: str
    #: the registry that holds them (``module:NAME``)
    registry: str
    #: what the registered name is, for people ("the --flash-method NAME")
    name_is: str

    @property
    def group(self) -> str:
        return f"aidge_deploy.{self.key}"


#: every extension point, in the order reports list them
KINDS: dict[str, ExtensionKind] = {
    kind.key: kind
    for kind in (
        ExtensionKind(
            "targets",
            "deploy target",
            "aidge_deploy.registry:DeployTarget",
            "aidge_deploy.registry:TARGETS",
            "TARGET/BACKEND, the pair --target and --backend name",
        ),
        ExtensionKind(
            "boards",
            "board record",
            "aidge_deploy.targetspec:TargetSpec",
            "aidge_deploy.registry:BOARDS",
            "the board's --target NAME (a TargetSpec: its deploy targets are made from it)",
        ),
        ExtensionKind(
            "remote_backends",
            "remote backend",
            "aidge_deploy.registry:RemoteBackend",
            "aidge_deploy.registry:REMOTE_BACKENDS",
            "the --backend name it answers, for every target",
        ),
        ExtensionKind(
            "protocols",
            "protocol",
            "aidge_deploy.protocols.base:OutputProtocol",
            "aidge_deploy.protocols.registry:PROTOCOLS",
            "the manifest's protocol",
        ),
        ExtensionKind(
            "flashers",
            "flasher",
            "aidge_deploy.flash.registry:Flasher",
            "aidge_deploy.flash.registry:FLASHERS",
            "the --flash-method NAME",
        ),
        ExtensionKind(
            "counters",
            "counter source",
            "aidge_deploy.profiling.capability:CounterSource",
            "aidge_deploy.profiling.capability:COUNTER_SOURCES",
            "the source a target counts with (--counters picks its counters)",
        ),
        ExtensionKind(
            "power_monitors",
            "power monitor",
            "aidge_deploy.power.registry:MonitorKind",
            "aidge_deploy.power.registry:POWER_MONITORS",
            "the --power NAME",
        ),
    )
}
#: the entry-point group of each extension point
GROUPS = {key: kind.group for key, kind in KINDS.items()}


def registries() -> tuple[Registry[Any], ...]:
    """Every extension point's registry, in the order of ``KINDS`` (each module imported)."""
    found = []
    for kind in KINDS.values():
        module, _, name = kind.registry.partition(":")
        found.append(getattr(importlib.import_module(module), name))
    return tuple(found)


@dataclass(frozen=True)
class Declared:
    """One entry point: a name in a group, the object it names, and who declares it."""

    name: str
    value: str
    distribution: str
    entry_point: importlib.metadata.EntryPoint | None
    #: how the thing is made when it is derived, not named by an entry point (a deploy
    #: target made from a board record of ``aidge_deploy.boards``)
    loader: Callable[[], object] | None = None

    def load(self) -> object:
        if self.loader is not None:
            return self.loader()
        if self.entry_point is None:
            raise ValueError(f"{self.name}: neither an entry point nor a loader")
        return self.entry_point.load()


@cache
def _own_entry_points() -> tuple[importlib.metadata.EntryPoint, ...]:
    try:
        return tuple(importlib.metadata.distribution(DISTRIBUTION).entry_points)
    except importlib.metadata.PackageNotFoundError:
        return ()


@cache
def _all_entry_points() -> tuple[tuple[importlib.metadata.EntryPoint, str], ...]:
    """Every entry point of our groups, with its distribution's name (one scan a process)."""
    found = []
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or "?"
        for ep in dist.entry_points:
            if ep.group in GROUPS.values():
                found.append((ep, name))
    return tuple(found)


def refresh() -> None:
    """Forget the entry points read so far (a distribution was installed meanwhile)."""
    _own_entry_points.cache_clear()
    _all_entry_points.cache_clear()


class Registry[T]:
    """Names to the classes of one extension kind, registered in-process or declared as
    entry points, all adopted by one rule (``adopt``): the thing is a class of the kind's
    contract (``base``), it carries the name it is registered under (``name_attribute``:
    written by the registry; a class that says another name is refused) and passes the
    kind's own ``check`` (a target declares its provenance...).
    """

    def __init__(
        self,
        kind: str,
        base: type | None,
        *,
        name_attribute: str | None = "name",
        name_onto: Callable[[str, type], None] | None = None,
        check: Callable[[str, type], None] | None = None,
        instances: bool = False,
    ) -> None:
        self.extension = KINDS[kind]
        #: what one thing is, for messages ("flasher")
        self.kind = self.extension.thing
        self.group = self.extension.group
        self._base = base
        self._name_attribute = name_attribute
        self._name_onto = name_onto
        self._check = check
        #: the things are instances of the contract (records), not classes
        self._instances = instances
        self._items: dict[str, T] = {}
        #: entry points that failed to load, by name: what ``doctor`` reports
        self.failures: dict[str, str] = {}

    def adopt(self, name: str, loaded: object) -> T:
        """``loaded`` (an entry point's object, or a decorated class) as the thing ``name``,
        checked; ``ConfigError`` says what is wrong with it."""
        base = self._base
        if self._instances:
            return self._adopt_instance(name, loaded)
        if not isinstance(loaded, type) or (base is not None and not issubclass(loaded, base)):
            what = base.__name__ if base is not None else "its contract's"
            raise ConfigError(
                f"The {self.kind} {name!r} names {loaded!r}, not a {what} class",
                hint=f"Point the {self.group} entry point at a {what} subclass "
                f"({self.extension.contract}).",
            )
        if self._name_onto is not None:
            self._name_onto(name, loaded)
        elif self._name_attribute is not None:
            own = loaded.__dict__.get(self._name_attribute, name)
            if own != name:
                raise ConfigError(
                    f"The {self.kind} class {loaded.__qualname__} is named {own!r}, its entry "
                    f"point {name!r}",
                    hint="The entry point's name is the registered name: drop the class's "
                    f"{self._name_attribute}, or make them agree.",
                )
            setattr(loaded, self._name_attribute, name)
        if self._check is not None:
            self._check(name, loaded)
        return loaded  # type: ignore[return-value]  # a class of the contract: T

    def _adopt_instance(self, name: str, loaded: object) -> T:
        """A record kind: ``loaded`` is an instance of the contract whose own name is
        ``name`` (records are frozen: the name is checked, not written)."""
        base = self._base
        if base is not None and not isinstance(loaded, base):
            raise ConfigError(
                f"The {self.kind} {name!r} names {loaded!r}, not a {base.__name__}",
                hint=f"Point the {self.group} entry point at a {base.__name__} "
                f"({self.extension.contract}).",
            )
        own = getattr(loaded, self._name_attribute or "name", name)
        if own != name:
            raise ConfigError(
                f"The {self.kind} {own!r} is declared by the entry point {name!r}",
                hint="The entry point's name is the registered name: make them agree.",
            )
        return loaded  # type: ignore[return-value]  # an instance of the contract: T

    def registering[C](self, name: str) -> Callable[[C], C]:
        """Class decorator: register the class under ``name``, checked as an entry point's."""

        def decorator(item: C) -> C:
            self.register(name, self.adopt(name, item))
            return item

        return decorator

    # -- registration ----------------------------------------------------------------------

    def register(self, name: str, item: T) -> None:
        existing = self._items.get(name)
        if existing is not None and _conflict(existing, item, instances=self._instances):
            raise ConfigError(
                f"{self.kind.capitalize()} {name!r} is registered twice: by "
                f"{_identity(existing)} and by {_identity(item)}",
                hint="Give one of them another name, or uninstall one of the plug-ins.",
            )
        self._items[name] = item

    def registered(self) -> dict[str, T]:
        """What is registered so far, without loading anything."""
        return dict(self._items)

    # -- entry points ----------------------------------------------------------------------

    def declared(self, *, everywhere: bool = True) -> dict[str, Declared]:
        """The entry points of this group by name: aidge-deploy's own, then (``everywhere``)
        every installed distribution's; a name two distributions declare is refused."""
        own = {
            ep.name: Declared(ep.name, ep.value, DISTRIBUTION, ep)
            for ep in _own_entry_points()
            if ep.group == self.group
        }
        if not everywhere:
            return own
        found: dict[str, Declared] = {}
        for ep, dist in _all_entry_points():
            if ep.group != self.group:
                continue
            other = found.get(ep.name)
            if other is not None and other.value != ep.value:
                raise ConfigError(
                    f"Two distributions declare the {self.kind} {ep.name!r}: "
                    f"{other.distribution} ({other.value}) and {dist} ({ep.value})",
                    hint=f"Uninstall one of them (entry-point group {self.group}).",
                )
            found[ep.name] = Declared(ep.name, ep.value, dist, ep)
        return {**found, **own}

    def names(self) -> list[str]:
        """Every name, registered or declared, without loading anything."""
        return sorted(set(self._items) | set(self.declared()))

    def find(self, name: str, *, everywhere: bool = True) -> T | None:
        """The thing called ``name``: registered, else loaded from its entry point (ours
        first, then, with ``everywhere``, any distribution's: a scan of every installed
        distribution, once a process); None when nothing has that name."""
        item = self._items.get(name)
        if item is not None:
            return item
        declared = self.declared(everywhere=False).get(name)
        if declared is None and everywhere:
            declared = self.declared().get(name)
        if declared is None:
            return None
        return self._load(declared)

    def all(self) -> dict[str, T]:
        """Every thing, each entry point loaded; one that fails to load is left out and its
        error kept in ``failures`` (a broken plug-in must not hide the others)."""
        for name, declared in self.declared().items():
            if name in self._items:
                continue
            try:
                self._load(declared)
            except ConfigError as exc:
                self.failures[name] = exc.message
        return dict(sorted(self._items.items()))

    def _load(self, declared: Declared) -> T:
        try:
            loaded = declared.load()
        except Exception as exc:  # a plug-in's import error is not ours to interpret
            raise ConfigError(
                f"The {self.kind} {declared.name!r} of {declared.distribution} cannot be "
                f"loaded ({declared.value}): {type(exc).__name__}: {exc}",
                hint=f"Reinstall or uninstall {declared.distribution}.",
            ) from exc
        item = self._items.get(declared.name)
        if item is None:
            item = self.adopt(declared.name, loaded)
            self.register(declared.name, item)
        return item

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def _conflict(existing: object, item: object, *, instances: bool) -> bool:
    """Whether registering ``item`` where ``existing`` is would replace another thing: a
    record is another when it differs, a class when it is another module's or name's."""
    if instances:
        return existing != item
    return _identity(existing) != _identity(item)


def _identity(item: object) -> str:
    """Who a registered thing is (module and qualified name): a module imported twice
    registers the same class again, which is not a conflict."""
    cls = item if isinstance(item, type) else type(item)
    return f"{cls.__module__}.{cls.__qualname__}"


__all__ = [
    "DISTRIBUTION",
    "GROUPS",
    "KINDS",
    "Declared",
    "ExtensionKind",
    "Registry",
    "refresh",
    "registries",
]
