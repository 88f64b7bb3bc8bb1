"""The campaign's figures arranged to decide from: a table per quantity, int8 against
float32, targets side by side, Pareto fronts, and the CSV and JSON of every cell.

Why this module exists: the terminal, the HTML page, the CSV and the JSON must show the same
arrangement of the same numbers, so it is computed once here from the cells' records
(``cell.json``), never from a re-run. A figure keeps its name (``emulated_instructions`` is
not ``cycles``), its unit and its provenance everywhere; a cell that failed, was not run, or
measured nothing for a quantity says so instead of showing a number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aidge_deploy.campaign.figures import (
    ACCURACY,
    FLASH,
    LATENCY,
    QUANTITIES,
    RAM,
    Better,
    Quantity,
    figure_columns,
    pick,
)
from aidge_deploy.display import figure_text

#: the identity columns of the CSV, before the figures
CSV_FIELDS = (
    "campaign",
    "cell",
    "key",
    "model",
    "target",
    "hardware_target",
    "reach",
    "board",
    "dtype",
    "iterations",
    "warmup",
    "heuristic",
    "mem_wrap",
    "status",
    "error_type",
    "error",
    "does_not_fit",
    "provenance",
    "flash_capacity [B]",
    "ram_capacity [B]",
    "fits",
    "quantisation_calibration_samples",
    "duration [s]",
)


class CellState(StrEnum):
    OK = "ok"
    UNAVAILABLE = "unavailable"  # the cell ran; this figure does not exist for it
    FAILED = "failed"
    DOES_NOT_FIT = "does-not-fit"
    MISSING = "missing"  # not run (yet): interrupted, or never started


@dataclass(frozen=True)
class TableCell:
    state: CellState
    text: str
    value: float | None = None
    unit: str = ""
    provenance: str | None = None
    #: the summary figure shown (``emulated_instructions``, ``cycles``, ...)
    figure: str | None = None
    note: str = ""
    cell_id: str | None = None


@dataclass(frozen=True)
class MetricTable:
    quantity: Quantity
    models: tuple[str, ...]
    targets: tuple[str, ...]
    options: tuple[str, ...]
    cells: Mapping[tuple[str, str, str], TableCell]

    def get(self, model: str, target: str, option: str) -> TableCell | None:
        return self.cells.get((model, target, option))

    @property
    def has_values(self) -> bool:
        return any(c.state is CellState.OK for c in self.cells.values())


def _axes(records: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], ...]:
    def ordered(key: str) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for r in records:
            seen.setdefault(str(r[key] if key != "target" else r["target"]["label"]), None)
        return tuple(seen)

    models = tuple(dict.fromkeys(r["model"]["name"] for r in records))
    return models, ordered("target"), ordered("option_label")


def figure_cell(record: Mapping[str, Any], quantity: Quantity) -> TableCell:
    """What a table shows for ``quantity`` in the cell of ``record``."""
    cell_id = record.get("id")
    status = record.get("status")
    if status is None:
        return TableCell(CellState.MISSING, "not run", note="not run yet", cell_id=cell_id)
    if status != "done":
        error = record.get("error") or {}
        message = str(error.get("message") or "failed")
        if error.get("does_not_fit"):
            return TableCell(CellState.DOES_NOT_FIT, "does not fit", note=message, cell_id=cell_id)
        return TableCell(CellState.FAILED, "failed", note=message, cell_id=cell_id)
    found = pick(record.get("figures") or {}, quantity)
    if found is None:
        return TableCell(
            CellState.UNAVAILABLE, "n/a", note="not measured in this cell", cell_id=cell_id
        )
    name, metric = found
    if metric.value is None:
        return TableCell(
            CellState.UNAVAILABLE,
            "n/a",
            unit=metric.unit,
            provenance=metric.provenance.value,
            figure=name,
            note=f"unavailable ({metric.unavailable_reason})",
            cell_id=cell_id,
        )
    text = figure_text(float(metric.value), metric.unit, metric.resolution, band=metric.band)
    if name == "emulated_instructions":
        text = text.replace(" instructions", " instr.")
    return TableCell(
        CellState.OK,
        text,
        float(metric.value),
        metric.unit,
        metric.provenance.value,
        name,
        metric.description,
        cell_id,
    )


def metric_tables(records: Sequence[Mapping[str, Any]]) -> list[MetricTable]:
    """One table per quantity that some cell has (models x targets x option sets)."""
    models, targets, options = _axes(records)
    tables = []
    for quantity in QUANTITIES:
        cells = {
            (r["model"]["name"], r["target"]["label"], r["option_label"]): figure_cell(r, quantity)
            for r in records
        }
        table = MetricTable(quantity, models, targets, options, cells)
        if table.has_values or quantity in (LATENCY, FLASH, RAM):
            tables.append(table)
    return tables


@dataclass(frozen=True)
class SideBySide:
    """One model and option set: each quantity (rows) on each target (columns)."""

    model: str
    option: str
    targets: tuple[str, ...]
    rows: tuple[tuple[Quantity, tuple[TableCell, ...]], ...]
    capacities: tuple[tuple[int | None, int | None], ...]


def side_by_side(records: Sequence[Mapping[str, Any]]) -> list[SideBySide]:
    """For each (model, option set): the targets next to each other."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["model"]["name"], r["option_label"]), []).append(r)
    out = []
    for (model, option), rows in groups.items():
        quantities = [
            q
            for q in QUANTITIES
            if q in (LATENCY, FLASH, RAM)
            or any(figure_cell(r, q).state is CellState.OK for r in rows)
        ]
        out.append(
            SideBySide(
                model,
                option,
                tuple(r["target"]["label"] for r in rows),
                tuple((q, tuple(figure_cell(r, q) for r in rows)) for q in quantities),
                tuple(
                    (
                        (r.get("memory") or {}).get("flash_capacity"),
                        (r.get("memory") or {}).get("ram_capacity"),
                    )
                    for r in rows
                ),
            )
        )
    return out


