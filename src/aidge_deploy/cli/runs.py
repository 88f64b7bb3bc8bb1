"""What ``run`` and ``profile`` do once their options are parsed.

Why this module exists: both commands check every input *before* anything is exported or
built (exit 2 with a message and a hint), run under a ``RunControl`` whose signal handlers
turn Ctrl-C, SIGTERM and SIGHUP into a clean stop (every process of the run killed,
"interrupted" and the log folder printed, exit 128 + the signal), and print the results
even when the result bundle could not be written afterwards. What ``profile`` checks and
runs is ``modelprofile`` (the MCP server's ``profile`` tool calls it too); here is what the
terminal shows of it. ``main.py`` only declares the options. Heavy imports (``aidge_core`` through the API) happen inside the functions:
``aidge-deploy --help`` must stay fast.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aidge_deploy.cli.render import console, err_console, error_exit, progress_display
from aidge_deploy.errors import DeployError, ReportError
from aidge_deploy.runcontrol import RunControl, RunInterrupted, interruptible, signal_name

if TYPE_CHECKING:
    from aidge_deploy.exportcache import CachedExport
    from aidge_deploy.history.request import HistoryRequest
    from aidge_deploy.history.store import HistoryRecord
    from aidge_deploy.modelprofile import ProfileRequest
    from aidge_deploy.progress import ProgressCallback
    from aidge_deploy.results import DeployResult


def fail(exc: DeployError, verbose: bool) -> typer.Exit:
    """Print ``exc`` (message, log, hint; traceback with -v): the exit to raise (status 2, or
    3 for a bug)."""
    return error_exit(exc, verbose=verbose)


def emit(result: DeployResult, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        from aidge_deploy.cli.render import print_result

        print_result(result)


def print_interrupted(exc: RunInterrupted) -> None:
    """Say the run was stopped and where its logs are (the terminal may be gone: SIGHUP)."""
    cause = signal_name(exc.signal_number) if exc.signal_number else exc.reason
    try:
        err_console.print(
            f"[bold yellow]Interrupted[/bold yellow] ({cause}): the run was stopped; "
            "none of its processes is left running.",
            highlight=False,
        )
        if exc.log_path is not None and Path(exc.log_path).exists():
            err_console.print(
                f"  [bold]Log:[/bold] {exc.log_path}", highlight=False, soft_wrap=True
            )
        else:
            err_console.print("  Stopped while checking the inputs: nothing was exported, "
                              "built or run.", highlight=False)  # fmt: skip
    except OSError:
        pass


@contextlib.contextmanager
def stoppable() -> Iterator[RunControl]:
    """The control of one command, with Ctrl-C, SIGTERM and SIGHUP handled from its first
    input check to its last line: a signal at any point prints "Interrupted" (and the log
    folder once the run has one) and exits 128 + the signal, never a silent kill."""
    control = RunControl()
    try:
        with interruptible(control):
            yield control
    except RunInterrupted as exc:
        if exc.log_path is None:
            exc.log_path = control.log_path
        print_interrupted(exc)
        raise typer.Exit(code=exc.exit_status) from None


def supervised(
    control: RunControl,
    body: Callable[[RunControl, ProgressCallback], DeployResult],
    *,
    as_json: bool,
    verbose: bool,
) -> None:
    """Run ``body`` under ``control`` (from ``stoppable``); print the result.

    ``body`` gets the control (to record the run's log folder) and the progress callback.
    """
    try:
        with control.activate(), progress_display(not as_json) as progress:
            result = body(control, progress)
    except ReportError as exc:
        if exc.result is not None:  # the run succeeded; only its bundle could not be written
            emit(exc.result, as_json)
        raise fail(exc, verbose) from None
    except DeployError as exc:
        raise fail(exc, verbose) from None
    emit(result, as_json)
    if result.power is not None and result.power.invalid:
        # the figures were printed and kept, but they are not what they say: no silent pass
        from aidge_deploy.cli.render import EXIT_POWER_INVALID

        raise typer.Exit(code=EXIT_POWER_INVALID)


def record_in_history(history: HistoryRequest, result: DeployResult) -> None:
    """Record ``result`` and say where."""
    _said_recorded(history, history.record(result))


def _said_recorded(history: HistoryRequest, record: HistoryRecord) -> None:
    """Where the run was recorded, on stderr (stdout may be JSON)."""
    where = f" at {record.vcs.short}" if record.vcs.commit else ""
    err_console.print(
        f"[dim]Recorded in {history.location} as {record.identity.describe()}{where}[/dim]",
        highlight=False,
        soft_wrap=True,
    )


def run_export(
    export_dir: Path,
    config_values: dict[str, Any],
    *,
    as_json: bool,
    verbose: bool,
    history: HistoryRequest | None = None,
) -> None:
    """``aidge-deploy run``: deploy an existing export folder."""
    with stoppable() as control:
        from aidge_deploy.api import deploy, new_run_dir
        from aidge_deploy.config import DeployConfig
        from aidge_deploy.modelprofile import check_folder

        try:
            check_folder(
                export_dir, "EXPORT_DIR", must_exist=True, what="holding .aidge-export.json"
            )
            config = DeployConfig(**config_values)
            config.check_values()
            if config.report_dir is not None:
                from aidge_deploy.report.destination import check_report_dir

                check_report_dir(config.report_dir, overwrite=config.report_overwrite)
            if history is not None:
                history.check()
        except DeployError as exc:
            raise fail(exc, verbose) from None

        def body(control: RunControl, progress: ProgressCallback) -> DeployResult:
            if history is None:
                return deploy(export_dir, config, progress=progress, control=control)
            run_dir = new_run_dir(config.target or "run")
            control.log_path = run_dir
            result = deploy(
                export_dir,
                history.bundle_config(config, run_dir),
                progress=progress,
                control=control,
                work_dir=run_dir,
            )
            record_in_history(history, result)
            return result

        supervised(control, body, as_json=as_json, verbose=verbose)


def profile_model(request: ProfileRequest, *, as_json: bool, verbose: bool) -> None:
    """``aidge-deploy profile``: export the model (or reuse its cached export) and deploy it
    (``modelprofile``), saying which export it used."""
    with stoppable() as control:
        from aidge_deploy.modelexport import Dtype
        from aidge_deploy.modelprofile import check_profile, quantisation_note, run_profile

        try:
            checked = check_profile(request)
        except DeployError as exc:
            raise fail(exc, verbose) from None
        out = err_console if as_json else console

        def said(export: CachedExport) -> None:
            how = (
                "reused: same model, target and settings"
                if export.reused
                else f"exported in {export.duration_s:.1f} s"
            )
            out.print(
                f"[bold]Export:[/bold] {export.path} [dim]({how})[/dim]",
                highlight=False,
                soft_wrap=True,
            )
            if checked.export_request.dtype is Dtype.INT8:
                note = quantisation_note(request.calibration, checked.calibration_count)
                out.print(f"[bold]int8:[/bold] {note}", highlight=False)

        def body(control: RunControl, progress: ProgressCallback) -> DeployResult:
            outcome = run_profile(checked, progress=progress, control=control, on_export=said)
            if outcome.record is not None and request.history is not None:
                _said_recorded(request.history, outcome.record)
            return outcome.result

        supervised(control, body, as_json=as_json, verbose=verbose)


__all__ = [
    "emit",
    "fail",
    "print_interrupted",
    "profile_model",
    "record_in_history",
    "run_export",
    "stoppable",
    "supervised",
]
