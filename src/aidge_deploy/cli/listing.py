"""``aidge-deploy targets``: the registry as two tables that stay legible at 80 columns.

One row per (target, backend) repeated every hardware fact and left the mechanics a narrow
column wrapped word by word; target names were cut first. Here the hardware facts come
once per target (backends with the same facts share a row) and each way of reaching
targets (backend and mechanics) once, with the targets it serves; target and backend names
never wrap or get cut.
"""

from __future__ import annotations

from rich.table import Table

from aidge_deploy.cli.render import console


def print_targets() -> None:
    from aidge_deploy.catalog import target_rows
    from aidge_deploy.hwfacts import HW_MODEL

    rows = target_rows()
    hardware = Table(title="Deploy targets (hardware facts)", title_justify="left")
    hardware.add_column("target", no_wrap=True, style="bold")
    hardware.add_column("backends", overflow="fold")
    hardware.add_column("kind: cpu", overflow="fold")
    for name in ("clock", "memories", "build"):
        hardware.add_column(name, overflow="fold")
    grouped: dict[tuple[str, str, str, str, str], list[str]] = {}
    for row in rows:
        mark = "" if row.sources == HW_MODEL else " *"
        cpu = f"{row.kind}: {row.cpu}"
        facts = (row.target, cpu, row.clock, row.memories + mark, row.build_system)
        grouped.setdefault(facts, []).append(row.backend)
    for (target, cpu, clock, memories, build), backends in grouped.items():
        hardware.add_row(target, ", ".join(backends), cpu, clock, memories, build)
    console.print(hardware)
    console.print(
        f"[dim]clock and memories from {HW_MODEL}, in the units they are declared in; "
        "* memory of this machine, read from the operating system[/dim]",
        highlight=False,
    )
    ways: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        ways.setdefault((row.backend, row.description), []).append(row.target)
    mechanics = Table(title="How targets are reached (backends)", title_justify="left")
    mechanics.add_column("backend", no_wrap=True, style="bold")
    mechanics.add_column("mechanics")
    mechanics.add_column("targets")
    for (backend, description), names in sorted(ways.items()):
        mechanics.add_row(backend, description, ", ".join(names))
    console.print(mechanics)
    console.print(_extensions())
    _failures()


def _failures() -> None:
    """Entry points of installed plug-ins that failed to load: said, not hidden."""
    from aidge_deploy.extensions import registries

    for registry in registries():
        for name, error in registry.failures.items():
            console.print(
                f"[yellow]The {registry.kind} {name!r} failed to load:[/yellow] {error}",
                highlight=False,
            )


def _extensions() -> Table:
    """The other registries, one row each thing: what a manifest, --flash-method,
    --counters and --power can name (built in or from an installed plug-in)."""
    from aidge_deploy.flash.registry import FLASHERS
    from aidge_deploy.power.registry import POWER_MONITORS
    from aidge_deploy.profiling.capability import COUNTER_SOURCES
    from aidge_deploy.protocols.registry import PROTOCOLS

    table = Table(
        title="Protocols, flashers, counter sources, power monitors", title_justify="left"
    )
    table.add_column("extension", no_wrap=True, style="bold")
    table.add_column("name", no_wrap=True)
    table.add_column("what it is", overflow="fold")
    for name, protocol in PROTOCOLS.all().items():
        table.add_row("protocol", name, _first_line(protocol.__doc__))
    for name, flasher in FLASHERS.all().items():
        table.add_row("flasher", name, _first_line(flasher.__doc__))
    for name, source in COUNTER_SOURCES.all().items():
        table.add_row("counters", name, f"{source.counter_domain.value}: {source.counts_where}")
    for kind in POWER_MONITORS.all().values():
        table.add_row("power", kind.syntax(), f"{kind.provenance}: {kind.reads}")
    return table


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc and doc.strip() else ""


__all__ = ["print_targets"]