# ----------------------------------------------------------------------------- int8 cost


@dataclass(frozen=True)
class Int8Cost:
    """int8 against float32 for one model on one target (other options equal)."""

    model: str
    target: str
    options: str
    #: percentage points of top-1 accuracy lost (None: not measured on both)
    accuracy_lost_pp: float | None
    #: int8 latency over float32 latency (below 1: faster)
    latency_ratio: float | None
    flash_saved_bytes: int | None
    ram_saved_bytes: int | None
    note: str = ""


def _other_options(record: Mapping[str, Any]) -> tuple[Any, ...]:
    options = dict(record.get("options") or {})
    options.pop("dtype", None)
    return tuple(sorted(options.items()))


def _value(record: Mapping[str, Any], quantity: Quantity) -> tuple[str, float] | None:
    cell = figure_cell(record, quantity)
    if cell.state is not CellState.OK or cell.value is None or cell.figure is None:
        return None
    return cell.figure, cell.value


def _pair(
    f32: Mapping[str, Any], i8: Mapping[str, Any], quantity: Quantity
) -> tuple[float, float] | None:
    """The float32 and int8 values of ``quantity``, if both cells have the same figure."""
    a, b = _value(f32, quantity), _value(i8, quantity)
    if a is None or b is None or a[0] != b[0]:
        return None  # never a ratio of two different figures
    return a[1], b[1]


def int8_costs(records: Sequence[Mapping[str, Any]]) -> list[Int8Cost]:
    """Each (model, target, other options) run both as float32 and int8."""
    pairs: dict[tuple[Any, ...], dict[str, Mapping[str, Any]]] = {}
    for r in records:
        key = (r["model"]["name"], r["target"]["label"], _other_options(r))
        pairs.setdefault(key, {})[str(r["options"]["dtype"])] = r
    out = []
    for (model, target, _), by_dtype in pairs.items():
        f32, i8 = by_dtype.get("float32"), by_dtype.get("int8")
        if f32 is None or i8 is None:
            continue
        words = str(f32.get("option_label") or "-").split()
        label = " ".join(w for w in words if w not in ("float32", "int8")) or "-"
        if f32.get("status") != "done" or i8.get("status") != "done":
            failed = [d for d, r in (("float32", f32), ("int8", i8)) if r.get("status") != "done"]
            out.append(
                Int8Cost(
                    model, target, label, None, None, None, None, f"{', '.join(failed)} did not run"
                )
            )
            continue

        acc, lat, flash, ram = (_pair(f32, i8, q) for q in (ACCURACY, LATENCY, FLASH, RAM))
        out.append(
            Int8Cost(
                model,
                target,
                label,
                None if acc is None else round((acc[0] - acc[1]) * 100, 4),
                None if lat is None or lat[0] <= 0 else lat[1] / lat[0],
                None if flash is None else int(flash[0] - flash[1]),
                None if ram is None else int(ram[0] - ram[1]),
            )
        )
    return out


