"""How a campaign looks on the terminal: the live view while it runs, then its figures.

Kept apart from the commands (``cli.campaign``) so ``aidge-deploy --help`` does not import
rich's live display; the library never prints, this module renders what ``campaign``
computed (``progress`` snapshots, ``tables``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from aidge_deploy.cli.render import console, err_console

if TYPE_CHECKING:
    from aidge_deploy.campaign.progress import CampaignProgress, ProgressSnapshot
    from aidge_deploy.campaign.runner import CampaignResult


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def status_line(snap: ProgressSnapshot) -> str:
    rate = "" if snap.rate_per_min is None else f" · {snap.rate_per_min:.2g} cells/min"
    left = "" if snap.remaining_s is None else f" · ~{_duration(snap.remaining_s)} left"
    reused = f" · {snap.reused} kept from earlier runs" if snap.reused else ""
    return (
        f"{snap.finished}/{snap.total - snap.reused} cells run · {snap.done} done · "
        f"{snap.failed} failed · {len(snap.running)} running · {snap.queued} queued"
        f"{reused}{rate}{left} · {_duration(snap.elapsed_s)} elapsed"
    )


def live_view(snap: ProgressSnapshot) -> Group:
    table = Table(show_edge=False, box=None, pad_edge=False)
    for col in ("model", "target", "options", "on", "doing", "for"):
        table.add_column(col, overflow="fold")
    now = time.monotonic()
    for r in snap.running:
        table.add_row(r.model, r.target, r.option, r.where, r.activity, _duration(now - r.started))
    return Group(Text(status_line(snap), style="bold"), table)


@contextmanager
def live_progress(progress: CampaignProgress, enabled: bool) -> Iterator[None]:
    """The live view on a terminal; one line per finished cell elsewhere (CI logs)."""
    if enabled and console.is_terminal:
        with Live(live_view(progress.snapshot()), console=console, refresh_per_second=4) as live:
            progress.on_change = lambda snap: live.update(live_view(snap))
            try:
                yield
            finally:
                progress.on_change = None
                live.update(live_view(progress.snapshot()))
        return
    last = {"finished": 0}

    def line(snap: ProgressSnapshot) -> None:
        if snap.finished != last["finished"]:
            last["finished"] = snap.finished
            if enabled:
                console.print(status_line(snap), highlight=False)

    progress.on_change = line
    try:
        yield
    finally:
        progress.on_change = None


def _cell_text(cell: Any) -> str:
    from aidge_deploy.campaign.tables import CellState

    if cell.state is CellState.OK:
        return f"{cell.text} [dim]({cell.provenance})[/dim]"
    if cell.state is CellState.DOES_NOT_FIT:
        return "[bold red]does not fit[/bold red]"
    if cell.state is CellState.FAILED:
        return "[red]failed[/red]"
    return f"[dim]{cell.text}[/dim]"


def print_side_by_side(records: Sequence[Mapping[str, Any]]) -> None:
    from aidge_deploy.campaign.tables import side_by_side
    from aidge_deploy.display import fmt_bytes

    for view in side_by_side(records):
        option = "" if view.option == "-" else f" ({view.option})"
        table = Table(title=f"{view.model}{option}: targets side by side", title_justify="left")
        table.add_column("figure")
        for target in view.targets:
            table.add_column(target, justify="right")
        for quantity, cells in view.rows:
            table.add_row(quantity.title, *(_cell_text(c) for c in cells))
        table.add_row(
            "Board memory",
            *(
                ", ".join(
                    p
                    for p in (
                        f"flash {fmt_bytes(f)}" if f else "",
                        f"RAM {fmt_bytes(r)}" if r else "",
                    )
                    if p
                )
                or "-"
                for f, r in view.capacities
            ),
        )
        console.print(table)


def print_metric_tables(records: Sequence[Mapping[str, Any]], only: Sequence[str]) -> None:
    from aidge_deploy.campaign.tables import metric_tables

    for table_view in metric_tables(records):
        if table_view.quantity.key not in only:
            continue
        table = Table(title=table_view.quantity.title, title_justify="left")
        table.add_column("model")
        columns = [(t, o) for t in table_view.targets for o in table_view.options]
        for target, option in columns:
            table.add_column(target if option == "-" else f"{target}\n{option}", justify="right")
        for model in table_view.models:
            table.add_row(
                model,
                *(
                    _cell_text(c) if (c := table_view.get(model, t, o)) is not None else "-"
                    for t, o in columns
                ),
            )
        console.print(table)


def print_outcome(result: CampaignResult, *, side_by_side_view: bool) -> None:
    records = result.records
    if side_by_side_view:
        print_side_by_side(records)
    else:
        print_metric_tables(records, ("latency", "cycles", "instructions", "flash", "accuracy"))
    for record in result.failed:
        err = record.get("error") or {}
        mark = " (does not fit)" if err.get("does_not_fit") else ""
        err_console.print(
            f"[bold red]Failed{mark}:[/bold red] {record['model']['name']} on "
            f"{record['target']['label']} ({record['option_label']}): {err.get('message')}",
            highlight=False,
        )
        if err.get("log"):
            err_console.print(f"  [bold]Log:[/bold] {err['log']}", highlight=False, soft_wrap=True)
    kept = f", {len(result.reused)} kept from earlier runs" if result.reused else ""
    console.print(
        f"[bold]{len(result.ran)} cell(s) run{kept}; {len(result.failed)} failed; "
        f"{len(result.missing)} not run.[/bold]",
        highlight=False,
    )
    for record in records:
        if record.get("bundle"):
            console.print(
                f"  {record['model']['name']} · {record['target']['label']} · "
                f"{record['option_label']}: {result.folder / 'cells' / record['id'] / 'bundle'}",
                highlight=False,
                soft_wrap=True,
            )
    if result.history_records:
        console.print(
            f"[bold]Results history:[/bold] {len(result.history_records)} record(s) added",
            highlight=False,
        )
    console.print(f"[bold]Report:[/bold] {result.report}", highlight=False, soft_wrap=True)
    console.print(
        f"[bold]Figures:[/bold] {result.folder / 'cells.csv'}, {result.folder / 'cells.json'}",
        highlight=False,
        soft_wrap=True,
    )


__all__ = [
    "live_progress",
    "live_view",
    "print_metric_tables",
    "print_outcome",
    "print_side_by_side",
    "status_line",
]
