"""The ``aidge-deploy`` command: parse options, call the API, render with rich.

Errors print their message and hint and exit non-zero; a traceback only with ``-v``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from aidge_deploy.cli import doctor as doctor_cmd
from aidge_deploy.cli.invocation import INVOCATION
from aidge_deploy.cli.options import config_values, with_connection_options
from aidge_deploy.cli.render import EXIT_INTERNAL, console, follow_columns, print_error
from aidge_deploy.defaults import DEFAULT_RUN_TIMEOUT_S
from aidge_deploy.errors import ConfigError, InternalError

app = typer.Typer(
    name="aidge-deploy",
    help="Build, flash, run and profile Aidge exports on the host, boards and emulators.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # click's plain help: at 80 columns rich's option panels cut long option names
    # ("--max-counters-per…"), click wraps the help text instead; it also spares --help
    # the import of rich's markdown renderer
    rich_markup_mode=None,
)


@app.callback()
def main(
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Debug logs and tracebacks.")
    ] = False,
) -> None:
    INVOCATION.verbose = verbose
    follow_columns()
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


TargetOpt = Annotated[
    str | None, typer.Option("--target", "-t", help="Hardware target (default: the export's).")
]
HistoryOpt = Annotated[
    Path | None,
    typer.Option(
        "--history",
        envvar="AIDGE_DEPLOY_HISTORY",
        help="Record the run in this results history (a SQLite file or a database URL); "
        "see `aidge-deploy history`.",
        rich_help_panel="History",
    ),
]
HistoryNameOpt = Annotated[
    str | None,
    typer.Option(
        help="The name the run is recorded under (default: the model's or export's file name).",
        rich_help_panel="History",
    ),
]
TargetsOpt = Annotated[
    str | None,
    typer.Option(
        "--targets",
        help="Several targets, comma-separated (NAME, lab:BOARD, farm:TARGET[@BOARD]): "
        "run on each (concurrently where they allow), then show them side by side.",
    ),
]
LabOpt = Annotated[
    Path | None,
    typer.Option("--lab", help="Lab file (YAML) of the boards --targets names as lab:BOARD."),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        help="Timeout of each run of the program on the target, in seconds "
        "(each counter pass is one run)."
    ),
]


@app.command()
@with_connection_options
def run(
    export_dir: Annotated[Path, typer.Argument(help="Folder holding .aidge-export.json.")],
    target: TargetOpt = None,
    targets: TargetsOpt = None,
    lab: LabOpt = None,
    timeout: TimeoutOpt = DEFAULT_RUN_TIMEOUT_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    history: HistoryOpt = None,
    history_name: HistoryNameOpt = None,
    *,
    connection: dict[str, Any],
) -> None:
    """Deploy an existing export and print its results (on several targets with --targets)."""
    from aidge_deploy.cli.runs import run_export
    from aidge_deploy.history.request import HistoryRequest

    _lab_needs_targets(lab, targets)
    values = config_values(connection)
    if targets is not None:
        from aidge_deploy.cli.campaign import profile_targets

        _one_of(target, None, "--target", "--targets")
        values.update(run_timeout=timeout)
        profile_targets(
            export_dir,
            targets,
            dtype="float32",
            iterations=10,
            warmup=2,
            calibration=None,
            config_values=values,
            as_json=as_json,
            verbose=INVOCATION.verbose,
            lab=lab,
            history=history,
            history_name=history_name,
        )
        return
    values.update(target=target, run_timeout=timeout)
    record = HistoryRequest.of(history, history_name or export_dir.absolute().name, "run")
    run_export(export_dir, values, as_json=as_json, verbose=INVOCATION.verbose, history=record)


@app.command()
@with_connection_options
def profile(
    model: Annotated[Path, typer.Argument(help="ONNX model to export and profile.")],
    target: Annotated[str, typer.Option("--target", "-t", help="Hardware target.")] = "host",
    targets: TargetsOpt = None,
    lab: LabOpt = None,
    dtype: Annotated[str, typer.Option(help="float32 or int8.")] = "float32",
    calibration: Annotated[
        Path | None,
        typer.Option(help="int8: folder of .npy/.npz inputs to calibrate the quantisation on."),
    ] = None,
    dataset: Annotated[
        Path | None,
        typer.Option(
            help="With --targets: folder of .npz files with x (samples) and y (labels): the "
            "top-1 accuracy on each target that can report it."
        ),
    ] = None,
    iterations: Annotated[int, typer.Option(help="Timed inferences.")] = 10,
    warmup: Annotated[int, typer.Option(help="Warm-up inferences.")] = 2,
    work_dir: Annotated[
        Path | None,
        typer.Option(help="Where the export is generated (default: the export cache)."),
    ] = None,
    timeout: TimeoutOpt = DEFAULT_RUN_TIMEOUT_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    history: HistoryOpt = None,
    history_name: HistoryNameOpt = None,
    *,
    connection: dict[str, Any],
) -> None:
    """Export MODEL with Aidge (benchmark, per-layer profiling on) and deploy it.

    An unchanged model is exported once per target and settings, then reused from the
    export cache (and its build from the build cache). With --targets, on each target
    (concurrently where they allow), then side by side.
    """
    from aidge_deploy.cli.runs import profile_model
    from aidge_deploy.history.request import HistoryRequest
    from aidge_deploy.modelprofile import ProfileRequest

    _lab_needs_targets(lab, targets)
    if dataset is not None and targets is None:
        print_error(
            ConfigError(
                "--dataset goes with --targets",
                hint="e.g. --targets host,mps2-an386 --dataset val/ (or `aidge-deploy "
                "validate --dataset`).",
            )
        )
        raise typer.Exit(code=2)
    values = {**config_values(connection), "run_timeout": timeout}
    if targets is not None:
        from aidge_deploy.cli.campaign import profile_targets

        _one_of(target, "host", "--target", "--targets")
        if work_dir is not None:
            _one_of(work_dir, None, "--work-dir", "--targets (exports go to the export cache)")
        profile_targets(
            model,
            targets,
            dtype=dtype,
            iterations=iterations,
            warmup=warmup,
            calibration=calibration,
            config_values=values,
            as_json=as_json,
            verbose=INVOCATION.verbose,
            lab=lab,
            history=history,
            history_name=history_name,
            dataset=dataset,
        )
        return
    request = ProfileRequest(
        model=model,
        target=target,
        dtype=dtype,
        iterations=iterations,
        warmup=warmup,
        work_dir=work_dir,
        calibration=calibration,
        config_values=values,
        history=HistoryRequest.of(history, history_name or model.stem, "profile"),
    )
    profile_model(request, as_json=as_json, verbose=INVOCATION.verbose)


def _lab_needs_targets(lab: Path | None, targets: str | None) -> None:
    if lab is not None and targets is None:
        print_error(
            ConfigError("--lab names the boards of --targets", hint="e.g. --targets lab:nucleo")
        )
        raise typer.Exit(code=2)


def _one_of(value: object, default: object, option: str, other: str) -> None:
    if value != default:
        print_error(ConfigError(f"{option} and {other} exclude each other", hint=f"Use {other}."))
        raise typer.Exit(code=2)


@app.command()
def targets() -> None:
    """List the registered targets: hardware facts (from the hardware model) and backends."""
    from aidge_deploy.cli.listing import print_targets

    print_targets()


app.command(name="doctor")(doctor_cmd.doctor)


@app.command()
def docs(
    write: Annotated[
        Path | None, typer.Option("--write", help="Write the pages into this folder.")
    ] = None,
) -> None:
    """Reference pages (targets, protocols, counters, flashers) generated from the registries."""
    from aidge_deploy.docs import render_all, write_all

    if write is not None:
        for path in write_all(write):
            console.print(f"wrote {path}")
        return
    for text in render_all().values():
        sys.stdout.write(text + "\n")


from aidge_deploy.cli import compare as compare_cmd  # noqa: E402

app.command(name="compare")(compare_cmd.compare)
from aidge_deploy.cli import boards as boards_cmd  # noqa: E402

app.add_typer(boards_cmd.app, name="boards")
from aidge_deploy.cli.history import app as history_app  # noqa: E402

app.add_typer(history_app, name="history")
from aidge_deploy.cli import validate as validate_cmd  # noqa: E402

app.command(name="validate")(validate_cmd.validate)

from aidge_deploy.cli import campaign as campaign_cmd  # noqa: E402

app.command(name="campaign")(campaign_cmd.campaign)
from aidge_deploy.cli.farm import app as farm_app  # noqa: E402

app.add_typer(farm_app, name="farm")
from aidge_deploy.cli.power import app as power_app  # noqa: E402

app.add_typer(power_app, name="power")
from aidge_deploy.cli import mlperf as mlperf_cmd  # noqa: E402

app.command(name="reference")(mlperf_cmd.reference)
app.add_typer(mlperf_cmd.models_app, name="models")
from aidge_deploy.cli import mcp as mcp_cmd  # noqa: E402

app.command(name="mcp")(mcp_cmd.mcp)


def run_cli() -> None:
    """Console entry point: an unexpected failure is a bug: one line, the file its traceback
    is kept in and "report it", exit 3 (a user error exits 2)."""
    try:
        app()
    except Exception as exc:
        if "-v" in sys.argv or "--verbose" in sys.argv:
            raise
        from aidge_deploy.bugreport import keep_traceback

        bug = InternalError(f"Internal error: {type(exc).__name__}: {exc}")
        bug.__cause__ = exc
        bug.log_path = keep_traceback(bug, f"aidge-deploy {' '.join(sys.argv[1:])}")
        print_error(bug)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":  # pragma: no cover
    run_cli()
