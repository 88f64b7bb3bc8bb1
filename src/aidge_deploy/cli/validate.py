"""``aidge-deploy validate MODEL.onnx --targets host,mps2-an386``: outputs of every target
against a reference run, as a target x output matrix. Exit 0 pass, 1 a check failed,
2 bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from aidge_deploy.cli.render import console, print_error
from aidge_deploy.errors import ConfigError, DeployError

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2


def validate(
    model: Annotated[Path, typer.Argument(help="ONNX model to validate.")],
    targets: Annotated[
        str, typer.Option("--targets", help="Comma-separated targets, e.g. host,mps2-an386.")
    ],
    dtype: Annotated[str, typer.Option(help="float32 or int8.")] = "float32",
    inputs: Annotated[
        Path | None, typer.Option(help="Folder of .npy/.npz inputs (default: one sample).")
    ] = None,
    dataset: Annotated[
        Path | None,
        typer.Option(help="Folder of .npz files with x (samples) and y (labels): accuracy."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option(help="Write validation.json/.html and the run bundles here.")
    ] = None,
    work_dir: Annotated[Path | None, typer.Option(help="Where the exports are generated.")] = None,
    timeout: Annotated[float, typer.Option(help="Run timeout per deploy, in seconds.")] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the matrix as JSON.")] = False,
) -> None:
    """Run MODEL in output mode on each target and compare every output with a reference."""
    import tempfile

    from aidge_deploy.modelexport import onnx_input_shapes
    from aidge_deploy.validation.runner import (
        load_dataset,
        load_inputs,
        validate_model,
        write_validation,
    )

    names = [t.strip() for t in targets.split(",") if t.strip()]
    try:
        if not names:
            raise ConfigError("--targets names no target", hint="e.g. --targets host,mps2-an386")
        if dtype not in ("float32", "int8"):
            raise ConfigError(f"Unknown dtype {dtype!r}", hint="Use float32 or int8.")
        if not model.is_file():
            raise ConfigError(f"Model file {model} not found", hint="Pass an .onnx file.")
        shape = onnx_input_shapes(model)[0][1]
        xs = load_inputs(inputs, shape) if inputs is not None else []
        labelled = load_dataset(dataset, shape) if dataset is not None else None
        with tempfile.TemporaryDirectory(prefix="aidge-validate-") as tmp:
            result = validate_model(
                model,
                names,
                dtype=dtype,
                inputs=xs,
                dataset=labelled,
                work_dir=work_dir or Path(tmp),
                report_dir=report,
                run_timeout=timeout,
                progress=None if as_json else lambda msg: console.print(f"[dim]{msg}[/dim]"),
            )
        written = write_validation(result, report) if report is not None else None
    except DeployError as exc:
        print_error(exc)
        raise typer.Exit(code=EXIT_ERROR) from None
    if as_json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
    else:
        _print(result)
        if written is not None:
            console.print(f"Report: {written[1]}", highlight=False)
    if not result.passed:
        for line in result.failures():
            sys.stderr.write(f"FAIL {line}\n")
    raise typer.Exit(code=EXIT_PASS if result.passed else EXIT_FAIL)


def _print(result: object) -> None:
    from aidge_deploy.validation.runner import ValidationReport

    if not isinstance(result, ValidationReport):  # pragma: no cover - typing aid
        return
    table = Table(
        title=f"{result.model.name} ({result.dtype}) vs {result.engine.value}, "
        f"{result.nb_inputs} input(s)",
        title_justify="left",
    )
    for col in ("target", "output", "max abs", "max rel", "cosine", "top-1", "verdict"):
        table.add_column(col, justify="left" if col in ("target", "output") else "right")
    for c in result.checks:
        table.add_row(
            c.target,
            c.output,
            f"{c.max_abs_error:.3g}",
            f"{c.max_rel_error:.3g}",
            f"{c.cosine:.6f}",
            f"{c.top1_agreement:.0%}",
            "[green]pass[/]" if c.passed else "[bold red]FAIL[/]",
        )
    console.print(table)
    for target, error in result.errors.items():
        console.print(f"[bold red]{target}:[/] {error}", highlight=False)
    if result.reference_accuracy is not None:
        console.print(f"Reference accuracy: {result.reference_accuracy:.1%}")
        for acc in result.accuracy:
            shown = (
                f"{acc.accuracy:.1%}"
                if acc.accuracy is not None
                else f"unavailable ({acc.unavailable_reason})"
            )
            console.print(f"  {acc.target}: {shown} on {acc.samples} samples", highlight=False)
    console.print("Verdict: " + ("[bold green]PASS[/]" if result.passed else "[bold red]FAIL[/]"))
