"""``validate``: run a model in output mode on each target, check every output.

For each target the model is exported once, with input 0 as the program's sample (for
int8, every input is the calibration set), built once and run; every further input runs a
copy of that built program with its input array rewritten (``validation.feed``: checked
first against the export's own sample). A target whose program cannot be patched (built on
an SSH board, a symbol that is not the input's size) is exported and built once per input
instead, and the report says why (``feeds``). Each run's printed outputs are compared with
the reference run. With a labelled dataset, boards with the interactive validation protocol
also report accuracy.

Exports come from the export cache, as ``profile``'s do (or from ``--work-dir``, where an
export already there for the same model and settings is used as it is — an edited export
is checked, never silently replaced), and builds from the build cache: an unchanged model
is neither re-exported nor rebuilt. The targets run at the same time through
``multitarget`` (emulated boards in parallel, a physical board's runs one after the other),
each under its own ``RunControl``: stopping the caller's control stops them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.runcontrol import RunControl
from aidge_deploy.validation.accuracy import (
    AccuracyResult,
    accuracy_from_outputs,
    accuracy_on_target,
    no_interactive_protocol,
)
from aidge_deploy.validation.feed import InputFeed
from aidge_deploy.validation.inputs import ValidationRequest
from aidge_deploy.validation.matrix import (
    OutputCheck,
    ReferenceEngine,
    check_output,
    reference_engine,
    run_reference,
    tolerance_for,
)


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
    #: target -> how its export was obtained ("exported", "reused from the cache", ...)
    exports: dict[str, str] = field(default_factory=dict)
    #: target -> wall time of its job, in seconds
    durations_s: dict[str, float] = field(default_factory=dict)
    #: target -> how its inputs were fed: {"feed", "builds", "reason"} (``validation.feed``)
    feeds: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.errors and all(c.passed for c in self.checks)

    def failures(self) -> list[str]:
        out = [f"{t}: {e.splitlines()[0]}" for t, e in self.errors.items()]
        out += [
            f"target {c.target}, output {c.output} ({c.exported_name}): max abs error "
            f"{c.max_abs_error:.3g} > {c.tolerance.describe()} ({c.worst})"
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
            "exports": dict(self.exports),
            "feeds": {t: dict(f) for t, f in self.feeds.items()},
        }


@dataclass
class _TargetRun:
    """What one target's job brings back."""

    outputs: list[list[np.ndarray]] = field(default_factory=list)
    manifest_outputs: list[dict[str, Any]] = field(default_factory=list)
    #: per output: the export's quantisation step (int8 outputs dequantised by the deploy)
    steps: list[float | None] = field(default_factory=list)
    bundle: Path | None = None
    export: str = ""
    accuracy: AccuracyResult | None = None
    accuracy_error: str | None = None
    #: how the inputs were fed, the builds it took, and why not through one build
    feed: InputFeed = InputFeed.PER_INPUT
    builds: int = 0
    feed_reason: str | None = None


Say = Callable[[str], None]


def _export(request: ValidationRequest, target: str, name: str, **fields: Any) -> Any:
    """A cached export (or one in ``--work-dir``) of ``request.model`` for ``target``."""
    from aidge_deploy.exportcache import prepare_export
    from aidge_deploy.modelexport import Dtype, ExportRequest

    export_request = ExportRequest(
        model=request.model,
        target=target,
        out_dir=Path("."),  # decided by the export cache (or --work-dir)
        dtype=Dtype(request.dtype),
        **fields,
    )
    work_dir = None if request.work_dir is None else request.work_dir / f"{target}-{name}"
    return prepare_export(export_request, work_dir=work_dir)


def output_export(request: ValidationRequest, target: str, index: int) -> Any:
    """The output-mode export of ``request.model`` whose sample is input ``index`` (for
    int8, all inputs are its calibration set): a ``CachedExport``, in ``--work-dir`` as
    ``<target>-<dtype>-<index>`` when one is given."""
    from aidge_deploy.modelexport import ApplicationKind, Dtype

    xs = request.inputs
    x = xs[index]
    calibration = (x, *(o for j, o in enumerate(xs) if j != index))
    return _export(
        request,
        target,
        f"{request.dtype}-{index}",
        kind=ApplicationKind.OUTPUT,
        profiling=False,
        inputs=calibration if request.dtype == Dtype.INT8 else (x,),
    )


def _deploy_one(
    request: ValidationRequest,
    target: str,
    artifact: Any,
    work_dir: Path,
    bundle: Path | None,
    pipeline: list[Any] | None = None,
) -> Any:
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig

    result = deploy(
        artifact,
        DeployConfig(
            target=target,
            run_timeout=request.run_timeout,
            report_dir=bundle,
            report_overwrite=True,  # validate owns its report's runs/ folder
        ),
        work_dir=work_dir,
        pipeline=pipeline,
    )
    if not isinstance(result.output, list):
        raise ConfigError(f"{target}: the run printed no output tensors")
    return result