# ----------------------------------------------------------------------------- Pareto


@dataclass(frozen=True)
class ParetoPoint:
    model: str
    option: str
    cell_id: str
    latency_ms: float
    memory_bytes: float
    accuracy: float | None
    on_front: bool
    fits: bool | None


def pareto_points(
    records: Sequence[Mapping[str, Any]], target: str, memory: Quantity
) -> tuple[list[ParetoPoint], str | None, str | None]:
    """The target's cells as (latency, memory) points, the front of the ones no other cell
    beats on both; with the latency's provenance and the memory figure's name."""
    raw = []
    provenance = None
    figure = None
    for r in records:
        if r["target"]["label"] != target or r.get("status") != "done":
            continue
        lat, mem = figure_cell(r, LATENCY), figure_cell(r, memory)
        if lat.value is None or mem.value is None:
            continue
        provenance = provenance or lat.provenance
        figure = figure or mem.figure
        accuracy = figure_cell(r, ACCURACY)
        raw.append(
            (r, lat.value, mem.value, accuracy.value if accuracy.state is CellState.OK else None)
        )
    points = []
    for r, lat_ms, mem_b, acc in raw:
        dominated = any(
            (l2 <= lat_ms and m2 <= mem_b and (l2 < lat_ms or m2 < mem_b)) for _, l2, m2, _ in raw
        )
        points.append(
            ParetoPoint(
                r["model"]["name"],
                r["option_label"],
                str(r["id"]),
                lat_ms,
                mem_b,
                acc,
                not dominated,
                r.get("fits"),
            )
        )
    return points, provenance, figure


def better_text(quantity: Quantity) -> str:
    return "higher is better" if quantity.better is Better.HIGHER else "lower is better"


# ----------------------------------------------------------------------------- files


def cells_csv(records: Sequence[Mapping[str, Any]]) -> str:
    """One row per cell; every figure as ``name [unit]`` with a ``name provenance`` column."""
    figures = figure_columns(records)
    header = list(CSV_FIELDS)
    for name, unit in figures:
        header += [f"{name} [{unit}]", f"{name} provenance"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for r in records:
        options = r.get("options") or {}
        error = r.get("error") or {}
        memory = r.get("memory") or {}
        quant = r.get("quantisation") or {}
        row: list[Any] = [
            r.get("campaign"),
            r.get("id"),
            r.get("key"),
            r["model"]["name"],
            r["target"]["label"],
            r["target"]["target"],
            r["target"]["reach"],
            r["target"].get("board") or "",
            options.get("dtype"),
            options.get("iterations"),
            options.get("warmup"),
            options.get("heuristic") or "",
            "" if options.get("mem_wrap") is None else options.get("mem_wrap"),
            r.get("status") or "not run",
            error.get("type") or "",
            (error.get("message") or "").splitlines()[0] if error.get("message") else "",
            bool(error.get("does_not_fit")),
            r.get("provenance") or "",
            memory.get("flash_capacity") or "",
            memory.get("ram_capacity") or "",
            "" if r.get("fits") is None else r.get("fits"),
            quant.get("calibration_samples") or "",
            r.get("duration_s") or "",
        ]
        for name, _unit in figures:
            entry = (r.get("figures") or {}).get(name)
            if entry is None:
                row += ["", ""]
            else:
                value = entry.get("value")
                row += ["" if value is None else value, entry.get("provenance") or ""]
        writer.writerow(row)
    return out.getvalue()


def cells_json(plan_doc: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every cell's record (figures with unit, provenance, resolution) in one document."""
    return {
        "schema": "aidge-deploy/campaign-cells",
        "schema_version": 1,
        "campaign": plan_doc.get("name"),
        "varying_options": plan_doc.get("varying_options"),
        "cells": [dict(r) for r in records],
        "int8_cost": [c.__dict__ for c in int8_costs(records)],
    }


__all__ = [
    "CSV_FIELDS",
    "CellState",
    "Int8Cost",
    "MetricTable",
    "ParetoPoint",
    "SideBySide",
    "TableCell",
    "better_text",
    "cells_csv",
    "cells_json",
    "figure_cell",
    "int8_costs",
    "metric_tables",
    "pareto_points",
    "side_by_side",
]
