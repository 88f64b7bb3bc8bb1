"""Protocol registry: the manifest's ``protocol`` string selects the parser.

One ``extensions.Registry`` (entry-point group ``aidge_deploy.protocols``): a protocol is a
class whose instance parses (``OutputProtocol``), declared by name as an entry point and
imported when a manifest first names it; ``get_protocol`` gives its parser (one per class).
``register_protocol`` registers a class in-process (a plug-in without an entry point). The registry
is the single source of which protocols exist; ``aidge-deploy targets`` and the docs list it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from aidge_deploy.errors import ConfigError, ProtocolError
from aidge_deploy.extensions import Registry
from aidge_deploy.protocols.base import OutputProtocol

P = TypeVar("P", bound=type)


def _check_parser(name: str, cls: type) -> None:
    """A protocol class makes a parser: it implements ``OutputProtocol``."""
    if not isinstance(_parser(cls), OutputProtocol):
        raise ConfigError(
            f"Protocol class {cls.__qualname__} does not implement OutputProtocol",
            hint="Give it name, interactive, end_markers, timer, parse() and drive().",
        )


#: the manifest's protocol -> the parser class (entry points ``aidge_deploy.protocols``)
PROTOCOLS: Registry[type[OutputProtocol]] = Registry("protocols", None, check=_check_parser)
#: one parser per class: a parser holds no state of a run
_PARSERS: dict[type, OutputProtocol] = {}


def _parser(cls: type) -> OutputProtocol:
    parser = _PARSERS.get(cls)
    if parser is None:
        parser = _PARSERS[cls] = cls()
    return parser


def register_protocol(name: str) -> Callable[[P], P]:
    """Class decorator: register the parser class under the protocol ``name``."""
    return PROTOCOLS.registering(name)


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
    return _parser(found)


def list_protocols() -> list[OutputProtocol]:
    return [_parser(cls) for cls in PROTOCOLS.all().values()]


__all__ = ["PROTOCOLS", "get_protocol", "list_protocols", "register_protocol"]