def _keep_outputs(out: _TargetRun, result: Any, artifact: Any) -> None:
    out.outputs.append([np.asarray(o) for o in result.output])
    out.manifest_outputs = list(artifact.manifest.outputs)
    scales = {q.name: q.scale for q in result.output_quantisation}
    out.steps = [scales.get(str(spec["name"])) for spec in out.manifest_outputs]


def _run_target(
    request: ValidationRequest, target: str, run_root: Path, keep_bundle: bool, say: Say
) -> _TargetRun:
    """Input 0 through its export and build; the other inputs through patched copies of
    that build (``feed``), or, when the program cannot be patched, an export and build each."""
    from aidge_deploy.errors import ProgramPatchError
    from aidge_deploy.validation.feed import (
        KeepBuildStage,
        check_slot,
        locate_input,
        pipeline_keeping,
        pipeline_patched,
        write_patched,
    )

    out = _TargetRun()
    xs = request.inputs
    say(f"{target}: input 1/{len(xs)}")
    export = output_export(request, target, 0)
    out.export = f"{export.path} ({'reused' if export.reused else 'exported'})"
    bundle = None
    if request.report_dir is not None:
        bundle = request.report_dir / "runs" / target
    elif keep_bundle:
        bundle = run_root / target / "bundle"  # the history records a run from its bundle
    kept = KeepBuildStage()
    result = _deploy_one(
        request, target, export.artifact, run_root / f"{target}-0", bundle, pipeline_keeping(kept)
    )
    out.bundle = bundle
    out.builds = 1
    _keep_outputs(out, result, export.artifact)
    rest = range(1, len(xs))
    if request.input_feed is InputFeed.PER_INPUT:
        out.feed_reason = "asked for (--build-per-input)"
    elif not rest:  # one input: its one build
        out.feed = InputFeed.ONE_BUILD
    elif kept.unpatchable is not None:
        out.feed_reason = kept.unpatchable
    else:
        try:
            slot = locate_input(kept.build.artifact_path, export.artifact.manifest.inputs[0])
            check_slot(slot, xs[0])
        except ProgramPatchError as exc:
            out.feed_reason = f"{exc.message} ({exc.hint})"
        else:
            out.feed = InputFeed.ONE_BUILD
            for i in rest:
                say(f"{target}: input {i + 1}/{len(xs)} (the build, input rewritten)")
                work_dir = run_root / f"{target}-{i}"
                program = write_patched(
                    slot, xs[i], work_dir / "program" / kept.build.artifact_path.name
                )
                result = _deploy_one(
                    request,
                    target,
                    export.artifact,
                    work_dir,
                    None,
                    pipeline_patched(kept.build, program),
                )
                _keep_outputs(out, result, export.artifact)
            rest = range(0)
    if rest and out.feed is InputFeed.PER_INPUT:
        say(f"{target}: one build per input: {out.feed_reason}")
        for i in rest:
            say(f"{target}: input {i + 1}/{len(xs)}")
            export_i = output_export(request, target, i)
            result = _deploy_one(
                request, target, export_i.artifact, run_root / f"{target}-{i}", None
            )
            out.builds += 1
            _keep_outputs(out, result, export_i.artifact)
    if request.dataset is not None:
        try:
            out.accuracy = _target_accuracy(
                request, target, run_root, say, export.artifact.manifest.environment
            )
        except DeployError as exc:
            out.accuracy_error = str(exc)
    return out


