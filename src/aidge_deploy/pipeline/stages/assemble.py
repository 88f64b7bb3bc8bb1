"""Assemble: turn the parsed protocol result into the ``DeployResult`` callers read.

Shapes follow what the published Aidge consumers expect (see ``results.DeployResult`` and
``legacy_results``); every figure also becomes a typed ``Metric`` with its unit, its
provenance and (times) its timer's resolution. The headline figures are reduced here, once,
with the user's aggregation (``profiling.aggregate`` over ``stats``): the terminal, the
bundle and the HTML report all print these same ``Metric`` objects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from aidge_deploy.artifact import RuntimeSettings, hydrate_runtime
from aidge_deploy.config import Aggregation, DeployConfig
from aidge_deploy.exportspec import Export
from aidge_deploy.legacy_results import AUTOENCODER, legacy_results, top1_accuracy
from aidge_deploy.metrics import Band
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.power.result import PowerResult
from aidge_deploy.profiling.aggregate import Aggregate, aggregate_samples
from aidge_deploy.profiling.binary import BinaryInfo
from aidge_deploy.profiling.model_analysis import LayerAnalysis, analyze_export
from aidge_deploy.profiling.passes import CounterProfile, fold_counter_profile
from aidge_deploy.profiling.timing import ESTIMATED_CYCLES
from aidge_deploy.protocols.base import ProtocolResult
from aidge_deploy.quantisation import OutputQuantisation, is_quantised, read_quantisation
from aidge_deploy.registry import DeployTarget
from aidge_deploy.results import (
    BuildResult,
    DeployResult,
    ExecutionResult,
    LatencyStats,
    LayerFigure,
    MemoryPeaks,
    Metric,
    Provenance,
    TimingSeries,
)
from aidge_deploy.timing import RunTimes

#: name of the headline latency figure (reduced with the user's aggregation)
LATENCY = "latency"


def _latency_metrics(
    times: RunTimes, method: Aggregation, band: Band | None = None
) -> tuple[list[Metric], Aggregate | None]:
    """The latency figures; ``band``: the timing model's, for times made of its cycles."""
    info = times.info
    if not times.timings_ms or info is None or info.resolution_ms is None:
        return [], None
    samples = times.timings_ms
    prov, res, label = info.provenance, info.resolution_ms, info.label
    agg = aggregate_samples(samples, method)
    headline = Metric(
        LATENCY,
        agg.value,
        "ms",
        prov,
        f"latency per inference, {agg.describe()}; {label}",
        None if agg.value is not None else f"every sample was rejected ({agg.describe()})",
        resolution=res,
        band=band if agg.value is not None else None,
    )
    stats = LatencyStats.of(samples)
    out = [headline]
    for key in ("mean", "median", "p90", "min", "max", "std"):
        out.append(
            Metric(
                f"latency_{key}",
                getattr(stats, key),
                "ms",
                prov,
                f"{key} of {stats.n} samples; {label}",
                resolution=res,
                # a spread of estimates is no estimate of a time: no band on std
                band=None if key == "std" else band,
            )
        )
    return out, agg


def _cycle_metric(
    target: DeployTarget, parsed: ProtocolResult, method: Aggregation
) -> tuple[Metric | None, Aggregate | None]:
    if not parsed.cycles:
        return None, None
    name, unit = target.cycle_metric
    # the wrap rule is applied to the raw counter readings, in the counter's own width
    agg = aggregate_samples(parsed.cycles, method, counter_bits=target.cycle_counter_bits)
    value = None if agg.value is None else target.convert_cycles(agg.value)
    reason = None
    if value is None:
        reason = f"every sample was a wrapped {target.cycle_counter_bits}-bit reading"
    metric = Metric(
        name,
        value,
        unit,
        target.counter_provenance,
        f"{name.replace('_', ' ')} per inference, {agg.describe()}",
        reason,
    )
    return metric, agg


