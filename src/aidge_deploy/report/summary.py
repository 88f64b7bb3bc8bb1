"""The figures of one run, as ``summary.json`` and ``profile_results.{csv,json}`` hold them.

Every figure becomes ``{value, unit, provenance, ...}``: a latency measured on the host, a
cycle count read on silicon and an instruction count from an emulator must never be
mistaken for one another, in a file any more than in the API. Headline figures are reduced
with the user's aggregation after rejecting impossible samples (``profiling.aggregate``).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aidge_deploy.config import Aggregation
from aidge_deploy.profiling.aggregate import Aggregate, aggregate_samples
from aidge_deploy.profiling.validity import COUNTER_BITS, Validity, timer_resolution_for
from aidge_deploy.results import DeployResult, LatencyStats, Metric, Provenance

SCHEMA_VERSION = 1
SUMMARY_SCHEMA = "aidge-deploy/summary"
PROFILE_SCHEMA = "aidge-deploy/profile-results"

#: key of the per-layer time figure
LAYER_TIME = "time"


class ProfileFormat(StrEnum):
    CSV = "csv"
    JSON = "json"


@dataclass(frozen=True)
class LayerColumn:
    """One per-layer figure: its key, unit and provenance."""

    key: str
    unit: str
    provenance: Provenance


def result_provenance(result: DeployResult) -> Provenance:
    try:
        return Provenance(str(result.metrics.get("provenance", Provenance.HOST.value)))
    except ValueError:
        return Provenance.HOST


def cycles_name(result: DeployResult) -> str:
    return str(result.metrics.get("cycles_name") or "cycles")


def metric_entry(metric: Metric, **extra: Any) -> dict[str, Any]:
    entry = metric.as_dict()
    entry.pop("name")
    entry.update(extra)
    return entry


#: per-layer energy of one call (power monitors that attribute energy to layers)
LAYER_ENERGY = "energy"


def layer_columns(result: DeployResult) -> list[LayerColumn]:
    prov = result_provenance(result)
    columns: list[LayerColumn] = []
    if any(layer.time_ms is not None for layer in result.layers):
        columns.append(LayerColumn(LAYER_TIME, "ms", prov))
    cyc = cycles_name(result)
    units = dict(result.metrics.get("counter_units") or {})
    units[cyc] = str(result.metrics.get("cycles_unit") or "cycles")
    for layer in result.layers:
        for counter in layer.counters:
            if all(c.key != counter for c in columns):
                # each counter in its own unit (cycles, instructions, ns, count)
                columns.append(LayerColumn(counter, units.get(counter, "count"), prov))
    if result.power is not None and any(layer.energy_uj is not None for layer in result.layers):
        columns.append(LayerColumn(LAYER_ENERGY, "uJ", result.power.provenance))
    for key, (attr, unit) in STATIC_COLUMNS.items():
        if any(getattr(layer, attr, None) is not None for layer in result.layers):
            # MACs and parameters are read from the export on the host; time per MAC
            # inherits the provenance of the time it divides
            columns.append(
                LayerColumn(key, unit, prov if key == "time_per_mac" else Provenance.HOST)
            )
    return columns


#: static per-layer figures from the export: key -> (attribute, unit)
STATIC_COLUMNS = {
    "macs": ("macs", "MAC"),
    "params": ("params", "count"),
    "time_per_mac": ("ns_per_mac", "ns/MAC"),
}


def _layer_value(layer: Any, key: str) -> float | None:
    if key == LAYER_TIME:
        return None if layer.time_ms is None else float(layer.time_ms)
    if key == LAYER_ENERGY:
        return None if layer.energy_uj is None else float(layer.energy_uj)
    if key in STATIC_COLUMNS:
        static = getattr(layer, STATIC_COLUMNS[key][0], None)
        return None if static is None else float(static)
    value = layer.counters.get(key)
    return None if value is None else float(value)


def _headline_metrics(
    result: DeployResult,
    aggregation: Aggregation,
    latency: Aggregate | None,
    cycles: Aggregate | None,
) -> dict[str, dict[str, Any]]:
    prov = result_provenance(result)
    metrics: dict[str, dict[str, Any]] = {m.name: metric_entry(m) for m in result.measurements}
    if latency is not None:
        metrics["latency"] = metric_entry(
            Metric(
                "latency",
                latency.value,
                "ms",
                prov,
                f"latency per inference: {latency.describe()}",
                None if latency.value is not None else "every sample was rejected",
                resolution=timer_resolution_for(result.protocol),
            ),
            aggregate=latency.as_dict(),
        )
    if cycles is not None:
        name = cycles_name(result)
        metrics[name] = metric_entry(
            Metric(
                name,
                cycles.value,
                str(result.metrics.get("cycles_unit") or "cycles"),
                prov,
                f"{name.replace('_', ' ')} per inference: {cycles.describe()}",
                None if cycles.value is not None else "every sample was a wrapped 32-bit reading",
            ),
            aggregate=cycles.as_dict(),
        )
    binary = result.metrics.get("binary")
    if isinstance(binary, Mapping):
        for key, what in (("flash_bytes", "flash"), ("ram_bytes", "static RAM")):
            if binary.get(key) is not None:
                metrics[key] = metric_entry(
                    Metric(
                        key,
                        int(binary[key]),
                        "B",
                        Provenance.HOST,
                        f"{what} use of the built program, read from its ELF",
                    )
                )
    if result.accuracy is not None:
        metrics["accuracy"] = metric_entry(
            Metric("accuracy", float(result.accuracy), "ratio", prov, "top-1 accuracy on target")
        )
    return metrics


def _latency_block(result: DeployResult, latency: Aggregate | None) -> dict[str, Any] | None:
    if not result.timings or latency is None:
        return None
    stats = LatencyStats.of(result.timings)
    block: dict[str, Any] = dict(stats.__dict__)
    block["provenance"] = result_provenance(result).value
    block["samples"] = [float(t) for t in result.timings]
    block["aggregate"] = latency.as_dict()
    return block


def _memory_block(result: DeployResult) -> dict[str, Any]:
    binary = result.metrics.get("binary")
    binary = binary if isinstance(binary, Mapping) else {}
    peaks = result.memory_peak_bytes
    return {
        "unit": "B",
        "flash_bytes": binary.get("flash_bytes"),
        "flash_capacity": binary.get("flash_capacity"),
        "ram_bytes": binary.get("ram_bytes"),
        "ram_capacity": binary.get("ram_capacity"),
        "text_bytes": binary.get("text_bytes"),
        "data_bytes": binary.get("data_bytes"),
        "bss_bytes": binary.get("bss_bytes"),
        "activation_bytes": None if peaks is None else int(peaks),
        "activation_per_memory": None if peaks is None else list(peaks.per_memory),
        "peak_rss_bytes": result.metrics.get("peak_rss_bytes"),
    }


def build_summary(
    result: DeployResult,
    *,
    run_id: str,
    timestamp: str,
    identity: Mapping[str, Any],
    validity: Validity,
    aggregation: Aggregation | str = Aggregation.MEDIAN,
) -> dict[str, Any]:
    """The ``summary.json`` document of one run."""
    method = Aggregation(aggregation)
    latency = aggregate_samples(result.timings, method) if result.timings else None
    raw_cycles = result.metrics.get("cycles")
    cycles = (
        aggregate_samples(raw_cycles, method, counter_bits=COUNTER_BITS) if raw_cycles else None
    )
    columns = layer_columns(result)
    layers = []
    for index, layer in enumerate(result.layers):
        figures = {}
        for col in columns:
            value = _layer_value(layer, col.key)
            if value is not None:
                figures[col.key] = {
                    "value": value,
                    "unit": col.unit,
                    "provenance": col.provenance.value,
                }
        layers.append({"index": index, "name": layer.name, "metrics": figures})
    return {
        "schema": SUMMARY_SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp": timestamp,
        "target": result.target,
        "backend": result.backend,
        "protocol": result.protocol,
        "provenance": result_provenance(result).value,
        "cycles_name": cycles_name(result),
        "aggregation": method.value,
        "identity": dict(identity),
        "metrics": _headline_metrics(result, method, latency, cycles),
        "latency": _latency_block(result, latency),
        "cycles_samples": [float(c) for c in raw_cycles] if raw_cycles else None,
        "layer_columns": [
            {"key": c.key, "unit": c.unit, "provenance": c.provenance.value} for c in columns
        ],
        "layers": layers,
        "memory": _memory_block(result),
        "stage_durations_ms": {k: float(v) for k, v in result.stage_durations_ms.items()},
        "notices": [str(n) for n in result.metrics.get("notices") or []],
        "validity": validity.as_dict(),
        "power": None if result.power is None else result.power.as_dict(),
    }


def profile_results_csv(summary: Mapping[str, Any]) -> str:
    """``profile_results.csv``: one row per layer; a column per figure, unit in its name."""
    columns = summary["layer_columns"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["index", "layer", *(f"{c['key']}_{c['unit']}" for c in columns), "provenance"])
    for layer in summary["layers"]:
        row: list[Any] = [layer["index"], layer["name"]]
        for col in columns:
            fig = layer["metrics"].get(col["key"])
            row.append("" if fig is None else repr(fig["value"]))
        row.append(summary["provenance"])
        writer.writerow(row)
    return buf.getvalue()


def profile_results_json(summary: Mapping[str, Any]) -> str:
    """``profile_results.json``: the same table as the CSV, typed and self-describing."""
    doc = {
        "schema": PROFILE_SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run_id": summary["run_id"],
        "provenance": summary["provenance"],
        "columns": summary["layer_columns"],
        "layers": [
            {
                "index": layer["index"],
                "name": layer["name"],
                "values": {k: v["value"] for k, v in layer["metrics"].items()},
            }
            for layer in summary["layers"]
        ],
    }
    return json.dumps(doc, indent=2) + "\n"
