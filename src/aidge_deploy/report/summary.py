"""The figures of one run, as ``summary.json`` and ``profile_results.{csv,json}`` hold them.

Every figure becomes ``{value, unit, provenance, resolution, ...}``: a latency measured on
the host, a cycle count read on silicon, an instruction count from an emulator, a time
estimated from it and a size read from the ELF must never be mistaken for one another, in a
file any more than in the API. Headline figures are the result's own ``Metric`` objects
(reduced once, in Assemble); per-layer figures come from ``profiling.layer_table``, the
table the terminal prints too.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from aidge_deploy.config import Aggregation
from aidge_deploy.metrics import figure, series
from aidge_deploy.profiling.binary import size_metrics
from aidge_deploy.profiling.layer_table import layer_table
from aidge_deploy.profiling.validity import Validity
from aidge_deploy.report.reader import LAYER_PREFIX
from aidge_deploy.report.schemas import CURRENT_VERSIONS, DOCUMENT_IDS, SchemaName
from aidge_deploy.results import DeployResult, LatencyStats, Metric, Provenance
from aidge_deploy.timing import TimingInfo

#: the versions of the two documents written here (``report.schemas``)
SUMMARY_VERSION = CURRENT_VERSIONS[SchemaName.SUMMARY]
PROFILE_VERSION = CURRENT_VERSIONS[SchemaName.PROFILE_RESULTS]
#: step of the clock the pipeline times its stages with (``time.perf_counter``), ms
PERF_COUNTER_RESOLUTION_MS = time.get_clock_info("perf_counter").resolution * 1e3
SUMMARY_SCHEMA = DOCUMENT_IDS[SchemaName.SUMMARY]
PROFILE_SCHEMA = DOCUMENT_IDS[SchemaName.PROFILE_RESULTS]


class ProfileFormat(StrEnum):
    CSV = "csv"
    JSON = "json"


def result_provenance(result: DeployResult) -> Provenance:
    """What the run is (silicon, host, emulated): declared by its target, never assumed."""
    raw = result.metrics.get("provenance")
    if raw is None:
        raise ValueError("the result does not say what its figures are (metrics['provenance'])")
    return Provenance(str(raw))


def cycles_name(result: DeployResult) -> str:
    return str(result.metrics.get("cycles_name") or "cycles")


def metric_entry(metric: Metric, **extra: Any) -> dict[str, Any]:
    """A ``Metric`` as the summary stores it (plus the resolution flags of a time)."""
    entry = metric.as_flagged_dict()
    entry.pop("name")
    entry.update(extra)
    return entry


def headline_metrics(result: DeployResult) -> tuple[Metric, ...]:
    """The run's headline figures: its measurements, the program's sizes (static facts of
    its ELF) and the accuracy on target when it printed predictions."""
    metrics = [*result.measurements, *size_metrics(result.metrics.get("binary"))]
    if result.accuracy is not None:
        metrics.append(
            Metric(
                "accuracy",
                float(result.accuracy),
                "ratio",
                result_provenance(result),
                "top-1 accuracy of the predictions the target printed",
            )
        )
    return tuple(metrics)


def result_figures(result: DeployResult) -> dict[str, Metric]:
    """Every figure of the run by the keys of its bundle's figures (``reader.Summary.figures``):
    the headline ones by name, then ``layers/<layer>/<figure>``."""
    out = {m.name: m for m in headline_metrics(result)}
    for row in layer_table(result).rows:
        for key, cell in row.cells.items():
            out[f"{LAYER_PREFIX}{row.name}/{key}"] = cell
    return out


def _headline_metrics(result: DeployResult) -> dict[str, dict[str, Any]]:
    aggregates = result.metrics.get("aggregates") or {}
    metrics: dict[str, dict[str, Any]] = {}
    for m in headline_metrics(result):
        extra = {"aggregate": aggregates[m.name]} if m.name in aggregates else {}
        metrics[m.name] = metric_entry(m, **extra)
    return metrics


def _latency_block(result: DeployResult) -> dict[str, Any] | None:
    timing = result.timing
    if not result.timings or timing is None:
        return None
    stats = LatencyStats.of(result.timings)
    block: dict[str, Any] = dict(stats.__dict__)
    block["provenance"] = timing.provenance.value
    block["resolution"] = timing.resolution_ms
    block["label"] = timing.label
    block["samples"] = [float(t) for t in result.timings]
    aggregate = (result.metrics.get("aggregates") or {}).get("latency")
    if aggregate is not None:
        block["aggregate"] = aggregate
    return block


def timing_block(timing: TimingInfo | None) -> dict[str, Any] | None:
    """How the times were obtained: the steps in ms, the core clock an estimate divides by
    as a figure of its own (a fact of the board)."""
    if timing is None:
        return None
    block = timing.as_dict()
    clock = block.pop("clock_hz", None)
    block["unit"] = "ms"
    block["clock"] = None if clock is None else figure(clock, "Hz", Provenance.STATIC)
    return block


def _cycles_block(result: DeployResult) -> dict[str, Any] | None:
    raw = result.metrics.get("cycles")
    if not raw:
        return None
    quantity = str(result.metrics.get("cycles_unit") or cycles_name(result))
    prov = Provenance(
        str(
            (result.metrics.get("counter_provenance") or {}).get(cycles_name(result))
            or result.metrics.get("provenance")
        )
    )
    return series([float(c) for c in raw], quantity, prov)


def _stage_block(result: DeployResult) -> dict[str, Any]:
    """How long each pipeline stage took on this machine's monotonic clock."""
    durations = {k: float(v) for k, v in result.stage_durations_ms.items()}
    return series(durations, "ms", Provenance.HOST, PERF_COUNTER_RESOLUTION_MS)


