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
import stat
import warnings
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aidge_deploy.errors import ConfigError, DeployError

if TYPE_CHECKING:
    from aidge_deploy.profiling.binary import MemoryCapacity

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


def check_onnx_model(model: Path, *, parse: bool = True) -> None:
    """Raise ``ConfigError`` unless ``model`` is a readable ONNX model with a graph.

    Checked before Aidge sees the file: Aidge's loader answers a truncated or foreign file
    with a protobuf traceback, and an empty one with an unrelated ``max()`` error.
    ``parse=False`` checks only that it is a non-empty regular file: for bytes known to have
    been exported before (an export cache hit), which need no ``onnx`` import to trust.
    """
    hint = (
        "Pass an ONNX model file (.onnx) exported from your framework (e.g. torch.onnx.export); "
        "a truncated download or another format cannot be read."
    )
    if not model.exists():
        raise ConfigError(f"Model file {model} not found", hint="Pass a path to an .onnx file.")
    if model.is_dir():
        raise ConfigError(
            f"{model} is a folder, not a model file",
            hint="Pass a path to an .onnx file (to deploy an existing export folder, use "
            "`aidge-deploy run EXPORT_DIR`).",
        )
    try:
        info = model.stat()
    except OSError as exc:
        raise ConfigError(f"Cannot read {model}: {exc.strerror}", hint=hint) from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or read as empty
        raise ConfigError(f"{model} is not a regular file (a pipe or a device)", hint=hint)
    size = info.st_size
    if size == 0:
        raise ConfigError(f"{model} is not a valid ONNX model: the file is empty", hint=hint)
    if not parse:
        return
    import onnx
    from google.protobuf.message import DecodeError

    try:
        proto = onnx.load(str(model), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, UnicodeDecodeError) as exc:
        del exc  # the protobuf message says nothing a user can act on
        raise ConfigError(
            f"{model} is not a valid ONNX model: it cannot be read as an ONNX protobuf",
            hint=hint,
        ) from None
    except OSError as exc:
        raise ConfigError(f"Cannot read {model}: {exc.strerror}", hint=hint) from None
    if not proto.graph.node:
        raise ConfigError(f"{model} is not a valid ONNX model: its graph has no nodes", hint=hint)
    if not proto.opset_import:
        raise ConfigError(
            f"{model} is not a valid ONNX model: it declares no operator set", hint=hint
        )


def check_request(request: ExportRequest) -> None:
    """Values no export can use (``nb_warmup=-1`` would generate an endless loop)."""
    if isinstance(request.nb_iterations, bool) or request.nb_iterations < 1:
        raise ConfigError(
            f"--iterations must be at least 1, got {request.nb_iterations}",
            hint="e.g. --iterations 20",
        )
    if isinstance(request.nb_warmup, bool) or request.nb_warmup < 0:
        raise ConfigError(
            f"--warmup must be 0 or more, got {request.nb_warmup}", hint="e.g. --warmup 2"
        )
    if request.nb_validation_iterations < 0:
        raise ConfigError(
            f"nb_validation_iterations must be 0 or more, got {request.nb_validation_iterations}",
            hint="e.g. 10",
        )


#: bytes per timed iteration that Aidge's benchmark ``main()`` keeps on its stack: two
#: ``uint32_t`` arrays (ticks, cycles) on a microcontroller, one ``double`` array on Linux
TIMING_BYTES_PER_ITERATION = 8
#: the stack of a Linux program when the board's own limit is not known here (``ulimit -s``)
LINUX_DEFAULT_STACK_BYTES = 8 << 20
#: what the rest of ``main()`` and the inference need on the stack, besides the timing arrays
STACK_RESERVE_BYTES = 256 << 10


def check_iterations_fit(nb_iterations: int, target: str,
                         capacities: tuple[MemoryCapacity, ...], *,
                         local_host: bool) -> None:  # fmt: skip
    """Refuse an iteration count whose timing arrays cannot fit the program's stack.

    Aidge's benchmark templates size those arrays by ``nb_iterations`` on ``main()``'s
    stack: too many iterations crash the program (SIGSEGV on Linux, a silent hard fault on
    a microcontroller) after a full export and build. A microcontroller's stack can grow
    into all of its RAM, so the bound there is the RAM itself; a Linux program's is its stack
    limit (this machine's ``ulimit -s`` for the local host, the usual 8 MiB elsewhere).
    """
    need = nb_iterations * TIMING_BYTES_PER_ITERATION
    ram = [c.capacity for c in capacities if c.role == "ram"]
    if ram:
        room, where = sum(ram), f"the RAM of {target} ({sum(ram):,} B)"
    else:
        room, where = LINUX_DEFAULT_STACK_BYTES, "the usual Linux stack limit (8 MiB)"
        if local_host:
            import resource

            soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
            if soft == resource.RLIM_INFINITY:
                return
            room, where = soft, f"this machine's stack limit (ulimit -s: {soft:,} B)"
        room -= STACK_RESERVE_BYTES
    if need > room:
        most = max(1, room // TIMING_BYTES_PER_ITERATION)
        raise ConfigError(
            f"--iterations {nb_iterations} needs {need:,} B of timing arrays on the program's "
            f"stack, more than {where} allows",
            hint=f"Use at most {most:,} iterations per run (or several runs).",
        )


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


def export_model(request: ExportRequest, *, log_path: Path | None = None) -> object:
    """Export ``request.model`` with Aidge; returns the ``ExportArtifact``.

    ``log_path`` keeps what the exporter printed (else it goes to the debug log only).
    """
    check_request(request)
    check_onnx_model(request.model)
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
        _keep_log(log_path, captured.getvalue(), f"export failed: {type(exc).__name__}: {exc}")
        tail = "\n".join(captured.getvalue().splitlines()[-10:])
        raise DeployError(
            f"Aidge could not export {request.model.name} for {request.target}: {exc}",
            hint="Check that the model's operators are supported by the exporter"
            + (f"; exporter output:\n{tail}" if tail else "."),
            log_path=log_path,
        ) from exc
    finally:
        aidge_core.Log.set_console_level(previous_level)
    log.debug("exporter output:\n%s", captured.getvalue())
    _keep_log(log_path, captured.getvalue(), f"exported to {request.out_dir}")
    return artifact


def _keep_log(log_path: Path | None, text: str, footer: str) -> None:
    if log_path is None:
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as out:
        out.write(text + ("" if text.endswith("\n") or not text else "\n") + f"# {footer}\n")
