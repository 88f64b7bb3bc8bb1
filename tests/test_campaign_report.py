"""The campaign report's arrangement of cell records: tables, int8 cost, Pareto, CSV, page.

The records here are written by hand in the shape ``cell.json`` has (the end-to-end tests
check the shape against real runs); what is checked is the arrangement: which figure a
table shows, what it refuses to compare, what a failed or missing cell shows, the front.
"""

from __future__ import annotations

import copy
import csv
import io
import re
from typing import Any

import pytest

from aidge_deploy.campaign.figures import ACCURACY, FLASH, INSTRUCTIONS, LATENCY, accuracy_entry
from aidge_deploy.campaign.html import render_campaign_html
from aidge_deploy.campaign.tables import (
    CellState,
    cells_csv,
    figure_cell,
    int8_costs,
    metric_tables,
    pareto_points,
)


def fig(value: float | None, unit: str, prov: str, res: float | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"value": value, "unit": unit, "provenance": prov, "resolution": res}
    entry["description"] = ""
    entry["unavailable_reason"] = None if value is not None else "not on this target"
    return entry


def record(
    model: str,
    target: str,
    dtype: str,
    *,
    latency_ms: float | None = 1.0,
    flash: int = 30_000,
    ram: int = 20_000,
    accuracy: float | None = None,
    status: str | None = "done",
    error: dict[str, Any] | None = None,
    instructions: float | None = 15_000,
) -> dict[str, Any]:
    host = target == "host"
    figures: dict[str, Any] = {}
    if status == "done":
        prov = "host" if host else "estimated"
        figures["latency"] = fig(latency_ms, "ms", prov, 1e-6 if host else 4e-5)
        if not host and instructions is not None:
            figures["emulated_instructions"] = fig(instructions, "instructions", "emulated")
        figures["image_bytes" if host else "flash_bytes"] = fig(flash, "B", "static")
        figures["static_data_bytes" if host else "ram_bytes"] = fig(ram, "B", "static")
        if accuracy is not None or not host:
            figures["accuracy"] = accuracy_entry(
                accuracy, 8, "host" if host else "emulated", "no interactive protocol"
            )
    return {
        "campaign": "c",
        "id": f"{model}-{target}-{dtype}",
        "key": "k" * 64,
        "model": {"name": model, "path": f"/m/{model}.onnx", "kind": "onnx"},
        "target": {"label": target, "target": target, "reach": "emulated", "board": None},
        "options": {
            "dtype": dtype,
            "iterations": 5,
            "warmup": 2,
            "heuristic": "nb_op",
            "mem_wrap": False,
        },
        "option_label": dtype,
        "status": status,
        "error": error,
        "figures": figures,
        "memory": {
            "flash_capacity": None if host else 1 << 20,
            "ram_capacity": None if host else 192 << 10,
        },
        "fits": None if host else True,
        "bundle": "bundle" if status == "done" else None,
        "quantisation": {
            "calibration": "samples",
            "calibration_samples": 4,
            "calibration_source": "calib",
        }
        if dtype == "int8"
        else None,
    }


DOES_NOT_FIT = {
    "type": "MemoryFitError",
    "message": "region FLASH overflowed by 154492 B",
    "hint": "quantise it",
    "stage": "Build",
    "log": "/logs/build.log",
    "does_not_fit": True,
}


@pytest.fixture
def records() -> list[dict[str, Any]]:
    return [
        record("lenet", "host", "float32", latency_ms=0.004),
        record("lenet", "host", "int8", latency_ms=0.003, flash=20_000),
        record("lenet", "mps2-an386", "float32", latency_ms=0.6, accuracy=1.0),
        record(
            "lenet", "mps2-an386", "int8", latency_ms=0.5, flash=20_000, ram=15_000, accuracy=0.875
        ),
        record("fat", "netduinoplus2", "float32", status="failed", error=DOES_NOT_FIT),
        record("fat", "netduinoplus2", "int8", latency_ms=5.0, flash=340_000, accuracy=0.75),
        record("fat", "host", "float32", status=None),
        record("fat", "host", "int8", latency_ms=0.1),
        record("lenet", "netduinoplus2", "float32", latency_ms=0.09, accuracy=1.0),
        record("lenet", "netduinoplus2", "int8", latency_ms=0.08, accuracy=1.0),
        record("fat", "mps2-an386", "float32", latency_ms=38.0, flash=1_200_000, accuracy=1.0),
        record("fat", "mps2-an386", "int8", latency_ms=20.0, flash=340_000, accuracy=0.75),
    ]


def test_each_cell_shows_its_figure_or_why_not(records: list[dict[str, Any]]) -> None:
    by_id = {r["id"]: r for r in records}
    lat = figure_cell(by_id["lenet-mps2-an386-float32"], LATENCY)
    assert (lat.state, lat.provenance, lat.figure) == (CellState.OK, "estimated", "latency")
    assert lat.text == "600.00 µs"  # to the timer's 40 ns step
    banded = copy.deepcopy(by_id["lenet-mps2-an386-float32"])
    banded["figures"]["latency"]["band"] = {"below": 0.1, "above": 0.15, "basis": "M4 model"}
    assert figure_cell(banded, LATENCY).text == "600 µs (−10 %/+15 %)"  # an estimate's band
    fits = figure_cell(by_id["fat-netduinoplus2-float32"], LATENCY)
    assert fits.state is CellState.DOES_NOT_FIT and "overflowed" in fits.note
    assert figure_cell(by_id["fat-host-float32"], LATENCY).state is CellState.MISSING
    host_acc = figure_cell(by_id["lenet-host-float32"], ACCURACY)
    assert host_acc.state is CellState.UNAVAILABLE
    # an emulated count keeps its name: never shown as cycles
    compute = figure_cell(by_id["lenet-mps2-an386-float32"], INSTRUCTIONS)
    assert compute.figure == "emulated_instructions" and "instr." in compute.text
    assert figure_cell(by_id["lenet-host-float32"], FLASH).figure == "image_bytes"


