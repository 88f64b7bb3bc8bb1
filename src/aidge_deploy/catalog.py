"""The registered targets with their hardware facts, for ``aidge-deploy targets`` and the docs.

Hardware facts are read from the ``aidge_core.hw_model`` objects attached to the deploy
targets (``hwfacts``: each in the unit it is declared in, with its source); nothing is
re-declared here. The local host's memory is this machine's, read from the OS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from aidge_deploy.hwfacts import HW_MODEL, THIS_MACHINE, clock_fact, memory_facts
from aidge_deploy.modelexport import load_plugins
from aidge_deploy.registry import (
    DeployTarget,
    local_target_class,
    registered_targets,
)
from aidge_deploy.targetcaps import target_caps


@dataclass(frozen=True)
class TargetRow:
    target: str
    backend: str
    kind: str
    cpu: str
    clock: str
    memories: str
    build_system: str
    description: str
    #: where the clock and memory figures come from
    sources: str = HW_MODEL


def _hardware_facts(hw: Any, this_machine: bool | None) -> tuple[str, str, str, str, str, str]:
    """kind, cpu, clock, memories, build system and sources of one hardware model.

    ``this_machine``: True reads the local host's memory from the OS, False names it
    without a number (for the generated docs, which must not depend on the machine),
    None keeps the hardware model's figures (a remote or embedded target).
    """
    pe = getattr(hw, "main_pe", None)
    cpu = type(pe).__name__ if pe is not None else "-"
    arch = getattr(pe, "arch", None) or getattr(hw, "arch", None)
    if arch:
        cpu = f"{cpu} ({arch})"
    clock = clock_fact(hw)
    clock_text = clock.text if clock.value is not None else "-"
    facts = memory_facts(hw, this_machine=bool(this_machine))
    memories = ", ".join(f"{f.name} {f.text}" for f in facts) or "-"
    sources = sorted({f.source for f in (clock, *facts)})
    if this_machine is False:
        memories = "this machine's memory (read when listed)"
        sources = [HW_MODEL, THIS_MACHINE]
    build_system = getattr(hw, "build_system", None)
    build = getattr(build_system, "name", str(build_system or "-"))
    kind = "mcu" if getattr(hw, "hal_board", None) is not None else "linux"
    return kind, cpu, clock_text, memories, str(build).lower(), ", ".join(sources)


def target_rows(*, this_machine: bool = True) -> list[TargetRow]:
    """Every registered pair with its hardware facts (``this_machine``: read the local host
    target's memory from the OS; False for pages that must not depend on the machine)."""
    load_plugins()
    rows = []
    for (target, backend), cls in registered_targets().items():
        caps = target_caps(cls)
        # a remote backend reaches the same hardware: its facts are the target's own
        facts_of = local_target_class(target) if caps.remote else cast(type[DeployTarget], cls)
        try:
            hw = facts_of.hardware_target_class()
            kind, cpu, clock, memories, build, sources = _hardware_facts(
                hw, this_machine if caps.this_machine else None
            )
        except Exception as exc:  # a hardware class that needs arguments
            kind, cpu, clock, memories, build = "?", f"({type(exc).__name__})", "-", "-", "-"
            sources = HW_MODEL
        if target_caps(facts_of).emulated:
            kind = "emulated mcu"
        rows.append(
            TargetRow(target, backend, kind, cpu, clock, memories, build, cls.description, sources)
        )
    return rows
