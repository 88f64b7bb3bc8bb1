"""Turn an ONNX model into an Aidge export for ``aidge-deploy profile``.

This is a convenience over the published exporter (``aidge_core.export_utils.export``);
aidge-deploy generates no model sources itself. Inputs are the caller's, or random
tensors of the model's declared shapes, uniform in [-1, 1] (Aidge's int8 export scales inputs
by 127 into int8, so larger values would overflow); they are the int8 calibration set and
the first is the exported sample input, tagged with its reference layout so Cortex-M
exports transpose it correctly.

Aidge's exporter is not thread-safe (process-wide registries, its logger, our capture of
its output) and saves a graph view into the working folder: ``export_model`` runs one
export at a time per process and sends that file into the export folder, so an export
writes nothing into the user's folder (which may be read-only). An int8 export gets each
output's quantisation scale recorded beside its manifest (``quantisation``); its
quantisation failures name their step and operator (``quantsteps``), and its activation
rows are planned densely and layout-agnostic nodes take their input's real layout
(``exportfixes``: two Aidge 0.10.1 defects, 16-byte rows that corrupt int8 layers of fewer
than 16 channels, and stale NCHW labels that scramble ResNet-8 int8 on Cortex-M).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import re
import stat
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aidge_deploy.errors import (
    ConfigError,
    DeployError,
    MemoryFitError,
    PreflightError,
    QuantisationError,
)

if TYPE_CHECKING:
    from aidge_deploy.profiling.binary import MemoryCapacity

log = logging.getLogger("aidge_deploy")

#: Aidge's exporters: importing one registers its export targets with ``aidge_core``
EXPORTER_MODULES = ("aidge_export_cpp", "aidge_export_arm_cortexm")
#: one Aidge export at a time in this process (see the module docstring)
_EXPORTING = threading.Lock()
#: where an export keeps the graph view Aidge saves (relative to the export folder)
GRAPH_VIEW_DIR = "stats"
#: Aidge calibrates an int8 export on at most this many of its input tensors
NB_CALIBRATION = 100


class Dtype(StrEnum):
    FLOAT32 = "float32"
    INT8 = "int8"


class Heuristic(StrEnum):
    """Aidge's graph-adaptation heuristic (``ExportConfig.heuristic``): how the exporter picks
    among the fused candidates of each subgraph. ``runtime`` (deploy each candidate) is not
    offered: Aidge 0.10.1 cannot reach a deploy from it (see docs/aidge-packages.md)."""

    NB_OP = "nb_op"  # fewest elementary operators, by the export libraries' priority
    COST = "cost"  # lowest adaptation cost (transposes, casts the adaptation adds)
    MEM = "mem"  # lowest planned activation memory


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
    heuristic: Heuristic = Heuristic.NB_OP
    #: Aidge's memory wrapping of activation buffers (``ExportConfig.mem_wrap``)
    mem_wrap: bool = False
    #: the model's input tensors in its reference layout: the first is the export's sample
    #: input, all of them are the int8 calibration set (random tensors when empty)
    inputs: tuple[np.ndarray, ...] = ()


def export_inputs(request: ExportRequest) -> list[np.ndarray]:
    """The input tensors an export of ``request`` is made with: the caller's, or random
    tensors of the model's shapes drawn from ``request.seed``. The first is the exported
    sample input; for int8 all of them are the calibration set."""
    rng = np.random.default_rng(request.seed)
    return [np.ascontiguousarray(a, dtype=np.float32) for a in request.inputs] or [
        rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        for _, shape in onnx_input_shapes(request.model)
    ]


def load_plugins(target: str | None = None) -> None:
    """Import Aidge's exporters (missing optional ones are skipped) and the hardware-model
    modules the registered deploy targets name (a plug-in such as ``aidge_qemu_boards``,
    found through its targets' entry points): every target's, or ``target``'s only."""
    from aidge_deploy.registry import TARGETS, target_classes

    for name in EXPORTER_MODULES:
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(name)
    classes = target_classes(target) if target is not None else TARGETS.all().values()
    for module in sorted({c.hardware_model_module for c in classes if c.hardware_model_module}):
        importlib.import_module(module)


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
                         local_host: bool,
                         bytes_per_iteration: int = TIMING_BYTES_PER_ITERATION) -> None:  # fmt: skip
    """Refuse an iteration count whose timing arrays cannot fit the program's memory.

    Benchmark entries size those arrays by ``nb_iterations``: ``bytes_per_iteration`` is
    what the target's entry keeps per timed iteration (the target class says it: Aidge's
    templates keep 8 bytes on ``main()``'s stack, the emulated boards' entry 4 in static
    RAM). Too many iterations crash the program (SIGSEGV on Linux, a silent hard fault on a
    microcontroller) or fail its link, after a full export and build. A microcontroller's
    stack can grow into all of its RAM, so the bound there is the RAM itself; a Linux
    program's is its stack limit (this machine's ``ulimit -s`` for the local host, the usual
    8 MiB elsewhere).
    """
    need = nb_iterations * bytes_per_iteration
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
        most = max(1, room // bytes_per_iteration)
        raise ConfigError(
            f"--iterations {nb_iterations} needs {need:,} B of timing arrays in the program's "
            f"memory, more than {where} allows",
            hint=f"Use at most {most:,} iterations per run (or several runs).",
        )


def onnx_input_shapes(model: Path) -> list[tuple[str, tuple[int, ...]]]:
    """The model's inputs and their shapes, a dynamic dimension taken as 1."""
    from aidge_deploy.modelinputs import model_inputs

    return [(i.name, tuple(1 if d is None else d for d in i.dims)) for i in model_inputs(model)]


@contextlib.contextmanager
def graph_view_in(folder: Path) -> Iterator[None]:
    """Aidge's export saves ``exported_graph.mmd`` at a path relative to the working folder:
    for the duration, such relative saves go into ``folder`` instead."""
    import aidge_core

    original = aidge_core.GraphView.save

    def save(graph: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        target = Path(path)
        if not target.is_absolute():
            target = folder / target
            target.parent.mkdir(parents=True, exist_ok=True)
        return original(graph, str(target), *args, **kwargs)

    with _EXPORTING:
        aidge_core.GraphView.save = save
        try:
            yield
        finally:
            aidge_core.GraphView.save = original


#: the renderer ``share_template_environments`` installed (so it is installed once), and
#: Aidge's own (``aidge``)
_SHARED_RENDERER: dict[str, Callable[..., str]] = {}


def share_template_environments() -> bool:
    """Render Aidge's templates with one Jinja environment per template folder.

    Aidge 0.10.1's ``code_generation.generate_str`` builds a new environment for every file
    it writes, so each template is parsed and compiled again for each file of each export:
    over half of an export's time. A shared environment renders the same text (same
    settings and filter; its loader still reloads a template whose file changed). Installed
    once, and only over the function it was written against (its exact signature); another
    Aidge keeps its own. True when installed.
    """
    import inspect

    from aidge_core.export_utils import code_generation

    current = code_generation.generate_str
    if current is _SHARED_RENDERER.get("generate_str"):
        return True
    params = list(inspect.signature(current).parameters)
    if params != ["template_path", "kwargs"]:
        return False
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    environments: dict[Path, Environment] = {}

    def generate_str(template_path: Path | str, **kwargs: object) -> str:
        path = Path(template_path)
        env = environments.get(path.parent)
        if env is None:
            env = Environment(
                loader=FileSystemLoader(path.parent),
                undefined=StrictUndefined,
                keep_trailing_newline=True,
            )
            env.filters["c_literal"] = code_generation.value_to_c_literal
            environments[path.parent] = env
        return env.get_template(path.name).render(kwargs)

    _SHARED_RENDERER.update(aidge=current, generate_str=generate_str)
    code_generation.generate_str = generate_str
    return True


def export_model(request: ExportRequest, *, log_path: Path | None = None) -> object:
    """Export ``request.model`` with Aidge; returns the ``ExportArtifact``.

    ``log_path`` keeps what the exporter printed (else it goes to the debug log only).
    """
    from aidge_deploy.exportfixes import dense_activation_rows, layouts_from_parents
    from aidge_deploy.quantsteps import check_weight_types, named_steps

    check_request(request)
    check_onnx_model(request.model)
    check_weight_types(request.model, request.dtype.value)
    load_plugins(request.target)
    share_template_environments()
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
    arrays = export_inputs(request)
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
        heuristic=request.heuristic.value,
        mem_wrap=request.mem_wrap,
        application=application,
    )
    captured = io.StringIO()
    out_dir = Path(request.out_dir).absolute()
    with graph_view_in(out_dir / GRAPH_VIEW_DIR):
        # Aidge's C++ logger writes to the terminal directly: only errors, unless debugging
        previous_level = aidge_core.Log.get_console_level()
        if not log.isEnabledFor(logging.DEBUG):
            aidge_core.Log.set_console_level(aidge_core.Level.Error)
        try:
            # the exporter prints progress and plots a memory chart (matplotlib warnings):
            # keep both out of the user's terminal, in the debug log instead
            with (
                contextlib.redirect_stdout(captured),
                contextlib.redirect_stderr(captured),
                warnings.catch_warnings(),
                named_steps(),
                dense_activation_rows(),
                layouts_from_parents(),
            ):
                warnings.simplefilter("ignore")
                peaks = (
                    _calibration_peaks(request.model, arrays[:NB_CALIBRATION])
                    if request.dtype == Dtype.INT8
                    else None
                )
                graph = aidge_onnx.load_onnx(str(request.model))
                artifact = export(graph, config, input_tensors=tensors)
                if peaks is not None:
                    _record_quantisation(artifact, peaks, min(len(arrays), NB_CALIBRATION))
        except Exception as exc:
            _keep_log(log_path, captured.getvalue(), f"export failed: {type(exc).__name__}: {exc}")
            raise _export_error(request, exc, captured.getvalue(), log_path) from exc
        finally:
            aidge_core.Log.set_console_level(previous_level)
    log.debug("exporter output:\n%s", captured.getvalue())
    _keep_log(log_path, captured.getvalue(), f"exported to {request.out_dir}")
    return artifact


def _bsp_download_failure(request: ExportRequest, exc: Exception) -> PreflightError | None:
    """The exporter could not download the board's BSP: a missing tool of this machine, said
    in the words of ``doctor``'s row for it (``bspcheck``)."""
    from aidge_deploy.bspcheck import DOWNLOAD_FAILURE, bsp_check

    if DOWNLOAD_FAILURE not in str(exc):
        return None
    import aidge_core

    check = bsp_check(aidge_core.hw_model.get_target_class(request.target)())
    if check is None or check.ok:
        return None
    return PreflightError(f"Missing BSP package: {check.detail}: {exc}", hint=check.hint)


def _export_error(
    request: ExportRequest, exc: Exception, output: str, log_path: Path | None
) -> DeployError:
    """The export's failure with a hint about what failed: a file it could not write, an
    operator it does not support, a BSP it could not download, or else the exporter's own
    last words."""
    if isinstance(exc, QuantisationError):
        exc.log_path = exc.log_path or log_path
        return exc
    text = f"{type(exc).__name__}: {exc}"
    missing_bsp = _bsp_download_failure(request, exc)
    if missing_bsp is not None:
        return missing_bsp
    no_room = _activations_do_not_fit(request, exc, log_path)
    if no_room is not None:
        return no_room
    tail = "\n".join(output.splitlines()[-10:])
    lowered = f"{exc}\n{tail}".lower()
    if isinstance(exc, OSError) or any(
        w in lowered for w in ("could not create", "permission denied", "read-only file system")
    ):
        hint = (
            f"Aidge could not write a file of the export: check that {request.out_dir} is on "
            "a writable file system with free space"
        )
    elif any(
        w in lowered
        for w in (
            "not supported",
            "unsupported",
            "no implementation",
            "implementation for",
            "registrar",
        )
    ):
        hint = "An operator of the model is not supported by the exporter of this target"
    elif request.heuristic is Heuristic.MEM and "clone" in str(exc):
        hint = (
            "Aidge 0.10.1's 'mem' heuristic fails on every model (its evaluate_mem_peak "
            "returns the peak, not the chosen graph): use the nb_op or cost heuristic"
        )
    else:
        hint = f"The exporter failed ({type(exc).__name__}); its output says why"
    if log_path is not None:
        hint += f"; its full output is in {log_path}"
    return DeployError(
        f"Aidge could not export {request.model.name} for {request.target}: {text}",
        hint=hint + (f". Exporter output:\n{tail}" if tail else "."),
        log_path=log_path,
    )


#: Aidge's memory planner when an activation buffer exceeds what is left of the board's RAM
_NO_ROOM = re.compile(
    r"Unable to allocate memory of size (\d+) in component (\d+) \(available: (\d+)\)"
)


def _activations_do_not_fit(
    request: ExportRequest, exc: BaseException, log_path: Path | None
) -> MemoryFitError | None:
    """Aidge's memory planner refusing a buffer (the board's RAM is its capacity) as the
    fit error it is, before any build: the memory, the need and what was left."""
    found = _NO_ROOM.search(str(exc))
    if found is None:
        return None
    need, component, available = (int(g) for g in found.groups())
    return MemoryFitError(
        f"{request.model.name} does not fit {request.target}: an activation buffer of "
        f"{need:,} B does not fit its RAM as Aidge plans it ({available:,} B left in memory "
        f"component {component}; the planner stops at the first buffer that does not fit)",
        hint="Export int8 (a quarter of float32's bytes), or choose a board with more RAM "
        "(`aidge-deploy targets` lists their memories).",
        log_path=log_path,
        stage="Export",
    )


@dataclass(frozen=True)
class OutputPeak:
    """The size and largest magnitude of one float output over the calibration inputs, and
    of its logits when the model ends that output with a Softmax (an int8 export ends
    before it: its integers are the quantised logits)."""

    size: int
    peak: float
    logits_peak: float | None = None


def _calibration_peaks(model: Path, arrays: Sequence[np.ndarray]) -> list[OutputPeak]:
    from aidge_deploy.quantsteps import STEP_OUTPUT_RANGES, quantisation_failure

    try:
        return _output_peaks(model, arrays)
    except Exception as exc:
        raise quantisation_failure(STEP_OUTPUT_RANGES, exc) from exc


def _output_peaks(model: Path, arrays: Sequence[np.ndarray]) -> list[OutputPeak]:
    """Each float output's peak over ``arrays`` (the calibration inputs), in the model's
    output order: the range Aidge's MAX clipping quantises each output to."""
    import aidge_core
    import aidge_onnx

    graph = aidge_onnx.load_onnx(str(model))
    graph.set_backend("cpu")
    graph.set_datatype(aidge_core.dtype.float32)
    scheduler = aidge_core.SequentialScheduler(graph)
    found: list[OutputPeak] = []
    for array in arrays:
        tensor = aidge_core.Tensor(np.ascontiguousarray(array, dtype=np.float32))
        tensor.set_backend("cpu")
        scheduler.forward(True, [tensor])
        now = []
        for node, index in graph.get_ordered_outputs():
            value = np.array(node.get_operator().get_output(index))
            logits = (
                np.array(node.get_operator().get_input(0)) if node.type() == "Softmax" else None
            )
            now.append(
                OutputPeak(
                    int(value.size),
                    float(np.max(np.abs(value))) if value.size else 0.0,
                    None if logits is None else float(np.max(np.abs(logits))),
                )
            )
        found = now if not found else [_widest(a, b) for a, b in zip(found, now, strict=True)]
    return found


def _widest(a: OutputPeak, b: OutputPeak) -> OutputPeak:
    logits = None if a.logits_peak is None else max(a.logits_peak, b.logits_peak or 0.0)
    return OutputPeak(a.size, max(a.peak, b.peak), logits)


def _record_quantisation(artifact: Any, peaks: Sequence[OutputPeak], samples: int) -> None:
    """Write each quantised output's scale beside the export's manifest. Aidge 0.10.1's int8
    export ends before a model's final Softmax (its output is the last FC's): such an output
    is recorded with its logits' scale and the Softmax the deploy applies to it."""
    from aidge_deploy.quantisation import is_quantised, symmetric_int8, write_quantisation

    outputs = list(artifact.manifest.outputs)
    if not all(is_quantised(str(o.get("dtype"))) for o in outputs):
        return
    order = match_outputs(outputs, [p.size for p in peaks])
    recorded = []
    for spec, k in zip(outputs, order, strict=True):
        peak = peaks[k]
        before_softmax = peak.logits_peak is not None and "softmax" not in str(spec["name"]).lower()
        recorded.append(
            symmetric_int8(
                str(spec["name"]),
                str(spec["dtype"]),
                peak.logits_peak if before_softmax and peak.logits_peak is not None else peak.peak,
                samples,
                softmax_after=before_softmax,
            )
        )
    write_quantisation(Path(artifact.path), recorded)


def match_outputs(manifest_outputs: Sequence[dict[str, Any]], sizes: Sequence[int]) -> list[int]:
    """For each exported output, the index of the model output it is.

    The export names outputs after its scheduled nodes and may order them differently
    from the ONNX graph: they are matched by size, in order among outputs of equal size.
    """
    if len(manifest_outputs) != len(sizes):
        raise ConfigError(
            f"the export has {len(manifest_outputs)} outputs, the model {len(sizes)}",
            hint="Validate exports of this very model.",
        )
    free = list(range(len(sizes)))
    order = []
    for spec in manifest_outputs:
        match = next((i for i in free if sizes[i] == int(spec["size"])), None)
        if match is None:
            raise ConfigError(
                f"no model output has the {spec['size']} values of exported output {spec['name']}"
            )
        free.remove(match)
        order.append(match)
    return order


def _keep_log(log_path: Path | None, text: str, footer: str) -> None:
    if log_path is None:
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as out:
        out.write(text + ("" if text.endswith("\n") or not text else "\n") + f"# {footer}\n")
