"""Protocol registry: the manifest's ``protocol`` string selects the parser.

One ``extensions.Registry`` (entry-point group ``aidge_deploy.protocols``): a protocol is a
class whose instance parses (``OutputProtocol``), declared by name as an entry point and
imported when a manifest first names it. ``register_protocol`` registers a class in-process
(the built-in parsers use it in their modules, which their entry points name). The registry
is the single source of which protocols exist; ``aidge-deploy targets`` and the docs list it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from aidge_deploy.errors import ConfigError, ProtocolError
from aidge_deploy.extensions import GROUPS, Registry
from aidge_deploy.protocols.base import OutputProtocol

P = TypeVar("P", bound=type)


def _instance(name: str, cls: object) -> OutputProtocol:
    """The parser a protocol class provides, checked: it parses and carries its own name."""
    if not isinstance(cls, type):
        raise ConfigError(
            f"Protocol {name!r} names {cls!r}, not a class",
            hint="Point the aidge_deploy.protocols entry point at the parser class.",
        )
    instance = cls()
    if not isinstance(instance, OutputProtocol):
        raise ConfigError(
            f"Protocol class {cls.__qualname__} does not implement OutputProtocol",
            hint="Give it name, interactive, end_markers, parse() and drive().",
        )
    if instance.name != name:
        raise ConfigError(
            f"Protocol class {cls.__qualname__} must set name = {name!r} (it says "
            f"{instance.name!r})",
            hint="The entry point's name and the class's name attribute must agree.",
        )
    return instance


PROTOCOLS: Registry[OutputProtocol] = Registry("protocol", GROUPS["protocols"], _instance)


def register_protocol(name: str) -> Callable[[P], P]:
    """Class decorator: instantiate the class and register it under ``name``."""

    def decorator(cls: P) -> P:
        PROTOCOLS.register(name, _instance(name, cls))
        return cls

    return decorator


def get_protocol(name: str) -> OutputProtocol:
    """Return the parser for ``name`` or raise ``ProtocolError`` listing the known ones."""
    found = PROTOCOLS.find(name)
    if found is None:
        known = ", ".join(PROTOCOLS.names()) or "none"
        raise ProtocolError(
            f"No parser for output protocol {name!r}",
            hint=f"Known protocols: {known}. Upgrade aidge-deploy, install the plug-in that "
            "parses it, or fix the manifest's 'protocol'.",
        )
    return found


def list_protocols() -> list[OutputProtocol]:
    return list(PROTOCOLS.all().values())


__all__ = ["PROTOCOLS", "get_protocol", "list_protocols", "register_protocol"]
