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


__all__ = ["print_targets"]
