"""A cell's figures, read from its result bundle, and the quantities a campaign compares.

Why this module exists: a campaign's tables, charts, CSV and history records must show the
numbers the cell's own bundle holds — the same ``summary.json`` a single ``profile`` run
writes, with each figure's unit, provenance and resolution — never a re-computation.
The quantities say which of a summary's figures answer each question of the report: a
latency, cycles (read on silicon, or estimated by an emulated board's timing model: the
figure's name says which), emulated instructions (never shown as cycles), the memory the
program needs against what the board has, the energy, the accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from aidge_deploy.metrics import Metric, Provenance
from aidge_deploy.report.summary import metric_entry

if TYPE_CHECKING:
    from aidge_deploy.report.reader import MemoryFacts, Summary


class Better(StrEnum):
    LOWER = "lower"
    HIGHER = "higher"


@dataclass(frozen=True)
class Quantity:
    """A question the report answers, and the summary figures that answer it (first found)."""

    key: str
    title: str
    names: tuple[str, ...]
    better: Better = Better.LOWER


LATENCY = Quantity("latency", "Latency per inference", ("latency",))
#: cycles read on silicon, or estimated by an emulated board's timing model: never both in
#: one cell (a cell's target is one or the other), and the figure's name says which
CYCLES = Quantity("cycles", "Cycles per inference", ("cycles", "estimated_cycles"))
INSTRUCTIONS = Quantity(
    "instructions", "Emulated instructions per inference", ("emulated_instructions",)
)
FLASH = Quantity("flash", "Flash (program image)", ("flash_bytes", "image_bytes"))
RAM = Quantity("ram", "Static RAM", ("ram_bytes", "static_data_bytes"))
ACTIVATIONS = Quantity("activations", "Planned activation memory", ("activation_memory",))
ENERGY = Quantity("energy", "Energy per inference", ("energy_per_inference",))
ACCURACY = Quantity("accuracy", "Top-1 accuracy on target", ("accuracy",), Better.HIGHER)

#: the quantities of the report's tables, in the order they are shown
QUANTITIES: tuple[Quantity, ...] = (
    LATENCY,
    CYCLES,
    INSTRUCTIONS,
    FLASH,
    RAM,
    ACTIVATIONS,
    ENERGY,
    ACCURACY,
)


def pick(figures: Mapping[str, Mapping[str, Any]], quantity: Quantity) -> tuple[str, Metric] | None:
    """The figure answering ``quantity`` among a cell's ``figures``: (name, metric)."""
    for name in quantity.names:
        raw = figures.get(name)
        if raw is not None:
            return name, metric_from(name, raw)
    return None


def metric_from(name: str, raw: Mapping[str, Any]) -> Metric:
    """A summary's figure entry (``metric_entry``) as a ``Metric``."""
    return Metric.from_dict({"name": name, **dict(raw)})


def bundle_figures(summary: Summary) -> dict[str, dict[str, Any]]:
    """Every headline figure of a bundle's summary, as the summary stores it."""
    return {
        name: metric_entry(
            metric,
            **(
                {"aggregate": summary.aggregates[name].as_dict()}
                if name in summary.aggregates
                else {}
            ),
        )
        for name, metric in summary.metrics.items()
    }


def memory_fit(memory: MemoryFacts) -> dict[str, Any]:
    """Flash and RAM used against the board's capacities, and whether they fit."""
    return {
        "kind": memory.kind,
        "flash_bytes": memory.program_bytes,
        "flash_capacity": memory.flash_capacity,
        "ram_bytes": memory.ram_bytes,
        "ram_capacity": memory.ram_capacity,
        "fits": memory.fits,
    }


def accuracy_entry(
    value: float | None, samples: int, provenance: str | None, reason: str | None
) -> dict[str, Any]:
    """The accuracy of a cell's validation run, as a summary figure entry."""
    prov = Provenance(provenance) if provenance else Provenance.STATIC
    if value is None:
        metric = Metric.unavailable(
            "accuracy", "ratio", prov, reason or "not measured", f"top-1 on {samples} samples"
        )
    else:
        metric = Metric(
            "accuracy",
            value,
            "ratio",
            prov,
            f"top-1 accuracy of the target's predictions on {samples} labelled samples",
        )
    entry = metric.as_dict()
    entry.pop("name")
    entry["samples"] = samples
    return entry


def figure_columns(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Every figure name the cells have, with its unit, in a stable order (the CSV columns):
    the report's quantities first, then the others alphabetically."""
    units: dict[str, str] = {}
    for record in records:
        for name, entry in (record.get("figures") or {}).items():
            units.setdefault(name, str(entry.get("unit") or ""))
    first = [n for q in QUANTITIES for n in q.names if n in units]
    rest = sorted(n for n in units if n not in first)
    return [(n, units[n]) for n in first + rest]


__all__ = [
    "ACCURACY",
    "ACTIVATIONS",
    "CYCLES",
    "ENERGY",
    "FLASH",
    "INSTRUCTIONS",
    "LATENCY",
    "QUANTITIES",
    "RAM",
    "Better",
    "Quantity",
    "accuracy_entry",
    "bundle_figures",
    "figure_columns",
    "memory_fit",
    "metric_from",
    "pick",
]
