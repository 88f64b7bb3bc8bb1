"""One shape for every extension point: a registry of named things, fed by entry points.

Deploy targets, output protocols, flashers, power monitors and counter sources are each a
``Registry``: a name maps to a thing (a class, or a parser instance), and a distribution adds
things by declaring Python entry points in the group ``aidge_deploy.<kind>`` — pytest's
``pytest11`` model: a plug-in is found by being installed, never by a list in this program.
aidge-deploy declares its own things the same way in its ``pyproject.toml``, so built-in and
third-party things are found, listed (``aidge-deploy targets``, ``doctor``, the docs) and
checked alike.

An entry point names the object (``"host/local" = "aidge_deploy.boards.host.local:HostLocalTarget"``)
and is loaded by name, on first use: a host run imports the host target's module and no
other. Loading imports the module; a class that registers itself there (the documented
decorators, ``register_deploy_target`` ...) is already in the registry, and one that does not
is adopted by the registry's own check (the same the decorator does). The entry points of
aidge-deploy itself are read first (one file); all installed distributions are scanned only
for a name it does not declare, or to list everything.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from aidge_deploy.errors import ConfigError

#: the distribution whose entry points declare the built-in things
DISTRIBUTION = "aidge-deploy"
#: the entry-point group of each extension point
GROUPS = {
    "targets": "aidge_deploy.targets",
    "protocols": "aidge_deploy.protocols",
    "flashers": "aidge_deploy.flashers",
    "power_monitors": "aidge_deploy.power_monitors",
    "counters": "aidge_deploy.counters",
    # backends that run the whole deploy elsewhere, for every target (the farm's api)
    "remote_backends": "aidge_deploy.remote_backends",
}


@dataclass(frozen=True)
class Declared:
    """One entry point: a name in a group, the object it names, and who declares it."""

    name: str
    value: str
    distribution: str
    entry_point: importlib.metadata.EntryPoint

    def load(self) -> object:
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
    """Names to things of one kind, registered in-process or declared as entry points.

    ``adopt(name, loaded)`` turns the object an entry point names into the registered thing
    (checking it as registration does) when loading its module did not register it.
    """

    def __init__(self, kind: str, group: str, adopt: Callable[[str, object], T]) -> None:
        self.kind = kind
        self.group = group
        self._adopt = adopt
        self._items: dict[str, T] = {}
        #: entry points that failed to load, by name: what ``doctor`` reports
        self.failures: dict[str, str] = {}

    @classmethod
    def of_subclasses(
        cls, kind: str, group: str, base: type, *, named: bool = False
    ) -> Registry[Any]:
        """A registry of subclasses of ``base``; with ``named``, a class's ``name`` attribute
        is the name it is registered under (set, or checked when the class sets it)."""

        def adopt(name: str, loaded: object) -> type:
            if not (isinstance(loaded, type) and issubclass(loaded, base)):
                raise ConfigError(
                    f"The {kind} {name!r} names {loaded!r}, not a {base.__name__} class",
                    hint=f"Point the {group} entry point at a {base.__name__} subclass.",
                )
            if named:
                own = getattr(loaded, "name", name)
                if own != name:
                    raise ConfigError(
                        f"The {kind} class {loaded.__qualname__} is named {own!r}, its entry "
                        f"point {name!r}",
                        hint="The entry point's name and the class's name attribute must agree.",
                    )
                setattr(loaded, "name", name)  # noqa: B010 - a ClassVar of the subclass
            return loaded

        return Registry(kind, group, adopt)

    def registering[C](self, name: str) -> Callable[[C], C]:
        """Class decorator: register the class under ``name``, checked as an entry point's."""

        def decorator(item: C) -> C:
            self.register(name, self._adopt(name, item))
            return item

        return decorator

    # -- registration ----------------------------------------------------------------------

    def register(self, name: str, item: T) -> None:
        existing = self._items.get(name)
        if existing is not None and _identity(existing) != _identity(item):
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
            item = self._adopt(declared.name, loaded)
            self.register(declared.name, item)
        return item

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def _identity(item: object) -> str:
    """Who a registered thing is (module and qualified name): a module imported twice
    registers the same class again, which is not a conflict."""
    cls = item if isinstance(item, type) else type(item)
    return f"{cls.__module__}.{cls.__qualname__}"


__all__ = ["DISTRIBUTION", "GROUPS", "Declared", "Registry", "refresh"]