def _memory_block(result: DeployResult) -> dict[str, Any]:
    """Sizes and planned activation memory: static facts of the build (the measured peak
    RSS is the ``peak_rss`` metric)."""
    binary = result.metrics.get("binary")
    binary = binary if isinstance(binary, Mapping) else {}
    peaks = result.memory_peak_bytes
    mcu = binary.get("flash_capacity") is not None
    return {
        "unit": "B",
        "provenance": Provenance.STATIC.value,
        "kind": "firmware" if mcu else "program",
        "flash_bytes": binary.get("flash_bytes") if mcu else None,
        "flash_capacity": binary.get("flash_capacity"),
        "image_bytes": None if mcu else binary.get("flash_bytes"),
        "ram_bytes": binary.get("ram_bytes"),
        "ram_capacity": binary.get("ram_capacity"),
        "text_bytes": binary.get("text_bytes"),
        "data_bytes": binary.get("data_bytes"),
        "bss_bytes": binary.get("bss_bytes"),
        "activation_bytes": None if peaks is None else int(peaks),
        "activation_per_memory": None if peaks is None else list(peaks.per_memory),
    }


def _layer_block(
    result: DeployResult,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], dict[str, Any] | None]:
    table = layer_table(result)
    columns = [
        {
            "key": c.key,
            "title": c.title,
            "unit": c.unit,
            "provenance": c.provenance.value,
            "quantity": c.quantity,
            "resolution": c.resolution,
            "derived": c.derived,
        }
        for c in table.columns
    ]
    layers = [
        {
            "index": row.index,
            "name": row.name,
            "metrics": {key: metric_entry(cell) for key, cell in row.cells.items()},
        }
        for row in table.rows
    ]
    coverage = None if table.coverage is None else table.coverage.as_dict()
    return columns, layers, [c.key for c in table.charted()], coverage


#: keys whose numbers are identifiers, not figures (a schema's version, a row's index)
IDENTIFIER_KEYS = frozenset({"schema_version", "index", "chosen_pulse"})


