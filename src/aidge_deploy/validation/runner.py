"""``validate``: export a model in output mode for each target, run it, check every output.

For each target and each input the model is exported with that input as the firmware's
sample (for int8, every input is the calibration set, so all exports share one
quantisation), deployed, and its printed outputs compared with the reference run. With a
labelled dataset, boards with the interactive validation protocol also report accuracy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import ConfigError
from aidge_deploy.validation.matrix import (
    OutputCheck,
    ReferenceEngine,
    check_output,
    reference_engine,
    run_reference,
    tolerance_for,
)

#: the one hook tests and callers may use to see (or alter) each export before it runs
ExportHook = Callable[[str, int, Any], None]


@dataclass(frozen=True)
class AccuracyResult:
    target: str
    accuracy: float | None
    samples: int
    unavailable_reason: str | None = None


@dataclass
class ValidationReport:
    model: Path
    dtype: str
    engine: ReferenceEngine
    targets: tuple[str, ...]
    nb_inputs: int
    checks: list[OutputCheck] = field(default_factory=list)
    #: target -> error message, for targets that could not be run at all
    errors: dict[str, str] = field(default_factory=dict)
    reference_accuracy: float | None = None
    accuracy: list[AccuracyResult] = field(default_factory=list)
    bundles: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.errors and all(c.passed for c in self.checks)

    def failures(self) -> list[str]:
        out = [f"{t}: {e.splitlines()[0]}" for t, e in self.errors.items()]
        out += [
            f"target {c.target}, output {c.output} ({c.exported_name}): max abs error {c.max_abs_error:.3g} > {c.tolerance.describe()}"
            f" ({c.worst})"
            for c in self.checks
            if not c.passed
        ]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": "aidge-deploy/validation",
            "schema_version": 1,
            "model": str(self.model),
            "dtype": self.dtype,
            "reference": self.engine.value,
            "targets": list(self.targets),
            "inputs": self.nb_inputs,
            "passed": self.passed,
            "matrix": [c.as_dict() for c in self.checks],
            "errors": dict(self.errors),
            "reference_accuracy": self.reference_accuracy,
            "accuracy": [a.__dict__ for a in self.accuracy],
            "bundles": dict(self.bundles),
        }


def load_inputs(folder: Path, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Inputs from ``*.npy`` (one sample each) and ``*.npz`` (every array a sample) files."""
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz"))
    if not files:
        raise ConfigError(
            f"{folder} holds no .npy or .npz inputs", hint="Save samples with np.save."
        )
    arrays: list[np.ndarray] = []
    for path in files:
        if path.suffix == ".npy":
            arrays.append(np.load(path))
        else:
            with np.load(path) as npz:
                arrays.extend(npz[k] for k in npz.files)
    out = []
    for i, array in enumerate(arrays):
        if array.size != math.prod(shape):
            raise ConfigError(
                f"input {i} from {folder} has {array.size} values; the model takes {list(shape)}",
                hint="One sample per array, of the model's input shape.",
            )
        out.append(array.reshape(shape).astype(np.float32))
    return out


def load_dataset(folder: Path, shape: tuple[int, ...]) -> tuple[list[np.ndarray], list[int]]:
    """Labelled samples: ``*.npz`` files holding ``x`` (N samples) and ``y`` (N labels)."""
    files = sorted(folder.glob("*.npz"))
    if not files:
        raise ConfigError(f"{folder} holds no .npz file", hint="np.savez(f, x=samples, y=labels)")
    samples: list[np.ndarray] = []
    labels: list[int] = []
    for path in files:
        with np.load(path) as npz:
            if "x" not in npz.files or "y" not in npz.files:
                raise ConfigError(f"{path} lacks 'x' or 'y'", hint="np.savez(f, x=..., y=...)")
            x, y = npz["x"], npz["y"].reshape(-1)
        if len(x) != len(y):
            raise ConfigError(f"{path}: {len(x)} samples but {len(y)} labels")
        samples += [s.reshape(shape).astype(np.float32) for s in x]
        labels += [int(v) for v in y]
    return samples, labels


def _check_int8_range(inputs: Sequence[np.ndarray]) -> None:
    peak = max(float(np.max(np.abs(x))) for x in inputs)
    if peak > 1.0:
        raise ConfigError(
            f"int8 export: input values reach {peak:.3g}, outside [-1, 1]",
            hint="Aidge's int8 export scales inputs by 127 into int8: normalise them to [-1, 1].",
        )


