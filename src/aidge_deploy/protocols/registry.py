"""Protocol registry: the manifest's ``protocol`` string selects the parser.

This table is the single source of truth for which protocols exist; ``aidge-deploy
targets`` and the docs list it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from aidge_deploy.errors import ProtocolError
from aidge_deploy.protocols.base import OutputProtocol

_PROTOCOLS: dict[str, OutputProtocol] = {}

P = TypeVar("P", bound=type)


def register_protocol(name: str) -> Callable[[P], P]:
    """Class decorator: instantiate the class and register it under ``name``."""

    def decorator(cls: P) -> P:
        instance = cls()
        if getattr(instance, "name", None) != name:
            raise ValueError(f"protocol class {cls.__name__} must set name = {name!r}")
        if name in _PROTOCOLS and type(_PROTOCOLS[name]) is not cls:
            raise ValueError(f"protocol {name!r} is already registered")
        _PROTOCOLS[name] = instance
        return cls

    return decorator


def get_protocol(name: str) -> OutputProtocol:
    """Return the parser for ``name`` or raise ``ProtocolError`` listing the known ones."""
    _load_builtin()
    try:
        return _PROTOCOLS[name]
    except KeyError:
        known = ", ".join(sorted(_PROTOCOLS)) or "none"
        raise ProtocolError(
            f"No parser for output protocol {name!r}",
            hint=f"Known protocols: {known}. Upgrade aidge-deploy or fix the manifest's 'protocol'.",
        ) from None


def list_protocols() -> list[OutputProtocol]:
    _load_builtin()
    return [_PROTOCOLS[k] for k in sorted(_PROTOCOLS)]


def _load_builtin() -> None:
    # Imported lazily so that the registry module has no import cycle with the parsers.
    # (``import a.b.c`` rather than ``from a.b import c``: mypy reports the latter as a
    # missing attribute inside this import cycle.)
    import aidge_deploy.protocols.mlperf
    import aidge_deploy.protocols.stdout
    import aidge_deploy.protocols.uart  # noqa: F401