def _estimated_metric(
    parsed: ProtocolResult, method: Aggregation
) -> tuple[Metric | None, Aggregate | None]:
    """The timing model's cycles per inference (an emulated board's), reduced as latency is."""
    estimated = parsed.estimated
    if estimated is None:
        return None, None
    if not estimated.samples:
        reason = estimated.unavailable or "no timed inference"
        what = f"cycles per inference, {estimated.provenance_label}"
        return Metric(ESTIMATED_CYCLES, None, "cycles", Provenance.ESTIMATED, what, reason), None
    agg = aggregate_samples(estimated.samples, method)
    rejected = None if agg.value is not None else f"every sample was rejected ({agg.describe()})"
    return (
        Metric(
            ESTIMATED_CYCLES,
            agg.value,
            "cycles",
            Provenance.ESTIMATED,
            f"estimated cycles per inference, {agg.describe()}; {estimated.provenance_label}",
            rejected,
            resolution=1.0,
            band=estimated.band if agg.value is not None else None,
        ),
        agg,
    )


def _static_metrics(peaks: tuple[int, ...], analysis: tuple[LayerAnalysis, ...]) -> list[Metric]:
    out: list[Metric] = []
    if peaks:
        out.append(
            Metric(
                "activation_memory",
                sum(peaks),
                "B",
                Provenance.STATIC,
                "activation buffers planned by the export",
            )
        )
    if analysis:
        out.append(
            Metric(
                "macs",
                sum(a.macs for a in analysis),
                "MAC",
                Provenance.STATIC,
                "multiply-accumulates per inference, from the exported layers",
            )
        )
        out.append(
            Metric(
                "params",
                sum(a.params for a in analysis),
                "count",
                Provenance.STATIC,
                "weights and biases of the exported layers",
            )
        )
    return out


def _mlperf_metric(target: DeployTarget, parsed: ProtocolResult, times: RunTimes) -> Metric | None:
    mlperf = parsed.mlperf
    if mlperf is None:
        return None
    n = max(1, mlperf.nb_inferences)
    label = times.info.label if times.info is not None else target.timing_provenance.label
    return Metric(
        "mlperf_latency",
        mlperf.latency_us * times.scale,
        "us",
        target.timing_provenance,
        f"mean of {n} inferences between two m-lap-us timestamps (EEMBC infer loop); {label}",
        # two microsecond timestamps around n forwards
        resolution=times.scale / n,
    )


def _layers(
    target: DeployTarget, parsed: ProtocolResult, times: RunTimes
) -> tuple[LayerFigure, ...]:
    names: list[str] = list(times.layer_times_ms or {})
    for name in parsed.layer_cycles or {}:
        if name not in names:
            names.append(name)
    cycle_name, _ = target.cycle_metric
    layers = []
    for name in names:
        counters: dict[str, float] = {}
        if parsed.layer_cycles and name in parsed.layer_cycles:
            counters[cycle_name] = target.convert_cycles(parsed.layer_cycles[name])
        if parsed.estimated is not None and name in parsed.estimated.layers:
            counters[ESTIMATED_CYCLES] = parsed.estimated.layers[name]
        time_ms = times.layer_times_ms.get(name) if times.layer_times_ms else None
        layers.append(LayerFigure(name=name, time_ms=time_ms, counters=counters))
    return tuple(layers)


class AssembleStage:
    name = "Assemble"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        ctx.result = assemble_result(
            target,
            ctx.parsed_output,
            ctx.artifact,
            ctx.config,
            ctx.executed,
            ctx.built,
            runtime=ctx.resolved_runtime,
            target_name=ctx.resolved_target_name,
            counter_profile=ctx.counter_profile,
            binary=ctx.binary_info,
            stage_durations_ms=ctx.stage_durations_ms,
            power=ctx.power_result,
        )