def validate_model(
    request: ValidationRequest,
    *,
    run_root: Path,
    control: RunControl | None = None,
    progress: Say | None = None,
    history: Any = None,
    workers: int | None = None,
) -> ValidationReport:
    """Run ``request.model`` on every target (at once) and compare with the reference.

    ``run_root`` receives each run's logs; ``history`` (a ``HistoryStore``) records each
    target's first run. Raises ``RunInterrupted`` when ``control`` is cancelled.
    """
    from aidge_deploy.modelexport import match_outputs
    from aidge_deploy.multitarget import Lane, TargetJob, lane_for, run_targets

    say = progress or (lambda _msg: None)
    engine = reference_engine()
    onnx_names = onnx_output_names(request.model)
    references = [run_reference(request.model, x, engine) for x in request.inputs]
    report = ValidationReport(
        request.model, request.dtype, engine, request.targets, len(request.inputs)
    )
    keep = history is not None

    def job(target: str) -> TargetJob[_TargetRun]:
        def run(control: RunControl) -> _TargetRun:
            return _run_target(request, target, run_root, keep, say)

        lane = lane_for(target)
        return TargetJob(target, run, lane, target if lane is Lane.PER_BOARD else None)

    jobs = [job(target) for target in request.targets]
    outcomes = run_targets(jobs, control=control, workers=workers)
    for target, outcome in zip(request.targets, outcomes, strict=True):
        report.durations_s[target] = outcome.duration_s
        if outcome.error is not None:
            if not isinstance(outcome.error, DeployError):
                raise outcome.error  # a bug, not a failed check
            report.errors[target] = str(outcome.error)
            continue
        run = outcome.value
        if run is None:
            continue
        report.exports[target] = run.export
        report.feeds[target] = {
            "feed": run.feed.value,
            "builds": run.builds,
            "reason": run.feed_reason,
        }
        if run.bundle is not None:
            if request.report_dir is not None:
                report.bundles[target] = str(run.bundle)
            if history is not None:
                history.record(run.bundle, _validation_name(request), source="validate")
        if run.accuracy is not None:
            report.accuracy.append(run.accuracy)
        if run.accuracy_error is not None:
            report.errors[f"{target} (accuracy)"] = run.accuracy_error
        order = match_outputs(run.manifest_outputs, [r.size for r in references[0]])
        for k, spec in enumerate(run.manifest_outputs):
            want = [_exported_layout(r[order[k]], spec["dims"]) for r in references]
            got = [g[k] for g in run.outputs]
            step = run.steps[k] if k < len(run.steps) else None
            tolerance = tolerance_for(str(spec["dtype"]), want, step=step)
            if step is None and tolerance.step is not None:
                # an int8 export that records no scale: its codes, at the reference's step
                got = [g * tolerance.step for g in got]
            report.checks.append(
                check_output(
                    target,
                    onnx_names[order[k]],
                    got,
                    want,
                    tolerance,
                    exported_name=str(spec["name"]),
                )
            )
    if request.dataset is not None:
        samples, labels = request.dataset
        predicted = [int(np.argmax(run_reference(request.model, s, engine)[0])) for s in samples]
        hits = sum(p == y for p, y in zip(predicted, labels, strict=True))
        report.reference_accuracy = hits / len(labels)
    return report


def _validation_name(request: ValidationRequest) -> str:
    """The history name of a validation's runs: the model file's stem, as ``profile``'s
    (its runs are output runs: another identity than the benchmarks of the same name)."""
    return request.model.stem


def onnx_output_names(model: Path) -> list[str]:
    import onnx

    return [o.name for o in onnx.load(str(model), load_external_data=False).graph.output]


def _exported_layout(reference: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    import math

    from aidge_deploy.boards.baremetal.layout import to_exported_layout

    if reference.size != math.prod(dims):
        raise ConfigError(
            f"the reference output has {reference.size} values, the export's {math.prod(dims)}"
        )
    return to_exported_layout(reference, dims).reshape(-1)


def _target_accuracy(
    request: ValidationRequest, target: str, run_root: Path, say: Say, environment: str
) -> AccuracyResult:
    """Top-1 accuracy of ``target`` on the dataset: a bare-metal board's ``validation``
    export through its interactive protocol; elsewhere (the host, Linux boards) an
    ``output`` export, every sample through its one build (int8 calibrated on the samples,
    as the validation export is)."""
    from aidge_deploy.modelexport import ApplicationKind

    if request.dataset is None:  # pragma: no cover - checked by the caller
        raise ConfigError("no dataset")
    samples, labels = list(request.dataset[0]), list(request.dataset[1])
    say(f"{target}: accuracy on {len(samples)} samples")
    config_values = {"target": target, "run_timeout": request.run_timeout}
    if no_interactive_protocol(environment, target) is not None:
        outputs = _export(
            request,
            target,
            f"{request.dtype}-accuracy",
            kind=ApplicationKind.OUTPUT,
            profiling=False,
            inputs=tuple(samples) if request.dtype == "int8" else (samples[0],),
        )
        return accuracy_from_outputs(
            outputs.artifact,
            samples[0],
            samples,
            labels,
            config_values=config_values,
            work_dir=run_root / f"{target}-accuracy",
        )
    export = _export(
        request,
        target,
        f"{request.dtype}-validation",
        kind=ApplicationKind.VALIDATION,
        nb_iterations=1,
        nb_warmup=0,
        profiling=False,
        nb_validation_iterations=len(samples),
        inputs=tuple(samples),
    )
    return accuracy_on_target(
        export.artifact,
        samples,
        labels,
        dtype=request.dtype,
        config_values=config_values,
        work_dir=run_root / f"{target}-validation",
    )


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