def test_a_table_per_quantity_models_by_targets_options_as_subcolumns(
    records: list[dict[str, Any]],
) -> None:
    tables = {t.quantity.key: t for t in metric_tables(records)}
    assert {"latency", "instructions", "flash", "ram", "accuracy"} <= set(tables)
    latency = tables["latency"]
    assert latency.models == ("lenet", "fat")
    assert latency.targets == ("host", "mps2-an386", "netduinoplus2")
    assert latency.options == ("float32", "int8")
    cell = latency.get("fat", "mps2-an386", "int8")
    assert cell is not None and cell.value == 20.0


def test_int8_against_float32_per_model_and_target(records: list[dict[str, Any]]) -> None:
    costs = {(c.model, c.target): c for c in int8_costs(records)}
    lenet = costs["lenet", "mps2-an386"]
    assert lenet.accuracy_lost_pp == pytest.approx(12.5)
    assert lenet.latency_ratio == pytest.approx(0.5 / 0.6)
    assert (lenet.flash_saved_bytes, lenet.ram_saved_bytes) == (10_000, 5_000)
    # a pair with a failed cell says so instead of comparing
    failed = costs["fat", "netduinoplus2"]
    assert failed.latency_ratio is None and "float32 did not run" in failed.note
    assert costs["lenet", "host"].accuracy_lost_pp is None  # not measured on the host


def test_pareto_front_per_target(records: list[dict[str, Any]]) -> None:
    points, provenance, figure = pareto_points(records, "mps2-an386", FLASH)
    assert provenance == "estimated" and figure == "flash_bytes"
    front = {(p.model, p.option) for p in points if p.on_front}
    # lenet int8 is faster and smaller than everything else on this target
    assert front == {("lenet", "int8")}
    points, _, _ = pareto_points(
        [*records, record("tiny", "mps2-an386", "float32", latency_ms=0.1, flash=50_000)],
        "mps2-an386",
        FLASH,
    )
    assert {(p.model, p.option) for p in points if p.on_front} == {
        ("lenet", "int8"),
        ("tiny", "float32"),
    }


def test_csv_has_one_row_per_cell_and_units_in_its_header(records: list[dict[str, Any]]) -> None:
    rows = list(csv.DictReader(io.StringIO(cells_csv(records))))
    assert len(rows) == len(records)
    header = list(rows[0])
    assert "latency [ms]" in header and "latency provenance" in header
    assert "emulated_instructions [instructions]" in header and "flash_bytes [B]" in header
    assert "accuracy [ratio]" in header and "duration [s]" in header
    assert all(re.search(r"\[.+\]$", h) for h in header if h.endswith("]"))
    fat = next(r for r in rows if r["cell"] == "fat-netduinoplus2-float32")
    assert (fat["status"], fat["does_not_fit"], fat["error_type"]) == (
        "failed",
        "True",
        "MemoryFitError",
    )
    assert fat["latency [ms]"] == ""  # never 0
    missing = next(r for r in rows if r["cell"] == "fat-host-float32")
    assert missing["status"] == "not run"


def test_the_page_marks_what_did_not_fit_and_charts_every_target(
    records: list[dict[str, Any]],
) -> None:
    page = render_campaign_html({"name": "c"}, records, generated="now")
    assert page.count('data-chart="pareto-') == 2 * 3  # flash and RAM, three targets
    assert 'data-state="does-not-fit"' in page and 'data-failed="fat-netduinoplus2-float32"' in page
    assert 'data-table="int8"' in page and "12.50 pp lost" in page
    # a measured host latency is not ranked against estimated ones: no row is bolded across
    latency = page.split('data-table="latency"')[1].split("</table>")[0]
    lenet_row = latency.split("<tbody>")[1].split("</tr>")[0]
    assert ">lenet<" in lenet_row and 'class="best"' not in lenet_row
    # ...while figures of one kind are (emulated instructions on two boards; a host program's
    # image is not a firmware's flash either)
    compute = page.split('data-table="instructions"')[1].split("</table>")[0]
    assert 'class="best"' in compute.split("<tbody>")[1].split("</tr>")[0]
    flash = page.split('data-table="flash"')[1].split("</table>")[0]
    assert 'class="best"' not in flash.split("<tbody>")[1].split("</tr>")[0]
    assert "<script" not in page


def test_side_by_side_shows_energy_and_estimated_cycles_where_they_exist() -> None:
    from aidge_deploy.campaign.figures import CYCLES, ENERGY
    from aidge_deploy.campaign.tables import side_by_side

    host = record("lenet", "host", "float32", latency_ms=0.004)
    board = record("lenet", "mps2-an386", "float32", latency_ms=0.6, accuracy=1.0)
    board["figures"]["estimated_cycles"] = fig(17_000, "cycles", "estimated")
    board["figures"]["energy_per_inference"] = fig(2.5, "uJ", "estimated")
    (view,) = side_by_side([host, board])
    rows = {q.key: cells for q, cells in view.rows}
    assert ENERGY.key in rows and CYCLES.key in rows
    host_energy, board_energy = rows[ENERGY.key]
    assert host_energy.state is CellState.UNAVAILABLE  # not measured there: never 0
    assert (board_energy.value, board_energy.unit, board_energy.provenance) == (
        2.5,
        "uJ",
        "estimated",
    )
    assert rows[CYCLES.key][1].figure == "estimated_cycles"
    assert view.capacities == ((None, None), (1 << 20, 192 << 10))