def unlabelled_numbers(doc: Any, path: str = "$", labelled: bool = False) -> list[str]:
    """Where ``doc`` holds a number without a unit and a provenance (DESIGN §6).

    A number is labelled inside an object that states both (a figure ``{value, unit,
    provenance}``, a series, a block such as ``latency`` whose values share them); the only
    bare numbers allowed are identifiers (``IDENTIFIER_KEYS``). Returns the paths of the
    others, and of any ``unit`` or ``provenance`` that is not one.
    """
    found: list[str] = []
    if isinstance(doc, Mapping):
        here = "unit" in doc and "provenance" in doc
        if here and (not isinstance(doc["unit"], str) or not doc["unit"]):
            found.append(f"{path}.unit")
        if here and doc["provenance"] not in {p.value for p in Provenance}:
            found.append(f"{path}.provenance")
        for key, value in doc.items():
            if key in IDENTIFIER_KEYS and isinstance(value, int):
                continue
            if key == "band" and isinstance(value, Mapping):
                continue  # fractions of the figure it is stated for (the schema's band)
            found += unlabelled_numbers(value, f"{path}.{key}", labelled or here)
    elif isinstance(doc, list | tuple):
        for i, value in enumerate(doc):
            found += unlabelled_numbers(value, f"{path}[{i}]", labelled)
    elif isinstance(doc, int | float) and not isinstance(doc, bool) and not labelled:
        found.append(path)
    return found


def provenances_of(summary: Mapping[str, Any]) -> list[str]:
    """Every provenance a figure of the summary has, in vocabulary order (the legend)."""
    used = {summary["provenance"]}
    # a figure that does not exist has no provenance in the legend
    used |= {m["provenance"] for m in summary["metrics"].values() if m["value"] is not None}
    used |= {c["provenance"] for c in summary["layer_columns"]}
    if summary.get("latency"):
        used.add(summary["latency"]["provenance"])
    return [p.value for p in Provenance if p.value in used]


def build_summary(
    result: DeployResult,
    *,
    run_id: str,
    timestamp: str,
    identity: Mapping[str, Any],
    validity: Validity,
    aggregation: Aggregation | str = Aggregation.MEDIAN,
) -> dict[str, Any]:
    """The ``summary.json`` document of one run.

    Headline figures are the result's own ``Metric`` objects (reduced once, in Assemble,
    with the run's aggregation), so the file says what the terminal says.
    """
    method = Aggregation(aggregation)
    columns, layers, charted, coverage = _layer_block(result)
    summary: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA,
        "schema_version": SUMMARY_VERSION,
        "run_id": run_id,
        "timestamp": timestamp,
        "target": result.target,
        "backend": result.backend,
        "protocol": result.protocol,
        "provenance": result_provenance(result).value,
        "timing": timing_block(result.timing),
        "cycles_name": cycles_name(result),
        "timing_model": result.metrics.get("timing_model"),
        "aggregation": method.value,
        "identity": dict(identity),
        "metrics": _headline_metrics(result),
        # the counters asked for (keys of ``metrics``): per inference, measured or not
        "counters": [m.name for m in result.counter_metrics()],
        "latency": _latency_block(result),
        "cycles_samples": _cycles_block(result),
        "layer_columns": columns,
        "layers": layers,
        "charted_columns": charted,
        # the layers' total time over the latency per inference (``layer_table.coverage``)
        "layers_share_of_latency": coverage,
        "memory": _memory_block(result),
        "stage_durations": _stage_block(result),
        "notices": [str(n) for n in result.metrics.get("notices") or []],
        "validity": validity.as_dict(),
        "power": None if result.power is None else result.power.as_dict(),
    }
    summary["provenances"] = provenances_of(summary)
    return summary


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
            row.append("" if fig is None or fig["value"] is None else repr(fig["value"]))
        row.append(summary["provenance"])
        writer.writerow(row)
    return buf.getvalue()


def profile_results_json(summary: Mapping[str, Any]) -> str:
    """``profile_results.json``: the same table as the CSV, typed and self-describing."""
    doc = {
        "schema": PROFILE_SCHEMA,
        "schema_version": PROFILE_VERSION,
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
