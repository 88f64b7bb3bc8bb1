"""The history in the formats of the tools teams already chart with.

* **Bencher Metric Format** (BMF JSON, ``bencher run --adapter json --file FILE``): an
  object of benchmarks, each an object of measures, each ``{"value", "lower_value",
  "upper_value"}`` (bounds optional). A benchmark is an identity (test or name, kind,
  dtype, iterations; the target and board are in its name so one file may hold several —
  pass ``--testbed`` to ``bencher run`` as you see fit). ``latency`` uses Bencher's
  built-in Latency measure, in nanoseconds (its unit), with the run's fastest and slowest
  inference as bounds; other figures are measures named ``<figure>-<unit>``.
* **github-action-benchmark**, tool ``customSmallerIsBetter``: a JSON array of
  ``{"name", "unit", "value", "range"?, "extra"?}``. Only figures where smaller is better
  are written (accuracies are not); ``extra`` carries provenance, target and commit.

Both take one record per identity: the latest, or the one of a given commit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from aidge_deploy.history.identity import RunIdentity
from aidge_deploy.history.series import by_identity
from aidge_deploy.history.store import HistoryRecord
from aidge_deploy.metrics import TIME_UNITS

#: figures where larger is better: never exported as "smaller is better"
LARGER_IS_BETTER = re.compile(r"accuracy|throughput|top1|agreement", re.IGNORECASE)


class ExportFormat(StrEnum):
    BMF = "bmf"
    GITHUB_ACTION_BENCHMARK = "github-action-benchmark"


def latest_per_identity(
    records: Iterable[HistoryRecord], commit: str | None = None
) -> list[HistoryRecord]:
    """Each identity's latest record (of ``commit``, a prefix, when given)."""
    out = []
    for recs in by_identity(records).values():
        chosen = [r for r in recs if commit is None or (r.vcs.commit or "").startswith(commit)]
        if chosen:
            out.append(chosen[-1])
    return out


def benchmark_name(identity: RunIdentity) -> str:
    """``test_m.py::test_lenet [mps2-an386] benchmark float32 x10``."""
    runs = f" x{identity.iterations}" if identity.iterations is not None else ""
    return f"{identity.name} [{identity.where}] {identity.kind} {identity.dtype}{runs}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def to_bmf(records: Sequence[HistoryRecord]) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format of ``records`` (one per identity, see ``latest_per_identity``)."""
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for record in records:
        measures: dict[str, dict[str, float]] = {}
        for name, fig in record.figures.items():
            if fig.value is None:
                continue
            if name == "latency" and fig.unit in TIME_UNITS:
                to_ns = TIME_UNITS[fig.unit] * 1e9
                metric = {"value": fig.value * to_ns}
                low, high = record.figures.get("latency_min"), record.figures.get("latency_max")
                bounds = [f.value for f in (low, high) if f is not None and f.unit == fig.unit]
                if len(bounds) == 2 and None not in bounds:
                    metric["lower_value"] = float(bounds[0] or 0.0) * to_ns
                    metric["upper_value"] = float(bounds[1] or 0.0) * to_ns
                measures["latency"] = metric
                continue
            measures[_slug(f"{name}-{fig.unit}" if fig.unit else name)[:64]] = {"value": fig.value}
        if measures:
            doc[benchmark_name(record.identity)] = measures
    return doc


def to_github_action_benchmark(records: Sequence[HistoryRecord]) -> list[dict[str, Any]]:
    """github-action-benchmark's ``customSmallerIsBetter`` entries of ``records``."""
    out: list[dict[str, Any]] = []
    for record in records:
        for name, fig in record.figures.items():
            if fig.value is None or LARGER_IS_BETTER.search(name):
                continue
            extra = [f"provenance: {fig.provenance}", f"target: {record.identity.where}"]
            if record.vcs.commit:
                extra.append(f"commit: {record.vcs.commit}")
            entry: dict[str, Any] = {
                "name": f"{benchmark_name(record.identity)} - {name}",
                "unit": fig.unit,
                "value": fig.value,
                "extra": "\n".join(extra),
            }
            if fig.resolution is not None:
                entry["range"] = f"± {fig.resolution:g}"
            out.append(entry)
    return out


def export(records: Sequence[HistoryRecord], fmt: ExportFormat) -> Any:
    if fmt is ExportFormat.BMF:
        return to_bmf(records)
    return to_github_action_benchmark(records)