def assemble_result(
    target: DeployTarget,
    parsed: ProtocolResult,
    artifact: Export,
    config: DeployConfig,
    execution: ExecutionResult,
    build: BuildResult,
    *,
    runtime: RuntimeSettings | None = None,
    target_name: str | None = None,
    counter_profile: CounterProfile | None = None,
    binary: BinaryInfo | None = None,
    stage_durations_ms: dict[str, float] | None = None,
    power: PowerResult | None = None,
) -> DeployResult:
    """The ``DeployResult`` of one run, from what the target printed and what it is.

    A pure function of its arguments (the stage passes the pipeline's fields), so a result
    can be assembled from a captured log and a registered target alike.
    """
    manifest = artifact.manifest
    if runtime is None:
        runtime = hydrate_runtime(config, manifest)
    profile = counter_profile
    method = Aggregation(config.aggregation)
    times = target.run_times(parsed, manifest.application_config)
    labels = list(runtime.labels) if runtime.labels else None
    inference_type = runtime.inference_type
    accuracy = None if inference_type == AUTOENCODER else top1_accuracy(parsed.predictions, labels)
    cycle_name, cycle_unit = target.cycle_metric
    cycles = [round(target.convert_cycles(c)) for c in parsed.cycles] if parsed.cycles else None
    layer_cycles = (
        {k: target.convert_cycles(v) for k, v in parsed.layer_cycles.items()}
        if parsed.layer_cycles
        else None
    )
    estimated = parsed.estimated
    derived = times.info is not None and times.info.derived_from == ESTIMATED_CYCLES
    time_band = estimated.band if derived and estimated is not None else None
    latency_metrics, latency_agg = _latency_metrics(times, method, time_band)
    cycle_metric, cycle_agg = _cycle_metric(target, parsed, method)
    estimated_metric, estimated_agg = _estimated_metric(parsed, method)
    modelled = estimated is not None and bool(estimated.samples)
    analysis = analyze_export(artifact)
    counter_bits: dict[str, int | None] = {cycle_name: target.cycle_counter_bits}
    if profile is not None:
        counter_bits.update(profile.counter_bits)
    metrics: dict[str, Any] = {
        "cycles": cycles,
        "cycles_name": cycle_name,
        "cycles_unit": cycle_unit,
        "cycles_counter_bits": target.cycle_counter_bits,
        "counter_bits": counter_bits,
        # the counters the run was asked for, in request order (measured or unavailable)
        "counters": list(profile.requested) if profile is not None else [],
        "counter_units": {
            **(dict(profile.units) if profile is not None else {}),
            **({ESTIMATED_CYCLES: "cycles"} if modelled else {}),
        },
        "counter_quantities": {
            cycle_name: cycle_unit,  # cycles or instructions
            **(dict(profile.quantities) if profile is not None else {}),
            **({ESTIMATED_CYCLES: "cycles"} if modelled else {}),
        },
        "counter_provenance": {
            cycle_name: target.counter_provenance.value,
            **({ESTIMATED_CYCLES: Provenance.ESTIMATED.value} if modelled else {}),
            **(
                dict.fromkeys(profile.requested, profile.provenance.value)
                if profile is not None
                else {}
            ),
        },
        "counter_passes": [
            {"name": p.name, "counters": list(p.counters), "basis": p.basis} for p in profile.passes
        ]
        if profile is not None
        else [],
        "aggregates": {
            name: agg.as_dict()
            for name, agg in (
                (LATENCY, latency_agg),
                (cycle_name, cycle_agg),
                (ESTIMATED_CYCLES, estimated_agg),
            )
            if agg is not None
        },
        # the timing model behind the estimated cycles (emulated boards), its assumptions
        "estimated_cycles": list(estimated.samples) if modelled and estimated else None,
        "timing_model": {
            "model": estimated.model,
            "core": estimated.core,
            "assumptions": list(estimated.assumptions),
            "leaves_out": list(estimated.leaves_out),
            "unavailable": estimated.unavailable,
            # the uncertainty the model states for this run's code and board
            **({} if estimated.band is None else {"band": estimated.band.as_dict(None)}),
        }
        if estimated is not None
        else None,
        "layer_timings": dict(times.layer_times_ms) if times.layer_times_ms else None,
        "layer_cycles": layer_cycles,
        "provenance": target.counter_provenance.value,
        "timing_provenance": target.timing_provenance.value,
        "predictions": list(parsed.predictions) if parsed.predictions is not None else None,
        "validation_metric": list(parsed.validation_metrics) if parsed.validation_metrics else None,
        "mlperf": parsed.mlperf,
        "peak_rss_bytes": execution.peak_rss_bytes,
        "notices": list(parsed.notices),
        "cores": [dict(core) for core in parsed.cores] or None,
        "binary": binary.as_dict() if binary is not None else None,
    }
    # MLPerf Tiny prints one mean over N inferences: not a series (``mlperf_latency``)
    timings = TimingSeries(times.timings_ms) if times.timings_ms is not None else None
    output: dict[str, Any] | list[np.ndarray] | None
    output_raw: list[np.ndarray] | None = None
    quantisation: tuple[OutputQuantisation, ...] = ()
    if manifest.application in ("output", "standalone") and not runtime.tinyml:
        output = (
            [np.asarray(o).reshape(-1).copy() for o in parsed.outputs] if parsed.outputs else None
        )
        if output is not None and any(is_quantised(str(o.get("dtype"))) for o in manifest.outputs):
            quantisation = read_quantisation(artifact.path) or ()
            if len(quantisation) == len(output):
                output_raw = output
                output = [q.dequantise(o) for q, o in zip(quantisation, output, strict=True)]
            else:
                metrics["notices"].append(
                    "the outputs are the export's integer codes: it records no quantisation "
                    "scale (export it with aidge-deploy to get float outputs)"
                )
    else:
        output = legacy_results(
            timings_ms=times.timings_ms,
            predictions=parsed.predictions,
            labels=labels,
            inference_type=inference_type,
            validation_metrics=parsed.validation_metrics,
            cycles=cycles,
            layer_timings_ms=times.layer_times_ms,
            layer_cycles=layer_cycles,
            outputs=parsed.outputs,
        )
    peaks = build.mem_peaks
    measurements: list[Metric] = [*latency_metrics]
    if cycle_metric is not None:
        measurements.append(cycle_metric)
    if estimated_metric is not None:
        measurements.append(estimated_metric)
    mlperf = _mlperf_metric(target, parsed, times)
    if mlperf is not None:
        measurements.append(mlperf)
    if execution.peak_rss_bytes is not None:
        measurements.append(
            Metric(
                "peak_rss",
                execution.peak_rss_bytes,
                "B",
                target.counter_provenance,
                "peak resident set size of the run",
            )
        )
    measurements += _static_metrics(peaks, analysis)
    layers = _layers(target, parsed, times)
    all_measurements = tuple(measurements)
    if profile is not None:  # ProfilePasses ran: fold its counters in
        layers, all_measurements = fold_counter_profile(profile, layers, all_measurements)
    static = {a.name: a for a in analysis}
    layers = tuple(
        replace(layer, macs=static[layer.name].macs, params=static[layer.name].params)
        if layer.name in static
        else layer
        for layer in layers
    )
    if power is not None:  # the power stages ran: their figures, and energy per layer
        all_measurements = (*all_measurements, *power.metrics())
        if layer_energy := power.published_layer_energy_uj:
            layers = tuple(
                replace(layer, energy_uj=layer_energy.get(layer.name)) for layer in layers
            )
    return DeployResult(
        output=output,
        output_raw=output_raw,
        output_quantisation=quantisation,
        metrics=metrics,
        memory_peak_bytes=MemoryPeaks(peaks) if peaks else None,
        timings=timings,
        accuracy=accuracy,
        protocol=manifest.protocol,
        target=target_name or target.target_name,
        backend=config.backend_kind,
        log=execution.raw_output,
        log_path=execution.log_path,
        returncode=execution.exit_status,
        build=build,
        execution=execution,
        layers=layers,
        measurements=all_measurements,
        stage_durations_ms=stage_durations_ms if stage_durations_ms is not None else {},
        report_dir=config.report_dir,
        timing=times.info,
        power=power,
    )