def validate_model(
    model: Path,
    targets: Sequence[str],
    *,
    dtype: str = "float32",
    inputs: Sequence[np.ndarray] = (),
    dataset: tuple[Sequence[np.ndarray], Sequence[int]] | None = None,
    work_dir: Path,
    report_dir: Path | None = None,
    run_timeout: float = 300.0,
    export_hook: ExportHook | None = None,
    progress: Callable[[str], None] | None = None,
) -> ValidationReport:
    """Run ``model`` on every target in output mode and compare with the reference."""
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.errors import DeployError
    from aidge_deploy.modelexport import (
        ApplicationKind,
        Dtype,
        ExportRequest,
        export_model,
        onnx_input_shapes,
    )

    say = progress or (lambda _msg: None)
    shapes = onnx_input_shapes(model)
    if len(shapes) != 1:
        raise ConfigError("validate supports models with one input (as Aidge's exporter does)")
    shape = shapes[0][1]
    xs = list(inputs) or [np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)]
    if dtype == Dtype.INT8:
        _check_int8_range(xs + list(dataset[0] if dataset else []))
    engine = reference_engine()
    onnx_names = onnx_output_names(model)
    references = [run_reference(model, x, engine) for x in xs]
    report = ValidationReport(model, dtype, engine, tuple(targets), len(xs))
    for target in targets:
        got: list[list[np.ndarray]] = []
        manifest_outputs: list[dict[str, Any]] = []
        try:
            for i, x in enumerate(xs):
                say(f"{target}: input {i + 1}/{len(xs)}")
                calibration = (x, *(o for j, o in enumerate(xs) if j != i))
                artifact: Any = export_model(
                    ExportRequest(
                        model=model,
                        target=target,
                        out_dir=work_dir / f"{target}-{dtype}-{i}",
                        dtype=Dtype(dtype),
                        kind=ApplicationKind.OUTPUT,
                        profiling=False,
                        inputs=calibration if dtype == Dtype.INT8 else (x,),
                    )
                )
                if export_hook is not None:
                    export_hook(target, i, artifact)
                bundle = report_dir / "runs" / target if report_dir is not None and i == 0 else None
                result = deploy(
                    artifact,
                    DeployConfig(target=target, run_timeout=run_timeout, report_dir=bundle),
                )
                if bundle is not None:
                    report.bundles[target] = str(bundle)
                if not isinstance(result.output, list):
                    raise ConfigError(f"{target}: the run printed no output tensors")
                got.append(result.output)
                manifest_outputs = list(artifact.manifest.outputs)
        except DeployError as exc:
            report.errors[target] = str(exc)
            continue
        order = match_outputs(manifest_outputs, [r.size for r in references[0]])
        for k, spec in enumerate(manifest_outputs):
            want = [_exported_layout(r[order[k]], spec["dims"]) for r in references]
            tolerance = tolerance_for(str(spec["dtype"]), want)
            report.checks.append(
                check_output(
                    target,
                    onnx_names[order[k]],
                    [g[k] for g in got],
                    want,
                    tolerance,
                    exported_name=str(spec["name"]),
                )
            )
    if dataset is not None:
        _accuracy(report, model, targets, dataset, dtype, work_dir, run_timeout, say)
    return report


def onnx_output_names(model: Path) -> list[str]:
    import onnx

    return [o.name for o in onnx.load(str(model), load_external_data=False).graph.output]


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


def _exported_layout(reference: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    from aidge_deploy.boards.baremetal.layout import to_exported_layout

    if reference.size != math.prod(dims):
        raise ConfigError(
            f"the reference output has {reference.size} values, the export's {math.prod(dims)}"
        )
    return to_exported_layout(reference, dims).reshape(-1)


def _accuracy(
    report: ValidationReport,
    model: Path,
    targets: Sequence[str],
    dataset: tuple[Sequence[np.ndarray], Sequence[int]],
    dtype: str,
    work_dir: Path,
    run_timeout: float,
    say: Callable[[str], None],
) -> None:
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig, ValidationConfig
    from aidge_deploy.errors import DeployError
    from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model

    samples, labels = list(dataset[0]), list(dataset[1])
    predicted = [int(np.argmax(run_reference(model, s, report.engine)[0])) for s in samples]
    report.reference_accuracy = sum(p == y for p, y in zip(predicted, labels, strict=True)) / len(
        labels
    )
    for target in targets:
        say(f"{target}: accuracy on {len(samples)} samples")
        try:
            artifact: Any = export_model(
                ExportRequest(
                    model=model,
                    target=target,
                    out_dir=work_dir / f"{target}-{dtype}-validation",
                    dtype=Dtype(dtype),
                    kind=ApplicationKind.VALIDATION,
                    nb_iterations=1,
                    nb_warmup=0,
                    profiling=False,
                    nb_validation_iterations=len(samples),
                    inputs=tuple(samples),
                )
            )
            if artifact.manifest.environment != "baremetal":
                report.accuracy.append(
                    AccuracyResult(
                        target,
                        None,
                        len(samples),
                        f"{target} exports have no interactive validation protocol",
                    )
                )
                continue
            sent = [np.round(s * 127) for s in samples] if dtype == Dtype.INT8 else samples
            result = deploy(
                artifact,
                DeployConfig(
                    target=target,
                    run_timeout=run_timeout,
                    validation=ValidationConfig(
                        samples=sent, labels=labels, validation_on_target=True
                    ),
                ),
            )
            report.accuracy.append(AccuracyResult(target, result.accuracy, len(samples)))
        except DeployError as exc:
            report.errors[f"{target} (accuracy)"] = str(exc)


def write_validation(report: ValidationReport, out_dir: Path) -> tuple[Path, Path]:
    """``validation.json`` and ``validation.html`` in ``out_dir`` (beside the run bundles)."""
    from aidge_deploy.validation.html import render_validation_html

    out_dir.mkdir(parents=True, exist_ok=True)
    doc = report.as_dict()
    json_path = out_dir / "validation.json"
    html_path = out_dir / "validation.html"
    json_path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    html_path.write_text(render_validation_html(doc, out_dir), encoding="utf-8")
    return json_path, html_path
