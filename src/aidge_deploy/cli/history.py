"""``aidge-deploy history``: the recorded runs — listed and filtered, charted across commits
(offline HTML, steps marked), exported for Bencher (BMF) and github-action-benchmark.

The history is the one ``--history`` (``profile``, ``run``, ``validate``) and the pytest
plugin's ``--aidge-history`` record into: a SQLite file or a database URL
(``AIDGE_DEPLOY_HISTORY`` by default).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from aidge_deploy.cli.render import console, print_error
from aidge_deploy.errors import ConfigError, DeployError

app = typer.Typer(
    help="The results history: list, chart and export recorded runs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

HistoryOpt = Annotated[
    str,
    typer.Option(
        "--history",
        envvar="AIDGE_DEPLOY_HISTORY",
        help="The results history: a SQLite file or a database URL.",
    ),
]
NameOpt = Annotated[str | None, typer.Option("--name", help="Test or run name (a prefix).")]
TargetOpt = Annotated[str | None, typer.Option("--target", help="Only this target.")]
BoardOpt = Annotated[str | None, typer.Option("--board", help="Only this lab board.")]
BranchOpt = Annotated[str | None, typer.Option("--branch", help="Only this branch.")]
SourceOpt = Annotated[
    str | None,
    typer.Option("--source", help="Only runs recorded by pytest, profile, run, validate, farm..."),
]
#: the figures the list shows by default
SHOWN = ("latency", "emulated_instructions", "flash_bytes", "image_bytes")


def _records(
    history: str,
    *,
    name: str | None,
    target: str | None,
    board: str | None,
    branch: str | None,
    source: str | None,
) -> Any:
    from aidge_deploy.history.query import RecordFilter, select_records

    return select_records(
        history,
        RecordFilter(name=name, target=target, board=board, branch=branch, source=source),
    )


def _fail(exc: DeployError) -> typer.Exit:
    print_error(exc)
    return typer.Exit(code=2)


@app.command("list")
def list_runs(
    history: HistoryOpt,
    name: NameOpt = None,
    target: TargetOpt = None,
    board: BoardOpt = None,
    branch: BranchOpt = None,
    source: SourceOpt = None,
    commit: Annotated[str | None, typer.Option(help="Only this commit (a prefix).")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the newest N runs.")] = None,
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="Figures to show (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """List the recorded runs, oldest first, with where each series stepped."""
    from aidge_deploy.display import figure_text
    from aidge_deploy.history.query import RecordFilter, list_records, record_dict

    which = RecordFilter(
        name=name, target=target, board=board, branch=branch, source=source, commit=commit
    )
    try:
        listing = list_records(history, which, limit=limit)
    except DeployError as exc:
        raise _fail(exc) from None
    records, steps = listing.records, listing.steps
    if as_json:
        doc = [record_dict(r, steps.get(r.id, [])) for r in records]
        sys.stdout.write(json.dumps(doc, indent=2))
        sys.stdout.write("\n")
        return
    shown = list(metric or SHOWN)
    table = Table(title=f"{len(records)} runs in {history}", title_justify="left")
    for col in ("id", "time (UTC)", "commit", "branch", "run", "target", *shown, "stepped"):
        table.add_column(col, overflow="fold")
    for r in records:
        marks = steps.get(r.id, [])
        table.add_row(
            str(r.id),
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.recorded_at)),
            r.vcs.short or "—",
            r.vcs.branch or "—",
            f"{r.identity.name} ({r.identity.kind} {r.identity.dtype})",
            r.identity.where,
            *(
                figure_text(
                    r.figures[m].value,
                    r.figures[m].unit,
                    r.figures[m].resolution,
                    band=r.figures[m].band,  # an estimate: 3 digits and its model's band
                )
                if m in r.figures and r.figures[m].value is not None
                else "—"
                for m in shown
            ),
            "[bold red]" + ", ".join(s.describe() for s in marks) + "[/]" if marks else "",
        )
    console.print(table)
    _print_series_notes([s for s in listing.series if s.metric in shown])


def _print_series_notes(series: list[Any]) -> None:
    """Each shown series too noisy to gate, and where change-point detection found a new
    level (``history.changepoint``)."""
    from aidge_deploy.history.changepoint import Stability

    for s in series:
        what = f"{s.metric} of {s.identity.describe()}"
        if s.noise is not None and s.noise.stability is Stability.UNSTABLE:
            console.print(f"[yellow]unstable[/] {what}: {s.noise.describe()}", soft_wrap=True)
        if s.change_points:
            at = ", ".join(f"record {i}" for i in s.change_points)
            console.print(f"change points (PELT) in {what}: {at}", soft_wrap=True)


@app.command()
def chart(
    history: HistoryOpt,
    out: Annotated[Path, typer.Option("--out", help="The HTML page to write.")],
    name: NameOpt = None,
    target: TargetOpt = None,
    board: BoardOpt = None,
    branch: BranchOpt = None,
    source: SourceOpt = None,
) -> None:
    """Write a chart per figure across commits (one offline HTML page), steps marked."""
    from aidge_deploy.history.chart import render_history_html
    from aidge_deploy.history.series import all_series

    try:
        records = _records(
            history, name=name, target=target, board=board, branch=branch, source=source
        )
        _write(out, render_history_html(records))
    except DeployError as exc:
        raise _fail(exc) from None
    stepped = [(s, st) for s in all_series(records) for st in s.steps]
    console.print(f"Chart: {out} ({len(records)} runs)", highlight=False, soft_wrap=True)
    by_id = {r.id: r for r in records}
    for series, step in stepped:
        record = by_id[step.record_id]
        console.print(
            f"  [bold red]stepped[/] at {record.vcs.short or record.id}: "
            f"{series.identity.describe()}: {step.describe()} "
            f"({step.before:.6g} → {step.after:.6g} {step.unit})",
            highlight=False,
        )


@app.command("export")
def export_runs(
    history: HistoryOpt,
    fmt: Annotated[str, typer.Option("--format", help="bmf (Bencher) or github-action-benchmark.")],
    out: Annotated[Path | None, typer.Option("--out", help="Write here (default: stdout).")] = None,
    commit: Annotated[
        str | None, typer.Option(help="The runs of this commit (default: each series' latest).")
    ] = None,
    name: NameOpt = None,
    target: TargetOpt = None,
    board: BoardOpt = None,
    branch: BranchOpt = None,
    source: SourceOpt = None,
) -> None:
    """Export one run per identity as Bencher BMF or github-action-benchmark JSON."""
    from aidge_deploy.history.exports import ExportFormat, export, latest_per_identity

    try:
        try:
            kind = ExportFormat(fmt)
        except ValueError:
            raise ConfigError(
                f"Unknown export format {fmt!r}",
                hint=f"Use {' or '.join(f.value for f in ExportFormat)}.",
            ) from None
        records = _records(
            history, name=name, target=target, board=board, branch=branch, source=source
        )
        chosen = latest_per_identity(records, commit)
        if not chosen:
            raise ConfigError(
                "no recorded run matches" + (f" commit {commit}" if commit else ""),
                hint="`aidge-deploy history list` shows what is recorded.",
            )
        text = json.dumps(export(chosen, kind), indent=2) + "\n"
        if out is None:
            sys.stdout.write(text)
        else:
            _write(out, text)
            console.print(f"Wrote {out} ({len(chosen)} runs, {kind.value})", highlight=False)
    except DeployError as exc:
        raise _fail(exc) from None


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror}") from None
