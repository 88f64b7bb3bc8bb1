"""Issue 9 acceptance on live deploys: every figure has a unit and a provenance, every time
its timer's resolution — on the host, on an emulated board and on an SSH board — and on the
three emulated boards a millisecond is instructions ÷ the core clock."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

import aidge_deploy
from aidge_deploy.cli.render import shown_figure
from aidge_deploy.config import DeployConfig
from aidge_deploy.metrics import Metric, Provenance, is_time_unit
from aidge_deploy.profiling.binary import size_metrics
from aidge_deploy.profiling.layer_table import layer_table
from aidge_deploy.results import DeployResult
from boards import SshBoard
from envparts import needs
from test_figures import _summary as summary_of
from test_figures import printed_result

pytestmark = pytest.mark.slow

BOARDS = ("mps2-an386", "mps3-an547", "netduinoplus2")
needs_qemu = needs(shutil.which("qemu-system-arm") is not None, "qemu-system-arm is not installed")


def every_metric(result: DeployResult) -> list[Metric]:
    """Every ``Metric`` a deploy produced: its measurements and every per-layer cell."""
    cells = [cell for row in layer_table(result).rows for cell in row.cells.values()]
    return [*result.measurements, *cells]


def assert_every_figure_is_labelled(result: DeployResult) -> None:
    metrics = every_metric(result)
    assert metrics, "the deploy produced no figure"
    for metric in metrics:
        where = f"{result.target}/{result.backend}: {metric.name}"
        assert isinstance(metric, Metric), where
        assert metric.unit, f"{where} has no unit"
        assert isinstance(metric.provenance, Provenance), f"{where} has no provenance"
        if metric.value is None:
            assert metric.unavailable_reason, f"{where} is None without a reason"
        elif is_time_unit(metric.unit):
            assert metric.resolution is not None and metric.resolution > 0, (
                f"{where} is a time without its timer's resolution"
            )
    if result.timings:
        assert result.timing is not None and result.timing.resolution_ms
    assert result.metrics["provenance"] in {p.value for p in Provenance}
    # the bundle's figures too (its binary sizes and accuracy are Metrics built for it)
    summary = summary_of(result)
    entries = [*summary["metrics"].items()] + [
        (f"{layer['name']}/{key}", entry)
        for layer in summary["layers"]
        for key, entry in layer["metrics"].items()
    ]
    for name, entry in entries:
        assert entry["unit"] and entry["provenance"] in {p.value for p in Provenance}, name
        if entry["value"] is None:
            assert entry["unavailable_reason"], name
        elif is_time_unit(entry["unit"]):
            assert entry["resolution"], f"{name} is a time without its timer's resolution"
    # facts of the build and the model are static, never "measured" (issue 9 item 4)
    build_facts = [m for m in metrics if m.name in STATIC_FIGURES]
    assert {"macs", "params", "activation_memory"} <= {m.name for m in build_facts}
    for metric in build_facts:
        assert metric.provenance is Provenance.STATIC, metric.name


#: figures of the build or the model: the measurements and the per-layer cells so named
STATIC_FIGURES = frozenset({"macs", "params", "activation_memory"})


def assert_json_carries_what_the_terminal_prints(result: DeployResult) -> None:
    """``--json`` (``to_json``) holds every figure the terminal shows, with the same value,
    unit and provenance: the headline figures, the latency statistics, every per-layer cell
    (share and time/MAC included, with their resolution flags), every counter asked for
    (measured or unavailable), the memories and the binary's sizes."""
    printed = printed_result(result)
    doc = json.loads(json.dumps(result.to_json()))
    carried = {m["name"]: m for m in doc["measurements"]}
    cycles = result.metric(str(result.metrics.get("cycles_name") or "cycles"))
    shown = [m for m in (cycles, result.metric("latency"), result.metric("mlperf_latency")) if m]
    counters = result.counter_metrics()
    assert [m.name for m in counters] == list(result.metrics["counters"])
    for metric in (*shown, *counters):
        # a time in the unit that reads best for it, as in the report
        assert shown_figure(metric) in printed, (metric.name, shown_figure(metric))
        entry = carried[metric.name]
        assert (entry["value"], entry["unit"], entry["provenance"]) == (
            metric.value,
            metric.unit,
            metric.provenance.value,
        ), metric.name
        assert entry["resolution"] == metric.resolution
    if result.latency is not None:
        assert doc["latency"] == pytest.approx(result.latency.__dict__)
    table = layer_table(result)
    assert [layer["name"] for layer in doc["layers"]] == [row.name for row in table.rows]
    for row, layer in zip(table.rows, doc["layers"], strict=True):
        assert row.name in printed
        assert set(layer["figures"]) == set(row.cells), row.name
        for key, cell in row.cells.items():
            figure = layer["figures"][key]
            assert figure["value"] == cell.value and figure["unit"] == cell.unit, (row.name, key)
            assert figure["provenance"] == cell.provenance.value
            assert figure["unavailable_reason"] == cell.unavailable_reason
            if cell.resolution is not None and cell.value is not None:
                assert figure["resolution"] == cell.resolution
                assert figure["below_resolution"] == cell.below_resolution
    if result.memory_peak_bytes is not None:
        assert f"{int(result.memory_peak_bytes):,} B" in printed
        assert doc["memory_peak_bytes"]["total"] == int(result.memory_peak_bytes)
    if "Peak RSS" in printed:
        assert carried["peak_rss"]["value"] == result.metrics["peak_rss_bytes"]
    sizes = size_metrics(result.metrics.get("binary"))
    assert len(sizes) == 2, "the run reported no binary size"
    for size in sizes:  # flash and RAM of a firmware, image and data of a program
        assert f"{size.value:,} B" in printed and doc["binary"][size.name] == size.value
    if result.metrics["binary"].get("flash_capacity") is None:
        assert "flash" not in json.dumps(doc["binary"]), "a program's image is not flash"


