"""Assemble: turn the parsed protocol result into the ``DeployResult`` callers read.

Shapes follow what the published Aidge consumers expect (see ``results.DeployResult``);
every figure also becomes a typed ``Metric`` with its unit and the target's provenance.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.profiling.model_analysis import analyze_export
from aidge_deploy.profiling.passes import fold_counter_profile
from aidge_deploy.profiling.validity import timer_resolution_for
from aidge_deploy.protocols.base import ProtocolResult
from aidge_deploy.registry import DeployTarget, RemoteResultTarget
from aidge_deploy.results import (
    DeployResult,
    LatencyStats,
    LayerFigure,
    MemoryPeaks,
    Metric,
    Provenance,
    TimingSeries,
)


def accuracy_of(predictions: tuple[int, ...] | None, labels: list[int] | None) -> float | None:
    """Fraction of predictions equal to the labels (over the pairs both sides have)."""
    if not predictions or not labels:
        return None
    n = min(len(predictions), len(labels))
    return (
        sum(1 for p, lab in zip(predictions[:n], labels[:n], strict=True) if int(p) == int(lab)) / n
    )


def _measurements(
    target: DeployTarget, parsed: ProtocolResult, peak_rss: int | None, peaks: tuple[int, ...]
) -> list[Metric]:
    prov = target.timing_provenance
    out: list[Metric] = []
    if parsed.timings_ms:
        stats = LatencyStats.of(parsed.timings_ms)
        resolution = timer_resolution_for(parsed.protocol)
        for key in ("mean", "median", "p90", "min", "max", "std"):
            out.append(
                Metric(
                    f"latency_{key}",
                    getattr(stats, key),
                    "ms",
                    prov,
                    f"{key} of {stats.n} samples",
                    resolution=resolution,
                )
            )
    cycle_name, cycle_unit = target.cycle_metric
    if parsed.cycles:
        values = [target.convert_cycles(v) for v in parsed.cycles]
        out.append(
            Metric(cycle_name, float(np.median(values)), cycle_unit, prov, "median per inference")
        )
    if peak_rss is not None:
        out.append(
            Metric(
                "peak_rss",
                peak_rss,
                "B",
                Provenance.HOST if prov == Provenance.HOST else prov,
                "peak resident set size of the run",
            )
        )
    if peaks:
        out.append(
            Metric(
                "activation_memory",
                sum(peaks),
                "B",
                Provenance.HOST,
                "static activation buffers planned by the export",
            )
        )
    if parsed.mlperf is not None:
        out.append(
            Metric(
                "mlperf_latency",
                parsed.mlperf.latency_us,
                "us",
                prov,
                "EEMBC infer loop, device clock",
                # two microsecond timestamps around nb_inferences forwards
                resolution=1.0 / max(1, parsed.mlperf.nb_inferences),
            )
        )
    return out


def _layers(target: DeployTarget, parsed: ProtocolResult) -> tuple[LayerFigure, ...]:
    names: list[str] = list(parsed.layer_times_ms or {})
    for name in parsed.layer_cycles or {}:
        if name not in names:
            names.append(name)
    cycle_name, _ = target.cycle_metric
    layers = []
    for name in names:
        counters: dict[str, float] = {}
        if parsed.layer_cycles and name in parsed.layer_cycles:
            counters[cycle_name] = target.convert_cycles(parsed.layer_cycles[name])
        time_ms = parsed.layer_times_ms.get(name) if parsed.layer_times_ms else None
        layers.append(LayerFigure(name=name, time_ms=time_ms, counters=counters))
    return tuple(layers)


class AssembleStage:
    name = "Assemble"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        if isinstance(target, RemoteResultTarget):  # a farm ran the whole deploy
            ctx.result = target.remote_result(ctx.prepared_context)
            return
        parsed = ctx.parsed_output
        runtime = ctx.resolved_runtime
        execution = ctx.executed
        build = ctx.built
        manifest = ctx.artifact.manifest
        labels = list(runtime.validation.labels) if runtime.validation.labels else None
        accuracy = accuracy_of(parsed.predictions, labels)
        cycle_name, cycle_unit = target.cycle_metric
        cycles = [round(target.convert_cycles(c)) for c in parsed.cycles] if parsed.cycles else None
        layer_cycles = (
            {k: target.convert_cycles(v) for k, v in parsed.layer_cycles.items()}
            if parsed.layer_cycles
            else None
        )
        metrics: dict[str, Any] = {
            "cycles": cycles,
            "cycles_name": cycle_name,
            "cycles_unit": cycle_unit,
            "counter_units": dict(ctx.counter_profile.units)
            if ctx.counter_profile is not None
            else {},
            "counter_passes": [
                {"name": p.name, "counters": list(p.counters), "basis": p.basis}
                for p in ctx.counter_profile.passes
            ]
            if ctx.counter_profile is not None
            else [],
            "layer_timings": dict(parsed.layer_times_ms) if parsed.layer_times_ms else None,
            "layer_cycles": layer_cycles,
            "provenance": target.timing_provenance.value,
            "predictions": list(parsed.predictions) if parsed.predictions is not None else None,
            "validation_metric": list(parsed.validation_metrics)
            if parsed.validation_metrics
            else None,
            "mlperf": parsed.mlperf,
            "peak_rss_bytes": execution.peak_rss_bytes,
            "notices": list(parsed.notices),
            "binary": ctx.binary_info.as_dict() if ctx.binary_info is not None else None,
        }
        timings = TimingSeries(parsed.timings_ms) if parsed.timings_ms is not None else None
        if parsed.mlperf is not None and timings is None:
            timings = TimingSeries([parsed.mlperf.latency_us / 1000.0])
        output: dict[str, Any] | list[np.ndarray] | None
        if manifest.application in ("output", "standalone") and not runtime.tinyml:
            output = (
                [np.asarray(o).reshape(-1).copy() for o in parsed.outputs]
                if parsed.outputs
                else None
            )
        else:
            output = {
                "timings": list(timings) if timings is not None else [],
                "accuracy": accuracy,
                "predictions": metrics["predictions"] or [],
                "labels": labels or [],
                "validation_metric": "mse"
                if runtime.validation.inference_type == "autoencoder"
                else "accuracy",
                "cycles": cycles,
                "layer_timings": metrics["layer_timings"],
                "layer_cycles": layer_cycles,
                "outputs": [o.tolist() for o in parsed.outputs] if parsed.outputs else None,
                "compare_timings": None,
            }
            if runtime.validation.inference_type == "autoencoder" and parsed.validation_metrics:
                output["accuracy"] = None
                output["validation_metrics"] = list(parsed.validation_metrics)
        peaks = build.mem_peaks
        layers = _layers(target, parsed)
        measurements = tuple(_measurements(target, parsed, execution.peak_rss_bytes, peaks))
        if ctx.counter_profile is not None:  # ProfilePasses ran: fold its counters in
            layers, measurements = fold_counter_profile(ctx.counter_profile, layers, measurements)
        static = {a.name: a for a in analyze_export(ctx.artifact)}
        layers = tuple(
            replace(layer, macs=static[layer.name].macs, params=static[layer.name].params)
            if layer.name in static
            else layer
            for layer in layers
        )
        power = ctx.power_result
        if power is not None:
            measurements = (*measurements, *power.metrics())
            if power.layer_energy_uj:
                layers = tuple(
                    replace(layer, energy_uj=power.layer_energy_uj.get(layer.name))
                    for layer in layers
                )
        ctx.result = DeployResult(
            output=output,
            metrics=metrics,
            memory_peak_bytes=MemoryPeaks(peaks) if peaks else None,
            timings=timings,
            accuracy=accuracy,
            protocol=manifest.protocol,
            target=ctx.resolved_target_name,
            backend=ctx.config.backend_kind,
            log=execution.raw_output,
            log_path=execution.log_path,
            returncode=execution.exit_status,
            build=build,
            execution=execution,
            layers=layers,
            measurements=measurements,
            stage_durations_ms=ctx.stage_durations_ms,
            report_dir=ctx.config.report_dir,
            power=power,
        )
