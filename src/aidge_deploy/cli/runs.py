"""What ``run`` and ``profile`` do once their options are parsed.

Why this module exists: both commands check every input *before* anything is exported or
built (exit 2 with a message and a hint), run under a ``RunControl`` whose signal handlers
turn Ctrl-C, SIGTERM and SIGHUP into a clean stop (every process of the run killed,
"interrupted" and the log folder printed, exit 128 + the signal), and print the results
even when the result bundle could not be written afterwards. ``main.py`` only declares
the options. Heavy imports (``aidge_core`` through the API) happen inside the functions:
``aidge-deploy --help`` must stay fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aidge_deploy.cli.render import console, err_console, error_exit, progress_display
from aidge_deploy.errors import ConfigError, DeployError, ReportError
from aidge_deploy.runcontrol import RunControl, RunInterrupted, interruptible, signal_name

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
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


def check_folder_arg(path: Path, option: str, *, must_exist: bool, what: str) -> None:
    """A file where a folder is expected (or a missing folder) is a clear error, not "not found"."""
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"{option} {path} is a file, not a folder", hint=f"Pass the folder {what}."
        )
    if must_exist and not path.exists():
        raise ConfigError(f"{option} {path} does not exist", hint=f"Pass the folder {what}.")


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


@dataclass(frozen=True)
class HistoryRequest:
    """``--history FILE``: where to record the run, and under which name."""

    location: Path
    name: str
    source: str

    @classmethod
    def of(cls, location: Path | None, name: str, source: str) -> HistoryRequest | None:
        return None if location is None else cls(location, name, source)

    def check(self) -> None:
        """Open (or create) the history before the run: a bad path costs nothing."""
        from aidge_deploy.history.store import HistoryStore

        HistoryStore(self.location).close()

    def bundle_config(self, config: DeployConfig, run_dir: Path) -> DeployConfig:
        """The run's config, with a bundle in its run folder when it writes none (the
        history records a run from its bundle)."""
        if config.report_dir is not None:
            return config
        return dataclasses.replace(config, report_dir=run_dir / "bundle")

    def record(self, result: DeployResult) -> None:
        from aidge_deploy.history.store import HistoryStore

        with HistoryStore(self.location) as store:
            record = store.record(result, self.name, board=result.farm_board, source=self.source)
        where = f" at {record.vcs.short}" if record.vcs.commit else ""
        err_console.print(
            f"[dim]Recorded in {self.location} as {record.identity.describe()}{where}[/dim]",
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

        try:
            check_folder_arg(
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
            history.record(result)
            return result

        supervised(control, body, as_json=as_json, verbose=verbose)


def profile_model(
    model: Path,
    *,
    target: str,
    dtype: str,
    iterations: int,
    warmup: int,
    work_dir: Path | None,
    config_values: dict[str, Any],
    as_json: bool,
    verbose: bool,
    history: HistoryRequest | None = None,
    calibration: Path | None = None,
) -> None:
    """``aidge-deploy profile``: export ``model`` (or reuse its cached export) and deploy it.

    ``calibration``: a folder of inputs; int8 exports are quantised on them (float32 ones
    take the first as their sample input).
    """
    with stoppable() as control:
        from aidge_deploy.api import deploy, new_run_dir
        from aidge_deploy.config import DeployConfig
        from aidge_deploy.configcheck import check_deploy_config
        from aidge_deploy.exportcache import is_cached, prepare_export
        from aidge_deploy.modelexport import (
            ApplicationKind,
            Dtype,
            ExportRequest,
            check_iterations_fit,
            check_onnx_model,
            check_request,
        )
        from aidge_deploy.progress import ProgressKind, ProgressUpdate
        from aidge_deploy.registry import DeployTarget

        try:
            if dtype not in {d.value for d in Dtype}:
                raise ConfigError(f"Unknown dtype {dtype!r}", hint="Use float32 or int8.")
            check_onnx_model(model, parse=False)
            inputs = calibration_inputs(model, calibration, Dtype(dtype))
            request = ExportRequest(
                model=model,
                target=target,
                out_dir=Path("."),  # decided by the export cache (or --work-dir)
                dtype=Dtype(dtype),
                kind=ApplicationKind.BENCHMARK,
                nb_iterations=iterations,
                nb_warmup=warmup,
                profiling=True,
                inputs=inputs,
            )
            check_request(request)
            if not is_cached(request, work_dir=work_dir):
                check_onnx_model(model)  # bytes exported before need no parsing (nor onnx)
            if work_dir is not None:
                check_folder_arg(work_dir, "--work-dir", must_exist=False, what="for the export")
            config: DeployConfig = DeployConfig(target=target, **config_values)
            implementation = check_deploy_config(config, target)  # values, backend, tools...
            local = (
                implementation
                if isinstance(implementation, DeployTarget)
                else implementation.local_target_class  # a farm runs the target's own entry
            )
            check_iterations_fit(
                iterations,
                target,
                implementation.memory_capacities(),
                local_host=target == "host"
                and config.backend_kind == "local"
                and not config.docker_image,
                bytes_per_iteration=local.benchmark_bytes_per_iteration,
            )
            if not is_cached(request, work_dir=work_dir):  # a cached export was built before
                from aidge_deploy.modelfit import check_model_fits

                check_model_fits(model, dtype, target, implementation.memory_capacities())
            if history is not None:
                history.check()
        except DeployError as exc:
            raise fail(exc, verbose) from None

        def body(control: RunControl, progress: ProgressCallback) -> DeployResult:
            run_dir = new_run_dir(target)
            control.log_path = run_dir
            progress(ProgressUpdate("Export", ProgressKind.START))
            export = prepare_export(request, work_dir=work_dir, log_path=run_dir / "export.log")
            progress(ProgressUpdate("Export", ProgressKind.DONE))
            how = (
                "reused: same model, target and settings"
                if export.reused
                else f"exported in {export.duration_s:.1f} s"
            )
            out = err_console if as_json else console
            out.print(
                f"[bold]Export:[/bold] {export.path} [dim]({how})[/dim]",
                highlight=False,
                soft_wrap=True,
            )
            if request.dtype is Dtype.INT8:
                out.print(quantisation_line(calibration, len(inputs)), highlight=False)
            if history is None:
                return deploy(export.artifact, config, progress=progress, work_dir=run_dir)
            run_config = history.bundle_config(config, run_dir)
            result = deploy(export.artifact, run_config, progress=progress, work_dir=run_dir)
            history.record(result)
            return result

        supervised(control, body, as_json=as_json, verbose=verbose)


def calibration_inputs(model: Path, folder: Path | None, dtype: Any) -> tuple[Any, ...]:
    """The inputs of ``--calibration DIR`` (checked against the model's input shape and,
    for int8, the [-1, 1] range Aidge's int8 export scales into int8); () without it."""
    if folder is None:
        return ()
    from aidge_deploy.campaign.models import load_samples
    from aidge_deploy.modelexport import Dtype, check_onnx_model, onnx_input_shapes

    check_folder_arg(folder, "--calibration", must_exist=True, what="of .npy/.npz inputs")
    check_onnx_model(model)
    shapes = onnx_input_shapes(model)
    if len(shapes) != 1:
        raise ConfigError(
            f"--calibration needs a model with one input; {model.name} has {len(shapes)}"
        )
    samples = load_samples(folder, shapes[0][1], labelled=False)
    if dtype is Dtype.INT8:
        peak = max(float(abs(x).max()) for x in samples.arrays)
        if peak > 1.0:
            raise ConfigError(
                f"--calibration inputs reach {peak:.3g}, outside [-1, 1]",
                hint="Aidge's int8 export scales inputs by 127 into int8: normalise them.",
            )
    return samples.arrays


def quantisation_line(folder: Path | None, count: int) -> str:
    """What an int8 export was quantised with, as ``profile`` says it."""
    from aidge_deploy.campaign.plan import AIDGE_CALIBRATION_LIMIT, QUANTISATION_METHOD

    if folder is None:
        return (
            f"[bold]int8:[/bold] {QUANTISATION_METHOD}; calibrated on one random input, "
            "uniform in [-1, 1] (no --calibration DIR): the scales are not those of real inputs"
        )
    used = min(count, AIDGE_CALIBRATION_LIMIT)
    return (
        f"[bold]int8:[/bold] {QUANTISATION_METHOD}; calibrated on {used} sample(s) from "
        f"{folder}" + (f" (the first {used} of {count})" if used < count else "")
    )


__all__ = [
    "HistoryRequest",
    "calibration_inputs",
    "check_folder_arg",
    "emit",
    "fail",
    "print_interrupted",
    "profile_model",
    "quantisation_line",
    "run_export",
    "stoppable",
    "supervised",
]
