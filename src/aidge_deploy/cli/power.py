"""``aidge-deploy power``: captures recorded elsewhere (the Joulescope UI, a lab script).

``power analyse CAPTURE.jls --inferences N [--into BUNDLE] [--json]`` runs nothing: it
analyses the file against the N it holds and prints the figures (with ``--json``: each with
its unit and provenance), and with ``--into`` adds them to the bundle of the board run they
belong to. Exit status: 0 valid, 2 a refused input (no N, a bundle that is not a board
run), 5 the figures are invalid (each failure named by its ``power.*`` code).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from aidge_deploy.cli.render import EXIT_POWER_INVALID, console, print_error, print_power_result
from aidge_deploy.errors import DeployError

app = typer.Typer(
    help="Power captures recorded elsewhere: analyse a JLS file, add it to a board run's bundle.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command()
def analyse(
    capture: Annotated[Path, typer.Argument(help="JLS capture (current, voltage, gpi[0]).")],
    inferences: Annotated[
        int | None,
        typer.Option(
            help="Inferences inside the capture's window (the firmware's terminal record "
            "says it; else the capture's annotation)."
        ),
    ] = None,
    into: Annotated[
        Path | None,
        typer.Option(help="Bundle of the board run the capture belongs to: figures added to it."),
    ] = None,
    clean_latency_ms: Annotated[
        float | None,
        typer.Option(
            help="Per-inference latency of the board's profile run, ms: the window is the "
            "pulse lasting N x it (with --into: the bundle's)."
        ),
    ] = None,
    gate_min_pulse: Annotated[
        float | None, typer.Option(help="Gate detector: shortest pulse, in seconds.")
    ] = None,
    gate_max_dropout: Annotated[
        float | None, typer.Option(help="Gate detector: longest dropout bridged, in seconds.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the figures as JSON (units, provenance).")
    ] = False,
) -> None:
    """Analyse CAPTURE against the N inferences it recorded (nothing is run)."""
    from aidge_deploy.power.analyse import CleanLatency, analyse_capture
    from aidge_deploy.power.failures import PowerCaptureError
    from aidge_deploy.power.protocol import WindowRule
    from aidge_deploy.results import Provenance

    try:
        run = None
        latency = None
        rule = WindowRule.MATCH
        if clean_latency_ms is not None:
            if not clean_latency_ms > 0:
                raise typer.BadParameter("--clean-latency-ms must be positive")
            # a figure given as "0.8" is known to 0.1 ms: its last digit is its step
            digits = repr(float(clean_latency_ms)).partition(".")[2].rstrip("0")
            step_ms = 10.0 ** -len(digits) if "e" not in digits else clean_latency_ms
            latency = CleanLatency(
                clean_latency_ms / 1e3, Provenance.SILICON, step_ms / 1e3, "given"
            )
        if into is not None:
            from aidge_deploy.report.power_into import open_board_run

            run = open_board_run(into)
            latency = latency or run.latency
            rule = run.window_rule
        result = analyse_capture(
            capture,
            inferences,
            latency=latency,
            rule=rule,
            min_pulse_s=gate_min_pulse,
            max_dropout_s=gate_max_dropout,
        )
    except PowerCaptureError as exc:  # not a JLS file, truncated, and no N to go on
        if as_json:
            sys.stdout.write(json.dumps({"error": exc.code.value, "message": exc.message}) + "\n")
        else:
            console.print(f"[red]{exc.code.value}[/red]: {exc.message}", highlight=False)
            if exc.hint:
                console.print(f"  Hint: {exc.hint}", highlight=False)
        raise typer.Exit(code=EXIT_POWER_INVALID) from None
    except DeployError as exc:
        print_error(exc)
        raise typer.Exit(code=2) from None
    written: list[str] = []
    if run is not None:
        from aidge_deploy.report.power_into import add_power_to_bundle

        try:
            written = add_power_to_bundle(run, result)
        except DeployError as exc:
            print_error(exc)
            raise typer.Exit(code=2) from None
    if as_json:
        doc = {"capture": str(capture), "bundle": None if into is None else str(into)}
        doc.update(result.as_dict())
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print_power_result(result)
        if into is not None:
            console.print(
                f"[dim]Added to {into}: {', '.join(written)} (manifest rewritten)[/dim]",
                highlight=False,
                soft_wrap=True,
            )
    if result.invalid:
        raise typer.Exit(code=EXIT_POWER_INVALID)


__all__ = ["app"]
