"""``aidge-deploy compare BASE CAND``: diff two result bundles, optionally gate on thresholds.

Exit codes (also in ``report.compare``):

* 0 — comparable, and no threshold failed (or no thresholds given)
* 1 — thresholds gave a warning (a metric missing with ``missing: warn``, an invalid bundle)
* 2 — a bundle failed verification (missing/modified files) or the thresholds file is invalid
* 3 — not comparable: the model, its inputs/outputs or the target differ (3 is also the
  status of a bug in aidge-deploy, which then says so and names the log of its traceback)
* 4 — thresholds failed: at least one metric regressed beyond its allowance
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from aidge_deploy.cli.render import console, error_exit
from aidge_deploy.errors import DeployError

if TYPE_CHECKING:
    from aidge_deploy.report.compare import Comparison, Evaluation, MetricDelta

# report.compare (jsonschema) and report.svg load when the command runs: --help stays fast
_VERDICT_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red"}


def _num(value: float | None, d: MetricDelta) -> str:
    """A figure by the printing rules of ``metrics`` (to its resolution, counts as integers)."""
    from aidge_deploy.metrics import format_figure, is_count_unit
    from aidge_deploy.report.svg import fmt_number

    if value is None:
        return "—"
    if d.resolution is None and not is_count_unit(d.unit):
        return fmt_number(value)
    return format_figure(value, d.unit, d.resolution, with_unit=False)


def _banded(value: float | None, bounds: tuple[float, float] | None, d: MetricDelta) -> str:
    """An estimate to 3 significant digits with its band's bounds: ``1.19 M [1.07–1.37 M]``."""
    from aidge_deploy.metrics import three_digits

    if value is None or bounds is None:
        return _num(value, d)
    lo, hi = (three_digits(b, d.unit) for b in bounds)
    return f"{three_digits(value, d.unit)} [{lo}–{hi}]"


def _delta_cells(d: MetricDelta) -> tuple[str, str, str, str]:
    if d.no_change is not None:  # two estimates the model cannot tell apart
        return (
            _banded(d.base, d.band_base, d),
            _banded(d.cand, d.band_cand, d),
            "no change",
            "within bands",
        )
    if d.band_base is not None or d.band_cand is not None:
        base, cand = _banded(d.base, d.band_base, d), _banded(d.cand, d.band_cand, d)
    else:
        base, cand = _num(d.base, d), _num(d.cand, d)
    delta = d.delta
    pct = d.pct
    color = "" if not delta else ("red" if delta > 0 else "green")
    delta_text = "—" if delta is None else f"{'+' if delta > 0 else ''}{_num(delta, d)}"
    pct_text = "—" if pct is None else f"{pct:+.1f}%"
    if color:
        delta_text, pct_text = f"[{color}]{delta_text}[/]", f"[{color}]{pct_text}[/]"
    return base, cand, delta_text, pct_text


def _print_rows(
    title: str,
    name_header: str,
    headers: tuple[str, ...],
    rows: list[tuple[str, list[str]]],
    stacked: Callable[[list[str]], str],
    *,
    wrap_last: bool = False,
) -> None:
    """A table whose first column holds names that are never cut or wrapped.

    When the names and figures fit the console, a table; otherwise one block per row: the
    name on a line of its own (never broken, so a CI log keeps it whole and greppable), its
    figures indented below. Rich would otherwise shorten ``layers/_3_GlobalAveragePooling_…``
    to fit 80 columns, the width of a console that is not a terminal. ``wrap_last``: the
    last column is prose that may wrap (at least 30 columns of it); ``stacked`` writes a
    row's figures on the line under its name.
    """
    from rich.padding import Padding
    from rich.text import Text

    def cell_len(markup: str) -> int:
        return Text.from_markup(markup).cell_len

    widths = [max([len(name_header), *(cell_len(n) for n, _ in rows)])]
    widths += [
        max([len(header), *(cell_len(cells[i]) for _, cells in rows)])
        for i, header in enumerate(headers)
    ]
    if wrap_last:
        widths[-1] = min(widths[-1], 30)
    needed = sum(w + 3 for w in widths) + 1  # one space each side and a border per column
    if needed <= console.width:
        table = Table(title=title, title_justify="left")
        table.add_column(name_header, no_wrap=True)
        for i, header in enumerate(headers):
            prose = wrap_last and i == len(headers) - 1
            table.add_column(
                header,
                justify="left" if header == "unit" or prose else "right",
                no_wrap=not prose,
            )
        for name, cells in rows:
            table.add_row(name, *cells)
        console.print(table)
        return
    console.print(f"[italic]{title}[/italic]", highlight=False)
    for name, cells in rows:
        console.print(f"  [bold]{name}[/bold]", highlight=False, soft_wrap=True)
        console.print(Padding(Text.from_markup(stacked(cells)), (0, 0, 0, 6)))


