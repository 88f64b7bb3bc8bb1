"""The figures of a ``DeployResult`` by name, exactly as its result bundle names them.

Budgets and dashboards must read the same numbers the bundle holds: the headline metrics
of ``summary.json`` (``latency``, ``emulated_instructions``, ``flash_bytes``, ``accuracy``,
every typed measurement, ...) and the per-layer figures ``layers/<layer>/<figure>``. When
the run wrote a bundle, its ``summary.json`` is read; otherwise the same summary is built
in memory with the bundle's own code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aidge_deploy.results import DeployResult


LAYER_PREFIX = "layers/"


@dataclass(frozen=True)
class Figure:
    """One named figure of a run."""

    name: str
    value: float | None
    unit: str
    provenance: str
    unavailable_reason: str | None = None
    description: str = ""

    def describe(self) -> str:
        if self.value is None:
            return f"unavailable ({self.unavailable_reason or 'no value'})"
        return f"{self.value:.6g} {self.unit}"


def result_summary(result: DeployResult) -> Mapping[str, Any]:
    """The ``summary.json`` document of the run (read from its bundle, or built)."""
    if result.report_dir is not None:
        path = Path(result.report_dir) / "summary.json"
        if path.is_file():
            doc: Mapping[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return doc
    from aidge_deploy.config import Aggregation
    from aidge_deploy.profiling.validity import assess
    from aidge_deploy.report.summary import build_summary

    return build_summary(
        result,
        run_id="",
        timestamp="",
        identity={},
        validity=assess(result, aggregation=Aggregation.MEDIAN),
    )


def result_figures(result: DeployResult) -> dict[str, Figure]:
    """Every figure of the run by name (headline metrics, then ``layers/<layer>/<figure>``)."""
    summary = result_summary(result)
    out: dict[str, Figure] = {}
    for name, metric in (summary.get("metrics") or {}).items():
        out[name] = _figure(name, metric)
    for layer in summary.get("layers") or []:
        for key, fig in layer["metrics"].items():
            name = f"{LAYER_PREFIX}{layer['name']}/{key}"
            out[name] = _figure(name, fig)
    return out


def headline_figures(result: DeployResult) -> dict[str, Figure]:
    """The run's headline figures (no per-layer ones): what CI dashboards chart."""
    return {k: v for k, v in result_figures(result).items() if not k.startswith(LAYER_PREFIX)}


def _figure(name: str, raw: Mapping[str, Any]) -> Figure:
    value = raw.get("value")
    return Figure(
        name=name,
        value=None if value is None else float(value),
        unit=str(raw.get("unit", "")),
        provenance=str(raw.get("provenance", "")),
        unavailable_reason=raw.get("unavailable_reason"),
        description=str(raw.get("description") or ""),
    )
