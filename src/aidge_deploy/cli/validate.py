"""``aidge-deploy validate MODEL.onnx --targets host,mps2-an386``: outputs of every target
against a reference run, as a target x output matrix. Exit 0 pass, 1 a check failed,
2 bad input, 128 + N stopped by signal N.

It behaves as ``profile`` does: every input is checked before anything is exported
(``validation.inputs``), Ctrl-C, SIGTERM and SIGHUP stop every target's run and say where
the logs are (``cli.runs.stoppable``), exports and builds come from the caches, and the
targets run at the same time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from aidge_deploy.cli.invocation import INVOCATION
from aidge_deploy.cli.render import console, err_console
from aidge_deploy.cli.runs import fail, stoppable
from aidge_deploy.errors import DeployError

#: ``aidge-deploy validate`` exit codes: every output within tolerance; an output of a target
#: outside it (the numbers are wrong); the command's input was refused (a user error); a
#: target could not give outputs at all (export, build, flash or run failed, or timed out:
#: a broken build, not wrong numbers — it wins over a mismatch of another target)
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2
EXIT_TARGET_FAILED = 4


def _verbose() -> bool:
    return INVOCATION.verbose


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
    work_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where the exports go (default: the export cache). An export already there "
            "for the same model and settings is checked as it is."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Run timeout per deploy, in seconds.")] = 300.0,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            envvar="AIDGE_DEPLOY_HISTORY",
            help="Record each target's run in this results history (SQLite file or URL).",
        ),
    ] = None,
    build_per_input: Annotated[
        bool,
        typer.Option(
            "--build-per-input",
            help="Export and build once per input (default: once per target, each further "
            "input a copy of the built program with its input array rewritten).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the matrix as JSON.")] = False,
) -> None:
    """Run MODEL in output mode on each target and compare every output with a reference.

    Exit 0: every output within tolerance; 1: an output differs (a mismatch); 2: bad input;
    4: a target could not run (export, build, flash or run failed, or timed out).
    """
    verbose = _verbose()
    with stoppable() as control:
        from aidge_deploy.api import new_run_dir
        from aidge_deploy.validation.inputs import check_validation
        from aidge_deploy.validation.runner import validate_model, write_validation

        try:
            request = check_validation(
                model,
                targets.split(","),
                dtype=dtype,
                inputs=inputs,
                dataset=dataset,
                report_dir=report,
                work_dir=work_dir,
                run_timeout=timeout,
                build_per_input=build_per_input,
            )
            store = _open_history(history)
        except DeployError as exc:
            raise fail(exc, verbose) from None
        run_root = new_run_dir("validate")
        control.log_path = run_root
        say = (err_console if as_json else console).print
        if len(request.targets) > 1:
            say(f"[dim]Running {', '.join(request.targets)} at the same time[/dim]")
        try:
            with control.activate():
                result = validate_model(
                    request,
                    run_root=run_root,
                    control=control,
                    history=store,
                    progress=None if as_json else lambda msg: say(f"[dim]{msg}[/dim]"),
                )
            written = write_validation(result, request.report_dir) if request.report_dir else None
        except DeployError as exc:
            raise fail(exc, verbose) from None
        finally:
            if store is not None:
                store.close()
    if as_json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
    else:
        _print(result)
        console.print(f"Logs: {run_root}", highlight=False, soft_wrap=True)
        if written is not None:
            console.print(f"Report: {written[1]}", highlight=False, soft_wrap=True)
    if not result.passed:
        for line in result.failures():
            sys.stderr.write(f"FAIL {line}\n")
    raise typer.Exit(code=exit_code(result))


def exit_code(result: Any) -> int:
    """The exit code of a finished validation (see ``EXIT_*``)."""
    if result.errors:
        return EXIT_TARGET_FAILED
    return EXIT_PASS if result.passed else EXIT_FAIL


def _open_history(location: Path | None) -> Any:
    if location is None:
        return None
    from aidge_deploy.history import HistoryStore

    return HistoryStore(location)


def _feed_text(feed: dict[str, Any]) -> str:
    """How a target was given its inputs, for people (``validation.feed``)."""
    builds = f"{feed['builds']} build(s)"
    if feed["feed"] == "one-build":
        return f"inputs fed to one build (patched copies of its program), {builds}"
    return f"one export and build per input, {builds}: {feed['reason']}"


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
    for target, how in result.exports.items():
        took = result.durations_s.get(target)
        console.print(
            f"[dim]{target}: export {how}"
            + (f", {took:.1f} s" if took is not None else "")
            + "[/dim]",
            highlight=False,
            soft_wrap=True,
        )
    for target, feed in result.feeds.items():
        if result.nb_inputs > 1:
            console.print(
                f"[dim]{target}: {_feed_text(feed)}[/dim]", highlight=False, soft_wrap=True
            )
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