_FIGURE_HEADERS = ("unit", "base", "candidate", "delta", "delta %")


def _figures_line(cells: list[str]) -> str:
    unit, base, cand, delta, pct = cells
    return f"{base} → {cand} {unit}   delta {delta} ({pct})"


def _print_comparison(comparison: Comparison, top: int) -> None:
    console.print(
        f"[bold]Base[/bold] {comparison.base.root} ({comparison.validity_base})  "
        f"[bold]Candidate[/bold] {comparison.cand.root} ({comparison.validity_cand})",
        highlight=False,
    )
    for diff in comparison.differences:
        console.print(
            f"[dim]{diff.kind.value}:[/dim] {diff.label} differs: {diff.base} → {diff.cand}",
            highlight=False,
        )
    _print_rows(
        "Totals (red: larger in the candidate)",
        "metric",
        _FIGURE_HEADERS,
        [(d.key, [d.unit, *_delta_cells(d)]) for d in comparison.totals],
        _figures_line,
    )
    for figure_key, deltas in comparison.layer_deltas.items():
        _print_rows(
            f"Per-layer {figure_key}: {min(top, len(deltas))} largest changes",
            "layer",
            _FIGURE_HEADERS,
            [
                (d.key.split("/", 1)[1].rsplit("/", 1)[0], [d.unit, *_delta_cells(d)])
                for d in deltas[:top]
            ],
            _figures_line,
        )


def _print_evaluation(evaluation: Evaluation) -> None:
    _print_rows(
        "Thresholds",
        "metric",
        ("status", "detail"),
        [
            (
                check.key,
                [f"[{_VERDICT_STYLE[check.status.value]}]{check.status.value}[/]", check.message],
            )
            for check in evaluation.checks
        ],
        lambda cells: "  ".join(cells),
        wrap_last=True,
    )
    for note in evaluation.notes:
        console.print(f"[yellow]Note:[/yellow] {note}", highlight=False)
    console.print(
        f"Verdict: [{_VERDICT_STYLE[evaluation.verdict.value]}]{evaluation.verdict.value.upper()}[/]"
    )


def compare(
    base: Annotated[Path, typer.Argument(help="Baseline result bundle (a --report folder).")],
    cand: Annotated[Path, typer.Argument(help="Candidate result bundle.")],
    thresholds: Annotated[
        Path | None,
        typer.Option(help="Regression thresholds (JSON, schemas/thresholds.schema.json)."),
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="Per-layer changes to show per figure.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare two result bundles. Exit 0 pass, 1 warn, 2 bad input, 3 not comparable, 4 fail."""
    from aidge_deploy.report.compare import (
        EXIT_ERROR,
        compare_with_thresholds,
        not_comparable_message,
    )

    try:
        outcome = compare_with_thresholds(base, cand, thresholds)
    except DeployError as exc:
        raise error_exit(exc, user_code=EXIT_ERROR) from None
    if as_json:
        sys.stdout.write(json.dumps(outcome.as_dict(top), indent=2) + "\n")
    elif not outcome.comparison.comparable:
        message = not_comparable_message(outcome.comparison.blocking)
        console.print(f"[bold red]Not comparable:[/bold red] {message}", highlight=False)
        console.print(
            "  [bold yellow]Hint:[/bold yellow] compare bundles of the same model on the "
            "same target; informative differences (toolchain, versions) are allowed.",
            highlight=False,
        )
    else:
        _print_comparison(outcome.comparison, top)
        if outcome.evaluation is not None:
            _print_evaluation(outcome.evaluation)
    raise typer.Exit(code=outcome.exit_code)
