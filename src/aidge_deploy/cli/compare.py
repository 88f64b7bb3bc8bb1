"""``aidge-deploy compare BASE CAND``: diff two result bundles, optionally gate on thresholds.

Exit codes (also in ``report.compare``):

* 0 — comparable, and no threshold failed (or no thresholds given)
* 1 — thresholds gave a warning (a metric missing with ``missing: warn``, an invalid bundle)
* 2 — a bundle failed verification (missing/modified files) or the thresholds file is invalid
* 3 — not comparable: the model, its inputs/outputs or the target differ
* 4 — thresholds failed: at least one metric regressed beyond its allowance
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from aidge_deploy.cli.render import console, print_error
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


def _delta_cells(d: MetricDelta) -> tuple[str, str, str, str]:

    delta = d.delta
    pct = d.pct
    color = "" if not delta else ("red" if delta > 0 else "green")
    delta_text = "—" if delta is None else f"{'+' if delta > 0 else ''}{_num(delta, d)}"
    pct_text = "—" if pct is None else f"{pct:+.1f}%"
    if color:
        delta_text, pct_text = f"[{color}]{delta_text}[/]", f"[{color}]{pct_text}[/]"
    return _num(d.base, d), _num(d.cand, d), delta_text, pct_text


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
    totals = Table(title="Totals (red: larger in the candidate)", title_justify="left")
    for col in ("metric", "unit", "base", "candidate", "delta", "delta %"):
        totals.add_column(col, justify="left" if col in ("metric", "unit") else "right")
    for d in comparison.totals:
        totals.add_row(d.key, d.unit, *_delta_cells(d))
    console.print(totals)
    for figure_key, deltas in comparison.layer_deltas.items():
        table = Table(
            title=f"Per-layer {figure_key}: {min(top, len(deltas))} largest changes",
            title_justify="left",
        )
        for col in ("layer", "unit", "base", "candidate", "delta", "delta %"):
            table.add_column(col, justify="left" if col in ("layer", "unit") else "right")
        for d in deltas[:top]:
            layer = d.key.split("/", 1)[1].rsplit("/", 1)[0]
            table.add_row(layer, d.unit, *_delta_cells(d))
        console.print(table)


def _print_evaluation(evaluation: Evaluation) -> None:
    table = Table(title="Thresholds", title_justify="left")
    for col in ("status", "metric", "detail"):
        table.add_column(col)
    for check in evaluation.checks:
        table.add_row(
            f"[{_VERDICT_STYLE[check.status.value]}]{check.status.value}[/]",
            check.key,
            check.message,
        )
    console.print(table)
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
        EXIT_NOT_COMPARABLE,
        EXIT_PASS,
        compare_bundles,
        evaluate,
        load_thresholds,
        not_comparable_message,
    )

    try:
        comparison = compare_bundles(base, cand)
        rules = load_thresholds(thresholds) if thresholds is not None else None
    except DeployError as exc:
        print_error(exc)
        raise typer.Exit(code=EXIT_ERROR) from None
    payload: dict[str, Any] = comparison.as_dict(top)
    if not comparison.comparable:
        message = not_comparable_message(comparison.blocking)
        if as_json:
            payload["error"] = f"not comparable: {message}"
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            console.print(f"[bold red]Not comparable:[/bold red] {message}", highlight=False)
            console.print(
                "  [bold yellow]Hint:[/bold yellow] compare bundles of the same model on the "
                "same target; informative differences (toolchain, versions) are allowed.",
                highlight=False,
            )
        raise typer.Exit(code=EXIT_NOT_COMPARABLE)
    evaluation = evaluate(comparison, rules) if rules is not None else None
    if as_json:
        payload["thresholds"] = None if evaluation is None else evaluation.as_dict()
        if rules is not None:
            payload["thresholds_sha256"] = rules.sha256
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        _print_comparison(comparison, top)
        if evaluation is not None:
            _print_evaluation(evaluation)
    raise typer.Exit(code=EXIT_PASS if evaluation is None else evaluation.exit_code)
