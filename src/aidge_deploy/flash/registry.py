"""The flasher registry: named ways to program a board, each declaring what it can do.

A deploy config names a flash method (``gdb-remote``, ``pyocd``, ...); the registry turns
the name into a ``Flasher``. Like Zephyr's ``RunnerCaps``, every flasher declares its
capabilities up front (mass erase, read-back verification, starting the program,
programming raw images at a given address), so a request the flasher cannot honour fails
with a ``ConfigError`` before anything touches the board instead of being silently ignored.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from aidge_deploy.errors import ConfigError
from aidge_deploy.flash.program import FlashReport, ResetMode

#: modules whose import registers the built-in flashers
_BUILTIN_MODULES = ("aidge_deploy.flash.flashers",)


@dataclass(frozen=True)
class FlasherCaps:
    """What a flasher supports (Zephyr RunnerCaps style)."""

    erase: bool = False  # erase all flash before programming
    verify: bool = False  # read back and compare after programming
    reset: bool = False  # start the program after programming
    flash_addr: bool = False  # program a raw image at a caller-given address


@dataclass(frozen=True)
class FlashRequest:
    """One programming job."""

    image: Path
    verify: bool = True
    erase: bool = False
    reset: ResetMode = ResetMode.VECTOR
    #: where a raw (non-ELF) image goes; needs the ``flash_addr`` capability
    load_address: int | None = None
    timeout_s: float = 30.0


@runtime_checkable
class Flasher(Protocol):
    """A registered way to program a board."""

    name: str
    caps: FlasherCaps

    def preflight(self) -> None:
        """Raise ``PreflightError`` if the tools or the probe this flasher needs are missing."""

    def flash(self, request: FlashRequest) -> FlashReport:
        """Program, optionally verify and start the image; raise ``FlashError`` on failure."""


_F = TypeVar("_F")
_REGISTRY: dict[str, Callable[..., Flasher]] = {}


def register_flasher(name: str) -> Callable[[_F], _F]:
    """Class decorator: register a flasher class under ``name`` (its ``**options`` constructor)."""

    def decorator(cls: _F) -> _F:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ConfigError(f"flasher {name!r} is registered twice", "rename one of them")
        _REGISTRY[name] = cls  # type: ignore[assignment]
        return cls

    return decorator


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def flasher_names() -> tuple[str, ...]:
    _load_builtins()
    return tuple(sorted(_REGISTRY))


def get_flasher_class(name: str) -> Any:
    """The class registered as ``name`` (to read its capabilities without instantiating it)."""
    _load_builtins()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(
            f"unknown flash method {name!r}", f"use one of: {', '.join(sorted(_REGISTRY))}"
        )
    return factory


def get_flasher(name: str, **options: Any) -> Flasher:
    """Instantiate the flasher registered as ``name`` with its options."""
    _load_builtins()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(
            f"unknown flash method {name!r}",
            f"use one of: {', '.join(sorted(_REGISTRY))}",
        )
    return factory(**options)


def check_request(flasher: Flasher, request: FlashRequest) -> None:
    """``ConfigError`` if ``request`` asks for something ``flasher`` cannot do."""
    caps = flasher.caps
    wanted = {
        "erase": request.erase,
        "verify": request.verify,
        "reset": request.reset is not ResetMode.NONE,
        "flash_addr": request.load_address is not None,
    }
    missing = [cap for cap, asked in wanted.items() if asked and not getattr(caps, cap)]
    if missing:
        raise ConfigError(
            f"flash method {flasher.name!r} cannot {', '.join(missing)}",
            "drop those options or pick another flash method",
        )


__all__ = [
    "FlashRequest",
    "Flasher",
    "FlasherCaps",
    "check_request",
    "flasher_names",
    "get_flasher",
    "register_flasher",
]
