"""Every deploy target as an ``aidge_benchmark`` backend: ``aidge_deploy.<target>``.

Why this module exists: ``aidge_benchmark`` (Aidge's own tool that compares inference
libraries on a model) finds a backend by name in its registries
(``registrations.register_backend_inference`` / ``register_backend_time``, names
lower-cased) and, on its command line, first imports the name as a module
(``dynamic_lib_import.load_package``). Importing ``aidge_deploy.benchmark_targets``
registers every registered deploy target under ``aidge_deploy.<target>``
(``register_backends``); importing ``aidge_deploy.<target>`` itself
(what its CLI does) works through ``install_finder``, a finder for those names installed by
``aidge_deploy/__init__``, whose module registers that target's backends.

A backend's name contains "aidge", so ``aidge_benchmark`` hands it an Aidge graph (an ONNX
model from the Python API also works); it is written to ONNX once per content and exported
through the same export cache as ``profile``, float32, the given input as the sample.
The inference function returns the outputs in the model's shapes; the timing function
returns seconds, one per timed run, as ``aidge_benchmark`` expects — whatever the target's
timer is. What those seconds are (measured on the host, estimated from an emulator's counts,
measured on silicon), their resolution and the export are kept beside, in ``last_run``.

The published Cortex-M backend (``aidge_export_arm_cortexm``, registered by that package)
returns ``aidge_deploy.benchmark_api``'s milliseconds from its timing function, where
``aidge_benchmark`` expects seconds (its own example multiplies every other backend by 1e3
and not that one). ``register_backends`` wraps it to return seconds too, once, and says so
in the wrapper's ``__doc__``.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import sys
import tempfile
import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PREFIX = "aidge_deploy."
#: the published Cortex-M backend's names (``aidge_export_arm_cortexm/__init__.py``)
CORTEXM_BACKENDS = ("aidge_export_arm_cortexm", "aidgeexport arm cortex-m")
_SECONDS_MARK = "_aidge_deploy_seconds"


@dataclass(frozen=True)
class BackendRun:
    """What the last timing call of a backend measured, beside its seconds."""

    backend: str
    target: str
    times_s: tuple[float, ...]
    #: silicon / host / emulated / estimated: what the times are
    provenance: str
    #: the timer's own words ("estimated (M4 timing model) at 25 MHz", ...)
    timing_label: str | None
    resolution_s: float | None
    export: str


_RUNS: dict[str, BackendRun] = {}
_LOCK = threading.Lock()


def backend_name(target: str) -> str:
    return f"{PREFIX}{target}"


def last_run(backend: str) -> BackendRun | None:
    """The last timing run of ``backend`` (``aidge_deploy.mps2-an386``) in this process."""
    with _LOCK:
        return _RUNS.get(backend.lower())


def _model_file(model: Any, inputs: Sequence[Any] = ()) -> Path:
    """An ONNX file of ``model`` (an Aidge graph or an ``onnx.ModelProto``), named by its
    content so that the export cache finds an unchanged model again."""
    from aidge_deploy.cachedir import default_cache_root

    folder = default_cache_root() / "benchmark-models"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        staged = Path(scratch) / "model.onnx"
        if hasattr(model, "SerializeToString"):
            staged.write_bytes(model.SerializeToString())
        else:
            import aidge_onnx

            if inputs:  # aidge_onnx writes a graph whose tensors have their dimensions
                model.forward_dims([list(a.shape) for a in _arrays(inputs)], True)
            aidge_onnx.export_onnx(model, str(staged))
        digest = hashlib.sha256(staged.read_bytes()).hexdigest()[:24]
        final = folder / f"{digest}.onnx"
        if not final.exists():
            staged.replace(final)
    return final


def _arrays(inputs: Sequence[Any]) -> tuple[Any, ...]:
    import numpy as np

    return tuple(np.ascontiguousarray(getattr(i, "array", i), dtype=np.float32) for i in inputs)


def _export(target: str, model: Any, inputs: Sequence[Any], kind: Any, **settings: Any) -> Any:
    from aidge_deploy.exportcache import prepare_export
    from aidge_deploy.modelexport import ExportRequest

    arrays = _arrays(inputs)
    request = ExportRequest(
        model=_model_file(model, inputs), target=target, out_dir=Path("."), kind=kind,
        inputs=arrays[:1], **settings,
    )  # fmt: skip
    return prepare_export(request)


def compute_output(target: str, model: Any, inputs: Sequence[Any]) -> list[Any]:
    """The model's outputs on ``inputs[0]`` run on ``target``, in the model's shapes."""
    import numpy as np

    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.modelexport import ApplicationKind

    export = _export(target, model, inputs, ApplicationKind.OUTPUT, profiling=False)
    result = deploy(export.artifact, DeployConfig(target=target))
    shapes = _output_shapes(_model_file(model, inputs))
    outputs = [np.asarray(o, dtype=np.float32) for o in (result.output or [])]
    return [
        o.reshape(s) if o.size == int(np.prod(s)) else o
        for o, s in zip(outputs, shapes, strict=False)
    ]


def _output_shapes(path: Path) -> list[tuple[int, ...]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [tuple(d.dim_value or 1 for d in o.type.tensor_type.shape.dim) for o in graph.output]


def measure_inference_time(
    target: str, model: Any, inputs: Sequence[Any], *, nb_warmup: int = 10,
    nb_iterations: int = 50, **_: Any,
) -> list[float]:  # fmt: skip
    """Seconds per inference of each timed run on ``target`` (its provenance: ``last_run``)."""
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.modelexport import ApplicationKind

    export = _export(
        target, model, inputs, ApplicationKind.BENCHMARK,
        nb_iterations=nb_iterations, nb_warmup=nb_warmup, profiling=False,
    )  # fmt: skip
    result = deploy(export.artifact, DeployConfig(target=target))
    times = tuple(float(t) / 1e3 for t in (result.timings or []))  # ms -> s
    timing = result.timing
    run = BackendRun(
        backend=backend_name(target),
        target=target,
        times_s=times,
        provenance=str(result.metrics.get("provenance") or ""),
        timing_label=timing.label if timing is not None else None,
        resolution_s=(timing.resolution_ms / 1e3) if timing and timing.resolution_ms else None,
        export=str(export.path),
    )
    with _LOCK:
        _RUNS[run.backend.lower()] = run
    return list(times)


def _seconds_from_milliseconds(original: Any) -> Any:
    def in_seconds(*args: Any, **kwargs: Any) -> Any:
        return [float(t) / 1e3 for t in original(*args, **kwargs)]

    in_seconds.__doc__ = (
        "aidge_export_arm_cortexm's timing function returns milliseconds "
        "(aidge_deploy.benchmark_api's timings); aidge-deploy wraps it to return seconds, "
        "as aidge_benchmark expects of every backend."
    )
    setattr(in_seconds, _SECONDS_MARK, True)
    return in_seconds


def register_backends(targets: Sequence[str] | None = None) -> list[str]:
    """Register ``targets`` (default: every registered target) as ``aidge_benchmark``
    backends; returns their names. Also makes the published Cortex-M backend return seconds."""
    import functools

    from aidge_benchmark.registrations import registration_helpers as helpers

    from aidge_deploy.registry import TARGETS

    names = targets or sorted({n.partition("/")[0] for n in TARGETS.names()})
    registered = []
    for target in names:
        name = backend_name(target)
        helpers.register_backend_inference(name, functools.partial(compute_output, target))
        helpers.register_backend_time(name, functools.partial(measure_inference_time, target))
        registered.append(name)
    try:
        importlib.import_module("aidge_export_arm_cortexm")  # registers its backend first
    except ImportError:
        return registered
    times = helpers._BACKEND_TIME_REGISTRY
    for published in CORTEXM_BACKENDS:
        original = times.get(published)
        if original is not None and not getattr(original, _SECONDS_MARK, False):
            times[published] = _seconds_from_milliseconds(original)
    return registered


class _TargetModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``aidge_deploy.<target>`` for a registered target name that is not a module of
    the package: a module that registers that target's backends when imported."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(PREFIX) or fullname.count(".") != 1:
            return None
        name = fullname[len(PREFIX) :]
        from aidge_deploy.registry import TARGETS

        if name not in {n.partition("/")[0] for n in TARGETS.names()}:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        target = module.__name__[len(PREFIX) :]
        module.__doc__ = (
            f"The {target} deploy target as the aidge_benchmark backend {module.__name__}."
        )
        module.target = target  # type: ignore[attr-defined]
        module.backends = register_backends([target])  # type: ignore[attr-defined]
        module.last_run = lambda: last_run(module.__name__)  # type: ignore[attr-defined]


_FINDER = _TargetModules()


def install_finder() -> None:
    """Let ``import aidge_deploy.<target>`` work (once per process)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


__all__ = [
    "BackendRun",
    "backend_name",
    "compute_output",
    "install_finder",
    "last_run",
    "measure_inference_time",
    "register_backends",
]
