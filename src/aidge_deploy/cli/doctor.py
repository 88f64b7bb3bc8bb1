"""``aidge-deploy doctor``: the tools each target needs, and how to install what is missing."""

from __future__ import annotations

import typer
from rich.table import Table

from aidge_deploy.cli.render import console


def doctor() -> None:
    """Check the tools each registered target needs on this machine."""
    from aidge_deploy.catalog import doctor_report

    missing = 0
    for section in doctor_report():
        table = Table(title=section.title, title_justify="left")
        table.add_column("")
        table.add_column("tool")
        table.add_column("found")
        table.add_column("how to install")
        for check in section.checks:
            missing += 0 if check.ok else 1
            table.add_row(
                "[green]✓[/green]" if check.ok else "[red]✗[/red]",
                check.name,
                check.detail,
                check.hint or "",
            )
        console.print(table)
    _power_monitors()
    if missing:
        console.print(
            f"[yellow]{missing} missing item(s); targets that need them will fail in preflight.[/yellow]"
        )
        raise typer.Exit(code=1)
    console.print("[green]Everything every registered target needs is installed.[/green]")


def _power_monitors() -> None:
    """The power monitors usable here (optional: they never make doctor fail)."""
    from aidge_deploy.power.monitors import discover_monitors

    table = Table(title="Power monitors (--power SOURCE; optional)", title_justify="left")
    for col in ("", "monitor", "found", "how to get it"):
        table.add_column(col)
    for check in discover_monitors():
        table.add_row(
            "[green]✓[/green]" if check.ok else "[dim]–[/dim]",
            check.name,
            check.detail,
            check.hint or "",
        )
    console.print(table)
