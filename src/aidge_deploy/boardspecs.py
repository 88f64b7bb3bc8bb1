"""The board records' registry: board name -> its ``TargetSpec`` (entry points
``aidge_deploy.boards``), read without importing any board's mechanics.

Why this module exists: a record is data (``aidge_deploy.targetspec``); which records are
installed — aidge-deploy's own and every plug-in's — is a registry of the extension points'
shape (``aidge_deploy.extensions``). The deploy targets made from them, and their
capabilities, are the target registry's (``aidge_deploy.registry``,
``aidge_deploy.targetcaps``); a listing, a lab file or a campaign that only asks what a
board is reads it here.
"""

from __future__ import annotations

import importlib

from aidge_deploy.errors import ConfigError
from aidge_deploy.extensions import Registry
from aidge_deploy.targetspec import TargetSpec

#: board name -> its record (entry points ``aidge_deploy.boards``: a ``TargetSpec`` each)
BOARDS: Registry[TargetSpec] = Registry("boards", TargetSpec, instances=True)


def _own_record(target: str) -> TargetSpec | None:
    """A plug-in's record of ``target`` (scanning the installed distributions only when
    something outside aidge-deploy declares boards)."""
    try:
        return BOARDS.find(target)
    except ConfigError:
        return None


def resolve_hardware_class(target: str, registering_module: str | None = None) -> type:
    """The ``aidge_core.hw_model`` class named ``target`` (after importing the module that
    registers it); ``ConfigError`` when the hardware model is unknown."""
    if registering_module is not None:
        importlib.import_module(registering_module)
    from aidge_core.hw_model import get_target_class

    try:
        return get_target_class(target)
    except KeyError as exc:
        raise ConfigError(
            f"Deploy target {target!r} is unknown to aidge_core.hw_model",
            hint="Register the hardware model first (aidge_core.hw_model.register_target).",
        ) from exc


def board_records(*, everywhere: bool) -> list[tuple[TargetSpec, str]]:
    """Every board record with the distribution declaring it; one that fails to load is
    left out, its error kept in ``BOARDS.failures`` (``doctor`` reports it)."""
    found = []
    declarations = BOARDS.declared(everywhere=everywhere)
    for name, declared in declarations.items():
        try:
            spec = BOARDS.find(name, everywhere=everywhere)
        except ConfigError as exc:
            BOARDS.failures[name] = exc.message
            continue
        if spec is not None:
            found.append((spec, declared.distribution))
    for name, spec in BOARDS.registered().items():
        if name not in declarations:
            found.append((spec, "this process"))
    return found


def register_board(spec: TargetSpec) -> TargetSpec:
    """Register a board record in-process (a plug-in declares it as an entry point of
    ``aidge_deploy.boards`` instead, so it is found without being imported)."""
    BOARDS.register(spec.name, BOARDS.adopt(spec.name, spec))
    return spec


def board_spec(target: str) -> TargetSpec | None:
    """The record of board ``target``, or None (a target with a class and no record)."""
    name = target.lower()
    return BOARDS.find(name, everywhere=False) or _own_record(name)


def hardware_model_of(target: str) -> str:
    """The hardware model's name of ``target``: its record's, else its own name."""
    spec = board_spec(target)
    return spec.hardware_name if spec is not None else target.lower()


__all__ = [
    "BOARDS",
    "board_records",
    "board_spec",
    "hardware_model_of",
    "register_board",
    "resolve_hardware_class",
]
