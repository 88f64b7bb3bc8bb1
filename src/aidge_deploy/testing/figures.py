"""The figures of a ``DeployResult`` by name, exactly as its result bundle names them.

Budgets and dashboards must read the same numbers the bundle holds: the headline metrics
of ``summary.json`` (``latency``, ``emulated_instructions``, ``flash_bytes``, ``accuracy``,
every typed measurement, ...) and the per-layer figures ``layers/<layer>/<figure>``, taken
from the typed result by the code that writes them into the bundle (never re-read from
disk, never re-computed here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aidge_deploy.report.reader import LAYER_PREFIX

if TYPE_CHECKING:
    from aidge_deploy.metrics import Metric
    from aidge_deploy.results import DeployResult


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


def result_figures(result: DeployResult) -> dict[str, Figure]:
    """Every figure of the run by name (headline metrics, then ``layers/<layer>/<figure>``),
    the ones its bundle holds (``report.summary.result_figures``, the bundle's own code)."""
    from aidge_deploy.report.summary import result_figures as typed_figures

    return {name: _figure(name, metric) for name, metric in typed_figures(result).items()}


def headline_figures(result: DeployResult) -> dict[str, Figure]:
    """The run's headline figures (no per-layer ones): what CI dashboards chart."""
    return {k: v for k, v in result_figures(result).items() if not k.startswith(LAYER_PREFIX)}


def _figure(name: str, metric: Metric) -> Figure:
    value = metric.value
    return Figure(
        name=name,
        value=None if value is None else float(value),
        unit=metric.unit,
        provenance=metric.provenance.value,
        unavailable_reason=metric.unavailable_reason,
        description=metric.description,
    )
