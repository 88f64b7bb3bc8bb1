"""Turn an ONNX model into an Aidge export for ``aidge-deploy profile``.

This is a convenience over the published exporter (``aidge_core.export_utils.export``);
aidge-deploy generates no model sources itself. Inputs are the caller's, or random
tensors of the model's declared shapes, uniform in [-1, 1] (Aidge's int8 export scales inputs
by 127 into int8, so larger values would overflow); they are the int8 calibration set and
the first is the exported sample input, tagged with its reference layout so Cortex-M
exports transpose it correctly.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import warnings
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np

from aidge_deploy.errors import ConfigError, DeployError

log = logging.getLogger("aidge_deploy")

#: Packages that register extra hardware targets and exporters when imported.
PLUGIN_MODULES = ("aidge_export_cpp", "aidge_export_arm_cortexm", "aidge_qemu_boards")


class Dtype(StrEnum):
    FLOAT32 = "float32"
    INT8 = "int8"


class ApplicationKind(StrEnum):
    STANDALONE = "standalone"
    OUTPUT = "output"
    BENCHMARK = "benchmark"
    VALIDATION = "validation"


@dataclass(frozen=True)
class ExportRequest:
    model: Path
    target: str
    out_dir: Path
    dtype: Dtype = Dtype.FLOAT32
    kind: ApplicationKind = ApplicationKind.BENCHMARK
    nb_iterations: int = 10
    nb_warmup: int = 2
    profiling: bool = True
    tinymlbenchmark: bool = False
    nb_validation_iterations: int = 0
    seed: int = 0
    #: the model's input tensors in its reference layout: the first is the export's sample
    #: input, all of them are the int8 calibration set (random tensors when empty)
    inputs: tuple[np.ndarray, ...] = ()


def load_plugins() -> None:
    """Import the packages that register targets (missing optional ones are skipped)."""
    for name in PLUGIN_MODULES:
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(name)


def onnx_input_shapes(model: Path) -> list[tuple[str, tuple[int, ...]]]:
    import onnx

    proto = onnx.load(str(model), load_external_data=False)
    initializers = {i.name for i in proto.graph.initializer}
    shapes = []
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        dims = []
        for d in value.type.tensor_type.shape.dim:
            dims.append(d.dim_value if d.dim_value > 0 else 1)
        shapes.append((value.name, tuple(dims)))
    return shapes


def export_model(request: ExportRequest) -> object:
    """Export ``request.model`` with Aidge; returns the ``ExportArtifact``."""
    if not request.model.is_file():
        raise ConfigError(
            f"Model file {request.model} not found", hint="Pass a path to an .onnx file."
        )
    load_plugins()
    import aidge_backend_cpu  # noqa: F401  - registers the CPU kernels used for calibration
    import aidge_core
    import aidge_onnx
    from aidge_core.export_utils import ExportApplication, export
    from aidge_core.export_utils.config import ExportConfig

    try:
        aidge_core.hw_model.get_target_class(request.target)
    except KeyError as exc:
        raise ConfigError(
            f"Unknown hardware target {request.target!r}",
            hint="See `aidge-deploy targets` for the registered targets.",
        ) from exc
    rng = np.random.default_rng(request.seed)
    arrays = [np.ascontiguousarray(a, dtype=np.float32) for a in request.inputs] or [
        rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        for _, shape in onnx_input_shapes(request.model)
    ]
    tensors = []
    for array in arrays:
        shape = array.shape
        tensor = aidge_core.Tensor(array)
        tensor.set_backend("cpu")
        layout = {4: aidge_core.dformat.nchw, 3: aidge_core.dformat.ncw, 2: aidge_core.dformat.nc}
        if len(shape) in layout:
            tensor.to_dformat(layout[len(shape)])
        tensors.append(tensor)
    application = ExportApplication(
        kind=request.kind.value,
        nb_warmup=request.nb_warmup,
        nb_iterations=request.nb_iterations,
        profiling=request.profiling,
        validation=request.kind == ApplicationKind.VALIDATION,
        nb_validation_iterations=request.nb_validation_iterations,
        tinymlbenchmark=request.tinymlbenchmark,
    )
    config = ExportConfig(
        target=request.target,
        export_folder=str(request.out_dir),
        dtype=request.dtype.value,
        compile=False,
        clone_model=False,
        cuda=False,  # calibration on the CPU backend: no CUDA probe, no warning about it
        application=application,
    )
    captured = io.StringIO()
    # Aidge's C++ logger writes to the terminal directly: only errors, unless debugging
    previous_level = aidge_core.Log.get_console_level()
    if not log.isEnabledFor(logging.DEBUG):
        aidge_core.Log.set_console_level(aidge_core.Level.Error)
    try:
        # the exporter prints progress and plots a memory chart (matplotlib warnings): keep
        # both out of the user's terminal, in the debug log instead
        with (
            contextlib.redirect_stdout(captured),
            contextlib.redirect_stderr(captured),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            graph = aidge_onnx.load_onnx(str(request.model))
            artifact = export(graph, config, input_tensors=tensors)
    except Exception as exc:
        tail = "\n".join(captured.getvalue().splitlines()[-10:])
        raise DeployError(
            f"Aidge could not export {request.model.name} for {request.target}: {exc}",
            hint="Check that the model's operators are supported by the exporter"
            + (f"; exporter output:\n{tail}" if tail else "."),
        ) from exc
    finally:
        aidge_core.Log.set_console_level(previous_level)
    log.debug("exporter output:\n%s", captured.getvalue())
    return artifact
