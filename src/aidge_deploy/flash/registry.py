"""The flasher registry: named ways to program a board, each declaring what it can do.

A deploy config names a flash method (``gdb-remote``, ``pyocd``, ...); the registry (one
``extensions.Registry``, entry-point group ``aidge_deploy.flashers``) turns the name into a
flasher class. Like Zephyr's runners, every flasher

* declares its capabilities up front (``FlasherCaps``: mass erase, read-back verification,
  starting the program, programming raw images at a given address), so a request it cannot
  honour fails with a ``ConfigError`` before anything touches the board;
* owns its options: a frozen dataclass (``Options``) whose fields are the only keys of
  ``DeployConfig.flash_options`` it accepts, converted to their declared types (an option of
  another flasher, a typo or a bad value is refused before the run, naming the flasher's own);
* says what it needs on this machine (``needs``: ``doctor`` lists it, Preflight checks it),
  and builds itself for a board from the board's facts and its options (``for_board``).
"""

from __future__ import annotations

import dataclasses
import difflib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_args, get_type_hints

from aidge_deploy.backendoptions import is_union, option_rows
from aidge_deploy.errors import ConfigError
from aidge_deploy.extensions import Registry
from aidge_deploy.flash.program import FlashReport, ResetMode
from aidge_deploy.readiness import ToolCheck


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


@dataclass(frozen=True)
class BoardLink:
    """What a flasher is told of the board it programs (the deploy target and its config)."""

    #: the deploy target's name (``stm32h7a3``)
    target: str
    #: the hardware model's HAL family (``stm32h7``), when it declares one
    family: str | None = None
    #: the part as debug tools name it (``--pyocd-target``, else the target's known part)
    part: str | None = None
    #: which probe (``--probe-unique-id``): its USB serial number
    probe_uid: str | None = None
    #: where the flasher's own logs go (the run's log folder)
    log_dir: Path | None = None


@dataclass(frozen=True)
class NoOptions:
    """A flasher that takes no options of its own."""


class Flasher(ABC):
    """A registered way to program a board: the class declares its name, capabilities,
    options and needs; an instance (``for_board``) programs one board."""

    name: ClassVar[str]
    caps: ClassVar[FlasherCaps]
    #: the options this flasher owns (``DeployConfig.flash_options``), a frozen dataclass
    Options: ClassVar[type] = NoOptions

    @classmethod
    def needs(cls) -> list[ToolCheck]:
        """What this machine needs to use the flasher (``doctor``, Preflight); run-time
        things (a probe plugged in) are the instance's ``preflight``."""
        return []

    @classmethod
    @abstractmethod
    def for_board(cls, board: BoardLink, options: Any) -> Flasher:
        """The flasher for ``board``, configured by its ``options`` (an ``Options``)."""

    @abstractmethod
    def preflight(self) -> None:
        """Raise ``PreflightError`` if the tools or the probe this flasher needs are missing."""

    @abstractmethod
    def flash(self, request: FlashRequest) -> FlashReport:
        """Program, optionally verify and start the image; raise ``FlashError`` on failure."""


_F = TypeVar("_F", bound=type)


#: the --flash-method NAME -> its class (entry points ``aidge_deploy.flashers``)
FLASHERS: Registry[type[Flasher]] = Registry("flashers", Flasher)


def register_flasher(name: str) -> Callable[[_F], _F]:
    """Class decorator: register a flasher class under ``name``."""
    return FLASHERS.registering(name)


def flasher_names() -> tuple[str, ...]:
    return tuple(FLASHERS.names())


def get_flasher_class(name: str) -> type[Flasher]:
    """The class registered as ``name`` (its capabilities, options and needs)."""
    found = FLASHERS.find(name)
    if found is None:
        raise ConfigError(
            f"unknown flash method {name!r}", f"use one of: {', '.join(FLASHERS.names())}"
        )
    return found


def get_flasher(name: str, **options: Any) -> Flasher:
    """Instantiate the flasher registered as ``name`` with its constructor's arguments."""
    factory: Callable[..., Flasher] = get_flasher_class(name)
    return factory(**options)


def parse_options(flasher: type[Flasher], raw: Mapping[str, object]) -> Any:
    """``raw`` (``DeployConfig.flash_options``) as ``flasher``'s ``Options``: each value
    converted to the field's type; a key it does not own, or a bad value, is a
    ``ConfigError`` that lists the flasher's own options."""
    fields = {f.name: f for f in dataclasses.fields(flasher.Options)}
    types_ = get_type_hints(flasher.Options)
    own = ", ".join(fields) or "none"
    values: dict[str, object] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            owners = [
                other
                for other, cls in FLASHERS.all().items()
                if other != flasher.name
                and name in {f.name for f in dataclasses.fields(cls.Options)}
            ]
            close = difflib.get_close_matches(name, list(fields), n=1)
            why = (
                f"it is an option of {', '.join(owners)}"
                if owners
                else (f"did you mean {close[0]!r}?" if close else "no flasher has it")
            )
            raise ConfigError(
                f"Flash method {flasher.name!r} has no option {key!r} ({why})",
                hint=f"Options of {flasher.name}: {own} (`aidge-deploy docs` lists each "
                "flasher's options).",
            )
        values[name] = _convert(flasher.name, name, value, types_[name])
    return flasher.Options(**values)


def _convert(flasher: str, name: str, value: object, kind: object) -> object:
    """``value`` as the option's declared type (``str``, ``int``, ``bool``, optional ones)."""
    allowed = [a for a in get_args(kind) if a is not type(None)] if is_union(kind) else [kind]
    target: type = allowed[0] if len(allowed) == 1 and isinstance(allowed[0], type) else str
    if isinstance(value, target) and not (target is int and isinstance(value, bool)):
        return value
    text = str(value).strip()
    try:
        if target is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if target is int:
            return int(text, 0)
        return text
    except ValueError:
        what = {int: "an integer", bool: "true or false"}.get(target, "a text")
        raise ConfigError(
            f"Flash option {name}={value!r} of {flasher} is not {what}",
            hint=f"Give {name} {what}.",
        ) from None


def option_docs(flasher: type[Flasher]) -> list[tuple[str, str, str]]:
    """(option, type and default, what it is) of each option ``flasher`` owns (docs)."""
    return option_rows(flasher.Options)


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
    "FLASHERS",
    "BoardLink",
    "FlashRequest",
    "Flasher",
    "FlasherCaps",
    "NoOptions",
    "check_request",
    "flasher_names",
    "get_flasher",
    "get_flasher_class",
    "option_docs",
    "parse_options",
    "register_flasher",
]
