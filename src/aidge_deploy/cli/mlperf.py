"""``aidge-deploy reference`` (the published MLPerf Tiny Cortex-M rows) and
``aidge-deploy models`` (the four reference models: list them, build random-weight ones)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from aidge_deploy.cli.render import console, print_error
from aidge_deploy.errors import ConfigError, DeployError

models_app = typer.Typer(
    help="The MLPerf Tiny reference models (kws, ic, vww, ad): list them, build random-weight "
    "ones of the published shapes.",
    no_args_is_help=True,
)


def reference(
    core: Annotated[
        str | None, typer.Option("--core", help="A Cortex-M core: cortex-m4, m7, m33 ...")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="A reference model: kws, ic, vww or ad.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Published MLPerf Tiny closed-division results of Cortex-M boards (v1.0-v1.3), with the
    board, core, clock, engine and version, latency, cycles and cycles/MAC, and the source
    of each row."""
    from aidge_deploy.mlperf.models import model_spec
    from aidge_deploy.mlperf.published import cores, select_rows

    try:
        if model is not None:
            model_spec(model)
        rows = select_rows(core, model)
        if core is not None and not rows and model is None:
            raise ConfigError(
                f"No published row for core {core!r}",
                hint="Cores with rows: " + ", ".join(cores()),
            )
    except DeployError as exc:
        print_error(exc)
        raise typer.Exit(code=2) from None
    if as_json:
        sys.stdout.write(json.dumps([r.as_dict() for r in rows], indent=1) + "\n")
        return
    table = Table(
        title=f"MLPerf Tiny closed division, published ({len(rows)} rows): latency = 1 / the "
        "median throughput; cycles = latency x core clock",
        title_justify="left",
    )
    for column in ("round", "model", "board", "core", "MHz", "engine", "dtype"):
        table.add_column(column)
    for column in ("latency [ms]", "cycles", "cycles/MAC"):
        table.add_column(column, justify="right")
    table.add_column("source", overflow="fold")
    for r in rows:
        table.add_row(
            r.round,
            r.benchmark.value,
            r.board,
            r.core,
            f"{r.clock_hz / 1e6:g}",
            r.engine_text,
            r.dtype or "not stated",
            f"{r.latency_s * 1e3:.3f}",
            f"{r.cycles:,.0f}",
            f"{r.cycles_per_mac:.2f}",
            r.source,
        )
    console.print(table, soft_wrap=True)


@models_app.command("list")
def list_models() -> None:
    """The four reference models: task, architecture, input, published MACs and parameters,
    and the trained files in mlcommons/tiny."""
    from aidge_deploy.mlperf.models import MODELS, SOURCE_REPOSITORY

    table = Table(title="MLPerf Tiny reference models", title_justify="left")
    for column in ("model", "task", "architecture", "input (NCHW)"):
        table.add_column(column)
    table.add_column("MACs", justify="right")
    table.add_column("params", justify="right")
    table.add_column(f"trained model ({SOURCE_REPOSITORY})")
    for spec in MODELS.values():
        table.add_row(
            spec.name.value,
            spec.task,
            spec.architecture,
            "x".join(map(str, spec.input_shape)),
            f"{spec.macs:,}",
            f"{spec.params:,}",
            spec.float_tflite,
        )
    console.print(table, soft_wrap=True)


@models_app.command("build")
def build(
    name: Annotated[str, typer.Argument(help="kws, ic, vww or ad")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The ONNX file to write.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random weights.")] = 0,
) -> None:
    """Write a random-weight ONNX model of a reference model's published shape (its MACs and
    parameters are the published counts): for runs without the trained files."""
    from aidge_deploy.mlperf.build import build_model
    from aidge_deploy.mlperf.models import count_onnx, model_spec

    try:
        spec = model_spec(name)
        if out.is_dir():
            raise ConfigError(f"{out} is a folder", hint="Pass the path of an .onnx file.")
        path = build_model(spec.name, out, seed=seed)
    except DeployError as exc:
        print_error(exc)
        raise typer.Exit(code=2) from None
    except OSError as exc:
        print_error(ConfigError(f"Cannot write {out}: {exc.strerror}", hint="Check the folder."))
        raise typer.Exit(code=2) from None
    counts = count_onnx(path)
    console.print(
        f"{spec.name.value}: {path} ({counts.macs:,} MACs, {counts.params:,} parameters, "
        f"random weights, seed {seed})",
        highlight=False,
        soft_wrap=True,
    )


__all__ = ["build", "list_models", "models_app", "reference"]