def test_every_host_figure_is_labelled(export_factory: Any) -> None:
    result = aidge_deploy.deploy(
        export_factory("benchmark"),
        # cycles: measured where the machine has a PMU, else unavailable with its reason
        DeployConfig(counters=("task-clock", "page-faults", "cycles")),
    )
    assert_every_figure_is_labelled(result)
    assert_json_carries_what_the_terminal_prints(result)
    assert [m.name for m in result.counter_metrics()] == ["task-clock", "page-faults", "cycles"]
    assert {m.provenance for m in result.measurements} <= {Provenance.HOST, Provenance.STATIC}
    assert result.metric("task-clock") is not None


@needs_qemu
@pytest.mark.qemu
def test_every_emulated_figure_is_labelled(export_factory: Any) -> None:
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=3)
    result = aidge_deploy.deploy(artifact, DeployConfig(counters=("emulated",)))
    assert_every_figure_is_labelled(result)
    assert_json_carries_what_the_terminal_prints(result)
    kinds = {m.provenance for m in every_metric(result)}
    assert kinds == {Provenance.EMULATED, Provenance.ESTIMATED, Provenance.STATIC}


@pytest.mark.ssh
def test_every_ssh_board_figure_is_labelled(ssh_board: SshBoard, export_factory: Any) -> None:
    from test_sbc_deploy import board_config

    config = board_config(ssh_board, counters=("task-clock",))
    result = aidge_deploy.deploy(
        export_factory("benchmark", target="raspberrypi", nb_iterations=5), config
    )
    assert_every_figure_is_labelled(result)
    assert_json_carries_what_the_terminal_prints(result)
    measured = {m.provenance for m in result.measurements} - {Provenance.STATIC}
    assert measured == {Provenance.SILICON}  # measured on the board


@needs_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", BOARDS)
def test_emulated_ms_is_estimated_cycles_over_the_core_clock(
    board: str, export_factory: Any
) -> None:
    """The time is the core's timing model's cycles ÷ the core clock (``--timing cpi1``:
    instructions, ``test_timing_model``), the instructions beside them, on every board."""
    result = aidge_deploy.deploy(
        export_factory("benchmark", target=board, nb_iterations=4), DeployConfig()
    )
    from aidge_deploy.registry import get_deploy_target

    hz = get_deploy_target(board).hardware_target.main_pe.frequency_hz
    estimated = result.metrics["estimated_cycles"]  # the model's cycles per inference
    assert result.timings is not None and estimated and result.metrics["cycles"]
    assert list(result.timings) == pytest.approx([n / hz * 1e3 for n in estimated])
    for layer in result.layers:
        assert layer.time_ms == pytest.approx(layer.counters["estimated_cycles"] / hz * 1e3)
        # priced per instruction: never under one cycle an instruction on these cores
        assert layer.counters["estimated_cycles"] >= 0.99 * layer.counters["emulated_instructions"]
    latency = result.metric("latency")
    assert latency is not None and latency.provenance is Provenance.ESTIMATED
    label = "M55 timing model" if board == "mps3-an547" else "M4 timing model"
    assert f"estimated ({label}) at {hz / 1e6:g} MHz" in latency.description
