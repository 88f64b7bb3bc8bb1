"""Profiling one ONNX model on one target: check every input, export (or reuse), deploy.

Why this module exists: ``aidge-deploy profile`` and the MCP server's ``profile`` tool do
exactly this, so it lives below both. ``check_profile`` refuses a bad input before anything
is exported or built (a ``DeployError`` with a hint: the dtype, the model, the calibration
inputs, the config, the target's tools, whether the iterations fit its memory, the
history); ``run_profile`` exports the model with benchmarking and per-layer profiling on
through the export cache (an unchanged model is exported once per target and settings),
deploys it in a fresh run folder under the caller's ``RunControl``, and records it in the
results history when asked. Heavy imports (``aidge_core`` through the exporter) happen
inside the functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.errors import ConfigError

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.exportcache import CachedExport
    from aidge_deploy.history.request import HistoryRequest
    from aidge_deploy.history.store import HistoryRecord
    from aidge_deploy.modelexport import ExportRequest
    from aidge_deploy.progress import ProgressCallback
    from aidge_deploy.results import DeployResult
    from aidge_deploy.runcontrol import RunControl


@dataclass(frozen=True)
class ProfileRequest:
    """What to profile, as ``aidge-deploy profile`` takes it."""

    model: Path
    target: str = "host"
    #: ``float32`` or ``int8``
    dtype: str = "float32"
    iterations: int = 10
    warmup: int = 2
    #: where the export is generated (None: the export cache)
    work_dir: Path | None = None
    #: int8: a folder of .npy/.npz inputs to calibrate on (float32: the first is the sample)
    calibration: Path | None = None
    #: further ``DeployConfig`` keyword arguments (backend, connection, counters, power...)
    config_values: Mapping[str, Any] = field(default_factory=dict)
    history: HistoryRequest | None = None


@dataclass(frozen=True)
class CheckedProfile:
    """A request whose every input was checked: nothing left to refuse before exporting."""

    request: ProfileRequest
    export_request: ExportRequest
    config: DeployConfig
    #: how many calibration inputs the int8 export is quantised on (0: one random input)
    calibration_count: int


@dataclass(frozen=True)
class ProfileOutcome:
    result: DeployResult
    export: CachedExport
    #: the run's folder (its logs; its bundle when the history asked for one)
    run_dir: Path
    record: HistoryRecord | None = None


def check_profile(request: ProfileRequest) -> CheckedProfile:
    """Every input of ``request``, checked before anything is exported or built: the one
    check of a run (``configcheck.check_run``: counts, model file, inputs, config, tools,
    memory), as ``aidge_run`` and ``deploy()`` check theirs."""
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.configcheck import check_run
    from aidge_deploy.exportcache import is_cached
    from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest

    if request.dtype not in {d.value for d in Dtype}:
        raise ConfigError(f"Unknown dtype {request.dtype!r}", hint="Use float32 or int8.")
    inputs = calibration_inputs(request.model, request.calibration, Dtype(request.dtype))
    export_request = ExportRequest(
        model=request.model,
        target=request.target,
        out_dir=Path("."),  # decided by the export cache (or work_dir)
        dtype=Dtype(request.dtype),
        kind=ApplicationKind.BENCHMARK,
        nb_iterations=request.iterations,
        nb_warmup=request.warmup,
        profiling=True,
        inputs=inputs,
    )
    if request.work_dir is not None:
        check_folder(request.work_dir, "--work-dir", must_exist=False, what="for the export")
    config = DeployConfig(target=request.target, **request.config_values)
    # bytes exported before need no parsing (nor onnx); a pipe or a device is no file, never
    # read for the export cache's key
    cached = request.model.is_file() and is_cached(export_request, work_dir=request.work_dir)
    _, checked_inputs = check_run(
        config, request.target, request=export_request, parse_model=not cached
    )
    export_request = dataclasses.replace(export_request, inputs=checked_inputs)
    if request.history is not None:
        request.history.check()
    return CheckedProfile(request, export_request, config, len(inputs))


def run_profile(
    checked: CheckedProfile,
    *,
    progress: ProgressCallback | None = None,
    control: RunControl | None = None,
    on_export: Callable[[CachedExport], None] | None = None,
) -> ProfileOutcome:
    """Export (or reuse) and deploy a checked request; record it when asked.

    ``control`` learns the run folder as soon as it exists (where an interruption's logs
    are); ``on_export`` hears of the export before the deploy starts.
    """
    from aidge_deploy.api import deploy, new_run_dir
    from aidge_deploy.progress import ProgressKind, ProgressUpdate

    request = checked.request
    run_dir = new_run_dir(request.target)
    if control is not None:
        control.log_path = run_dir
    if progress is not None:
        progress(ProgressUpdate("Export", ProgressKind.START))
    export = export_checked(checked, run_dir / "export.log")
    if progress is not None:
        progress(ProgressUpdate("Export", ProgressKind.DONE))
    if on_export is not None:
        on_export(export)
    history = request.history
    config = checked.config if history is None else history.bundle_config(checked.config, run_dir)
    result = deploy(export.artifact, config, progress=progress, work_dir=run_dir, control=control)
    record = history.record(result) if history is not None else None
    return ProfileOutcome(result, export, run_dir, record)


def export_checked(checked: CheckedProfile, log_path: Path) -> CachedExport:
    """The export of a checked request, from the export cache or made now (its log in
    ``log_path``): what a farm job of it uploads, too."""
    from aidge_deploy.exportcache import prepare_export

    return prepare_export(
        checked.export_request, work_dir=checked.request.work_dir, log_path=log_path
    )


def check_folder(path: Path, option: str, *, must_exist: bool, what: str) -> None:
    """A file where a folder is expected (or a missing folder) is a clear error, not "not found"."""
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"{option} {path} is a file, not a folder", hint=f"Pass the folder {what}."
        )
    if must_exist and not path.exists():
        raise ConfigError(f"{option} {path} does not exist", hint=f"Pass the folder {what}.")


def calibration_inputs(model: Path, folder: Path | None, dtype: Any) -> tuple[Any, ...]:
    """The inputs of ``--calibration DIR`` (checked against the model's input shape and,
    for int8, the [-1, 1] range Aidge's int8 export scales into int8); () without it."""
    if folder is None:
        return ()
    from aidge_deploy.campaign.models import load_samples
    from aidge_deploy.modelexport import Dtype, check_onnx_model, onnx_input_shapes
    from aidge_deploy.modelinputs import check_int8_range

    check_folder(folder, "--calibration", must_exist=True, what="of .npy/.npz inputs")
    check_onnx_model(model)
    shapes = onnx_input_shapes(model)
    if len(shapes) != 1:
        raise ConfigError(
            f"--calibration needs a model with one input; {model.name} has {len(shapes)}"
        )
    samples = load_samples(folder, shapes[0][1], labelled=False)
    if dtype is Dtype.INT8:
        check_int8_range(samples.arrays)
    return samples.arrays


def quantisation_note(folder: Path | None, count: int) -> str:
    """What an int8 export was quantised with, in words."""
    from aidge_deploy.campaign.plan import AIDGE_CALIBRATION_LIMIT, QUANTISATION_METHOD

    if folder is None:
        return (
            f"{QUANTISATION_METHOD}; calibrated on one random input, uniform in [-1, 1] (no "
            "--calibration DIR): the scales are not those of real inputs"
        )
    used = min(count, AIDGE_CALIBRATION_LIMIT)
    return f"{QUANTISATION_METHOD}; calibrated on {used} sample(s) from {folder}" + (
        f" (the first {used} of {count})" if used < count else ""
    )


__all__ = [
    "CheckedProfile",
    "ProfileOutcome",
    "ProfileRequest",
    "calibration_inputs",
    "check_folder",
    "check_profile",
    "export_checked",
    "quantisation_note",
    "run_profile",
]
