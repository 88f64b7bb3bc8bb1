"""``aidge-deploy doctor``: whether each registered target (and flasher, counter source, power
monitor) works on this machine, what is missing and how to get it (``checkup``).

A row says "ready" only when every check passed; a missing item is said in the words a run
that needs it fails with in Preflight. What only a run can provide (a board's address, a
probe) is listed under it. Exit 1 when a way of running a target, or of exporting for one,
is not ready here.
"""

from __future__ import annotations

import typer
from rich.table import Table

from aidge_deploy.cli.render import console

_READY = "[green]✓[/green]"
_MISSING = "[red]✗[/red]"


def doctor() -> None:
    """Check what each registered target, flasher, counter source and monitor needs here."""
    from aidge_deploy.checkup import checkup

    report = checkup()
    packages = Table(title="Python packages (Aidge, to export)", title_justify="left")
    for column in ("", "package", "version", "how to install"):
        packages.add_column(column)
    for check in report.packages:
        packages.add_row(
            _READY if check.ok else _MISSING, check.name, check.detail, check.hint or ""
        )
    console.print(packages)
    _readiness(
        "Deploy targets: TARGETS /BACKEND \\[options] (`aidge-deploy targets` says what they are)",
        report.targets,
    )
    console.print(
        "[dim]Output protocols (need nothing here): " + ", ".join(report.protocols) + "[/dim]",
        highlight=False,
    )
    if report.exports:
        _readiness("Exporting for a board (profile): its BSP", report.exports)
    _readiness("Flashers (--flash-method; probe boards)", report.flashers, optional=True)
    _readiness("Counter sources (--counters)", report.counters, optional=True)
    _readiness("Power monitors (--power SOURCE; optional)", report.monitors, optional=True)
    if report.broken:
        broken = Table(title="Plug-ins that failed to load", title_justify="left")
        for column in ("kind", "name", "error"):
            broken.add_column(column)
        for kind, name, error in report.broken:
            broken.add_row(kind, name, error)
        console.print(broken)
    total = len(report.targets) + len(report.exports)
    if report.missing:
        console.print(
            f"[yellow]{report.missing} of {total} ways of running or exporting for a target are "
            "not ready here (✗); a run that needs one fails in Preflight, saying the same."
            "[/yellow]"
        )
        raise typer.Exit(code=1)
    console.print(f"[green]All {total} ways of running the registered targets are ready.[/green]")


def _readiness(title: str, rows: tuple[object, ...], *, optional: bool = False) -> None:
    """One table: mark, what, and its status (what is missing, how to get it, what a run
    needs besides)."""
    from aidge_deploy.checkup import Readiness

    table = Table(title=title, title_justify="left")
    table.add_column("")
    table.add_column("what", overflow="fold", ratio=2)
    table.add_column("here", overflow="fold", ratio=3)
    for row in rows:
        assert isinstance(row, Readiness)
        if row.ready:
            lines = ["[green]ready[/green]"]
            lines += [f"[dim]{c.name}: {c.detail}[/dim]" for c in row.checks if optional]
        else:
            lines = [f"[red]{row.status}[/red]", f"get it: {row.how}"]
        if row.run_needs:
            lines.append("[dim]a run needs: " + "; ".join(row.run_needs) + "[/dim]")
        mark = _READY if row.ready else ("[dim]–[/dim]" if optional else _MISSING)
        table.add_row(mark, row.subject, "\n".join(lines))
    console.print(table)


__all__ = ["doctor"]
