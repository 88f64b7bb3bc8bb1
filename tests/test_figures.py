"""Issue 9, item by item: each test reproduces a figure that used to be wrong and shows the
right one. Results are assembled from real captured logs by the registered targets
themselves (``captured.result_from_capture``), so no board is needed here; the same checks
on live deploys are in ``test_figures_deploy.py``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from aidge_deploy import stats
from aidge_deploy.benchmark_api import build_results_from_uart_log
from aidge_deploy.cli import render
from aidge_deploy.cli.main import app
from aidge_deploy.config import Aggregation, DeployConfig
from aidge_deploy.display import figure_text
from aidge_deploy.hwfacts import bytes_in_own_unit, machine_memory_bytes
from aidge_deploy.metrics import Provenance, format_figure
from aidge_deploy.profiling.layer_table import (
    SHARE,
    TIME,
    TIME_PER_MAC,
    coverage_text,
    layer_table,
)
from aidge_deploy.profiling.qemu_plugin import PluginTrace, Snapshot
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.registry import get_deploy_target
from aidge_deploy.report.assess import assess
from aidge_deploy.report.html import render_html
from aidge_deploy.report.summary import build_summary
from aidge_deploy.results import DeployResult, LayerFigure
from captured import LOGS, load_capture, result_from_capture, result_from_text

BOARDS = ("mps2-an386", "mps3-an547", "netduinoplus2")
_HASH = "0" * 64


def _summary(result: DeployResult) -> dict:  # type: ignore[type-arg]
    return build_summary(
        result,
        run_id="0b7f3b43-1c1e-4a5e-9d3b-6b1d2c3e4f50",
        timestamp="2025-01-01T00:00:00Z",
        identity={"model_hash": _HASH, "io_signature": _HASH, "export_hash": _HASH, "target": "t"},
        validity=assess(result),
    )


def printed_result(result: DeployResult) -> str:
    """What ``aidge-deploy run/profile`` prints for ``result`` (no colours, 200 columns)."""
    console = Console(width=200, record=True, color_system=None)
    old = render.console
    render.console = console
    try:
        render.print_result(result)
    finally:
        render.console = old
    return console.export_text()


# -- item 1: emulated time is instructions ÷ the core clock, labelled estimated ----------------


@pytest.mark.parametrize("board", BOARDS)
def test_emulated_milliseconds_are_instructions_over_the_core_clock(board: str) -> None:
    text, manifest = load_capture("qemu", f"{board}_benchmark")
    parsed = get_protocol(manifest.protocol).parse(text, manifest)
    target = get_deploy_target(board, "local")
    hz = target.hardware_target.main_pe.frequency_hz  # the hardware model's core clock
    result = result_from_capture("qemu", f"{board}_benchmark")
    instructions = [target.convert_cycles(c) for c in parsed.cycles or ()]
    assert result.timings == pytest.approx([n / hz * 1e3 for n in instructions])
    # what used to be reported: time on QEMU's virtual clock, where an instruction lasts
    # 2**shift ns — 1.6x too long on an386, 1.34x on netduinoplus2, 1.024x on an547 ...
    virtual = [c / target.board.cpu_hz * 1e3 for c in parsed.cycles or ()]
    ratio = {"mps2-an386": 1.6, "netduinoplus2": 1.344, "mps3-an547": 1.024}[board]
    assert [v / t for v, t in zip(virtual, result.timings or [], strict=True)] == pytest.approx(
        [ratio] * len(virtual)
    )
    # ... which is what the firmware's own (coarser) tick readings say, to within a tick
    assert parsed.timings_ms is not None
    assert stats.median(parsed.timings_ms) == pytest.approx(stats.median(virtual), abs=0.1)
    for layer in result.layers:
        count = layer.counters["emulated_instructions"]
        assert layer.time_ms == pytest.approx(count / hz * 1e3)
    label = f"estimated at {hz / 1e6:g} MHz, CPI = 1"
    timing = result.timing
    assert timing is not None and timing.label == label and timing.clock_hz == hz
    assert timing.provenance is Provenance.ESTIMATED
    assert timing.resolution_ms == pytest.approx(1e3 / hz)  # one instruction
    for metric in result.measurements:
        if metric.name.startswith("latency"):
            assert metric.provenance is Provenance.ESTIMATED and label in metric.description
    counts = result.metric("emulated_instructions")
    assert counts is not None and counts.provenance is Provenance.EMULATED
    summary = _summary(result)
    assert summary["timing"]["label"] == label
    assert summary["metrics"]["latency"]["value"] == pytest.approx(
        stats.median(instructions) / hz * 1e3
    )
    for row in summary["layers"]:  # per-layer times in the bundle: the same rule
        count = row["metrics"]["emulated_instructions"]["value"]
        assert row["metrics"]["time"]["value"] == pytest.approx(count / hz * 1e3)
    printed = printed_result(result)
    latency = result.metric("latency")
    assert latency is not None and f"latency: {render.shown_figure(latency)}" in printed
    assert label in printed
    page = render_html(summary, {})
    assert f"Times are {label}: estimates from those counts" in page  # the banner
    card = re.search(r'data-metric="latency".*?<div class="v">([^<]*)</div>', page, re.S)
    assert card is not None and card.group(1) == figure_text(
        summary["metrics"]["latency"]["value"], "ms", summary["metrics"]["latency"]["resolution"]
    )


def test_emulated_time_without_cycle_counter_converts_the_tick() -> None:
    """A build without profiling prints only tick readings: converted, with the tick's step."""
    result = result_from_capture("qemu", "mps2-an386_benchmark-noprofiling")
    text, manifest = load_capture("qemu", "mps2-an386_benchmark-noprofiling")
    raw = get_protocol(manifest.protocol).parse(text, manifest)
    assert raw.timings_ms == (0.9, 1.0, 0.9, 0.9, 1.0)
    assert result.timings == pytest.approx([t / 1.6 for t in raw.timings_ms])
    assert result.timing is not None and result.timing.resolution_ms == pytest.approx(0.1 / 1.6)


def test_the_layers_say_what_part_of_the_latency_they_add_up_to() -> None:
    """Emulated: each layer's count and the inference's count come from one counter, and the
    layers' sum is short of the inference by the code that calls and times them. The
    terminal, summary.json and the report say how much, instead of a share column that sums
    to 100 % and leaves the reader to wonder why the headline is larger."""
    result = result_from_capture("qemu", "mps2-an386_benchmark")
    latency = result.metric("latency")
    assert latency is not None and latency.value
    total = sum(layer.time_ms or 0.0 for layer in result.layers)
    coverage = layer_table(result).coverage
    assert coverage is not None and coverage.provenance is Provenance.ESTIMATED
    assert coverage.value == pytest.approx(100.0 * total / latency.value)
    assert 50.0 < coverage.value < 100.0, "layers are most of the inference, not all of it"
    sentence = coverage_text(coverage)
    assert sentence is not None and f"{coverage.value:.1f} %" in sentence
    assert sentence in " ".join(printed_result(result).split())
    summary = _summary(result)
    assert summary["layers_share_of_latency"]["value"] == pytest.approx(coverage.value)
    assert sentence in render_html(summary, {})
    # no such figure when a layer has no time
    untimed = dataclasses.replace(result.layers[0], time_ms=None)
    partial = dataclasses.replace(result, layers=(untimed, *result.layers[1:]))
    assert layer_table(partial).coverage is None
    assert _summary(partial)["layers_share_of_latency"] is None
    assert "add up to" not in printed_result(partial)


# -- item 2: resolution ------------------------------------------------------------------------


def test_layer_times_print_to_the_tick_and_sub_tick_layers_get_no_ratio() -> None:
    """The contract's UART capture on a probe board: per-layer times from a 1 ms tick."""
    result = result_from_capture("contract", "mps2-an386_benchmark_profiling", target="stm32h743")
    layers = tuple(
        dataclasses.replace(layer, macs=1000 if "Reshape" not in layer.name else 10)
        for layer in result.layers
    )
    result = dataclasses.replace(result, layers=layers)
    table = layer_table(result)
    time_column = table.column(TIME)
    assert time_column is not None and time_column.resolution == 1.0
    reshape = next(row for row in table.rows if "Reshape" in row.name)
    assert reshape.cells[TIME].value == 0.0 and reshape.cells[TIME].below_resolution
    # it used to be "0%" and 0.0 ns/MAC
    assert reshape.cells[SHARE].value is None and reshape.cells[TIME_PER_MAC].value is None
    assert "resolution" in (reshape.cells[SHARE].unavailable_reason or "")
    conv = next(row for row in table.rows if "Conv" in row.name)
    assert conv.cells[TIME].coarse  # 0.18 ms of a 1 ms tick
    printed = printed_result(result)
    assert "0.1800000" not in printed and "0.180000" not in printed  # no six decimals
    assert "<1*" in printed  # below one tick: flagged, not 0


def test_latency_samples_step_is_the_tick_over_the_forwards() -> None:
    result = result_from_capture("contract", "mps2-an386_benchmark_profiling", target="stm32h743")
    assert result.timing is not None and result.timing.resolution_ms == pytest.approx(0.1)
    latency = result.metric("latency")
    assert latency is not None and latency.resolution == pytest.approx(0.1)
    assert latency.formatted() == "0.6 ms"


# -- item 3: one statistics module -------------------------------------------------------------


def test_terminal_bundle_and_html_give_the_same_median() -> None:
    """It used to print the upper middle sample in the terminal and the true median in files."""
    text, manifest = load_capture("qemu", "mps2-an386_benchmark")
    # six samples: the median is the mean of the two middle ones
    cycles = [24257, 24239, 24255, 24255, 24245, 24241]
    text = text.replace(
        "cpu_cycles: 24257 24239 24255 24255 24245", "cpu_cycles: " + " ".join(map(str, cycles))
    ).replace(
        "inference_time: 1.000 0.900 1.000 1.000 0.900",
        "inference_time: 1.000 0.900 1.000 1.000 0.900 1.000",
    )
    manifest = dataclasses.replace(
        manifest, application_config={**manifest.application_config, "nb_iterations": 6}
    )
    result = result_from_text(text, manifest, LOGS / "qemu")
    target = get_deploy_target("mps2-an386", "local")
    instructions = [target.convert_cycles(c) for c in cycles]
    expected = stats.median(instructions)
    assert expected != sorted(instructions)[len(instructions) // 2]  # not the upper middle
    metric = result.metric("emulated_instructions")
    assert metric is not None and metric.value == pytest.approx(expected)
    summary = _summary(result)
    assert summary["metrics"]["emulated_instructions"]["value"] == pytest.approx(expected)
    printed = printed_result(result)
    shown = format_figure(expected, "instructions")
    assert f"emulated instructions: {shown}" in printed
    assert re.search(r"\d,\d{3}\.\d+ instructions", printed) is None  # counts are integers
    page = render_html(summary, {})
    assert f">{shown}<" in page  # the HTML card says the same


@pytest.mark.parametrize("method", list(Aggregation))
def test_every_view_reduces_with_the_chosen_aggregation(method: Aggregation) -> None:
    result = result_from_capture(
        "qemu", "mps2-an386_benchmark", config=DeployConfig(target="mps2-an386", aggregation=method)
    )
    samples = result.timings or []
    value, _ = stats.reduce(samples, method.value)
    latency = result.metric("latency")
    assert latency is not None and latency.value == pytest.approx(value)
    assert _summary(result)["metrics"]["latency"]["value"] == pytest.approx(value)


# -- item 4: no fabricated figure --------------------------------------------------------------


def test_mlperf_latency_is_not_a_one_sample_series(tmp_path: Path) -> None:
    result = result_from_capture("qemu", "mps2-an386_tinyml")
    assert result.timings is None and result.latency is None
    latency = result.metric("mlperf_latency")
    assert latency is not None and latency.provenance is Provenance.ESTIMATED
    log = LOGS / "contract" / "mps2-an386_tinyml.log"
    legacy = build_results_from_uart_log(log, [], None, False, True)
    assert legacy["timings"] == []  # it used to be [latency_us / 1000]


def test_benchmark_api_never_takes_accuracy_from_the_callers_predictions() -> None:
    log = LOGS / "contract" / "mps2-an386_benchmark_profiling.log"
    # the log has no prediction: the caller's predictions used to make a 100 % "accuracy"
    legacy = build_results_from_uart_log(log, [1, 2, 3], [1, 2, 3], True, False)
    assert legacy["accuracy"] is None and legacy["predictions"] == []


def test_an_autoencoder_mse_is_never_called_accuracy(tmp_path: Path) -> None:
    log = tmp_path / "uart.log"
    log.write_text(
        "READY 0\nvalidation_metric: 0.0100000000\nREADY 1\nvalidation_metric: 0.0300000000\n"
        "VALIDATION_DONE\ninference_time: 0.500 0.600 \nBENCHMARK_DONE\n"
    )
    legacy = build_results_from_uart_log(log, [], None, True, False, "autoencoder")
    assert legacy["accuracy"] is None and legacy["validation_metric"] == "mse"
    assert legacy["validation_metrics"] == [0.01, 0.03]


def test_static_figures_are_static_and_a_program_image_is_not_flash() -> None:
    host = result_from_capture("host", "benchmark_profiling")
    host = dataclasses.replace(
        host,
        metrics={**host.metrics, "binary": {"flash_bytes": 9000, "ram_bytes": 1200}},
    )
    summary = _summary(host)
    assert "flash_bytes" not in summary["metrics"]
    assert summary["metrics"]["image_bytes"]["provenance"] == "static"
    assert summary["metrics"]["static_data_bytes"]["provenance"] == "static"
    assert "flash" not in printed_result(host).lower()
    as_json = host.to_json()["binary"]  # --json: it used to say "flash_bytes" for a program
    assert as_json["image_bytes"] == 9000 and as_json["static_data_bytes"] == 1200
    assert as_json["provenance"] == "static" and "flash" not in json.dumps(as_json)
    mcu = result_from_capture("qemu", "mps2-an386_benchmark")
    binary = {"flash_bytes": 30000, "ram_bytes": 4000, "flash_capacity": 4 << 20}
    mcu = dataclasses.replace(mcu, metrics={**mcu.metrics, "binary": binary})
    assert _summary(mcu)["metrics"]["flash_bytes"]["provenance"] == "static"
    assert mcu.to_json()["binary"]["flash_bytes"] == 30000


# -- item 5: unsafe defaults -------------------------------------------------------------------


def test_every_registered_target_declares_what_its_figures_are() -> None:
    from aidge_deploy.registry import DeployTarget, registered_targets

    for (name, backend), cls in registered_targets().items():
        if not issubclass(cls, DeployTarget):
            continue  # a remote backend (the farm): its result says what the board measured
        assert isinstance(cls.timing_provenance, Provenance), (name, backend)
        assert isinstance(cls.counter_provenance, Provenance), (name, backend)
    qemu = get_deploy_target("mps2-an386", "local")
    assert qemu.cycle_counter_bits is None  # 64-bit SysTick-derived, converted
    probe = get_deploy_target("stm32h743", "local")
    assert probe.cycle_counter_bits == 32  # DWT CYCCNT


# -- item 6: hardware facts --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "shown"),
    [
        (1_000_000, "1 MB"),  # STM32F746 flash: it used to be "977 KiB"
        (2_000_000, "2 MB"),
        (640_000, "640 kB"),
        (4 * 1024 * 1024, "4 MiB"),
        (192 * 1024, "192 KiB"),
        (13_500_000, "13.5 MB"),
    ],
)
def test_memories_print_in_the_unit_they_are_declared_in(declared: int, shown: str) -> None:
    assert bytes_in_own_unit(declared) == shown


def test_targets_shows_this_machines_memory_and_the_sources() -> None:
    """It showed the host's memory as 954 MiB (the hardware model's 1 GB placeholder)."""
    from aidge_deploy.catalog import target_rows

    real = machine_memory_bytes()
    assert real is not None
    rows = {(r.target, r.backend): r for r in target_rows()}
    host = rows[("host", "local")]
    assert host.memories == f"mem {real / (1 << 30):.1f} GiB" and "this machine" in host.sources
    assert "flash 1 MB" in rows[("stm32f746", "local")].memories
    assert rows[("stm32f746", "local")].sources == "aidge_core.hw_model"
    res = CliRunner().invoke(app, ["targets"], env={"COLUMNS": "200"})  # cells whole
    assert res.exit_code == 0, res.output
    squeezed = re.sub(r"\s+", "", res.output)  # rich wraps cells over several lines
    assert f"mem{real / (1 << 30):.1f}" in squeezed and "954" not in squeezed
    assert "977" not in squeezed and "thismachine" in squeezed


# -- item 7 is in test_report_html.py; this checks the summary's chart plan ---------------------


def test_the_summary_charts_each_quantity_once() -> None:
    summary = _summary(result_from_capture("qemu", "mps2-an386_benchmark"))
    columns = {c["key"]: c for c in summary["layer_columns"]}
    assert columns["time"]["quantity"] == columns["emulated_instructions"]["quantity"]
    assert summary["charted_columns"] == ["emulated_instructions"]
    assert json.dumps(summary)  # JSON-safe


def test_a_layer_without_a_time_has_no_share() -> None:
    result = result_from_capture("qemu", "mps2-an386_benchmark")
    layers = (*result.layers, LayerFigure("extra", None, {"emulated_instructions": 5.0}))
    table = layer_table(dataclasses.replace(result, layers=layers))
    assert SHARE not in table.rows[-1].cells and TIME not in table.rows[-1].cells


def _trace(layer_counts: list[list[int]]) -> PluginTrace:
    """A plugin trace of forwards whose layers ran ``layer_counts[forward][layer]``
    instructions (one load per instruction, no store or branch): boundary 0 is the forward's
    entry, boundary 1 the cycle read before and after each layer."""
    snaps: list[Snapshot] = []
    total = 0

    def snap(boundary: int) -> None:
        counts = {"instructions": total, "loads": total, "stores": 0, "branches_taken": 0}
        snaps.append(Snapshot(len(snaps), boundary, counts))

    for forward in layer_counts:
        snap(0)
        for count in forward:
            snap(1)
            total += count
            snap(1)
    return PluginTrace((0x100, 0x200), tuple(snaps), None)


def test_emulated_pass_says_its_aggregation_and_never_sums_medians() -> None:
    """Issue 9 item 4: the emulated counter pass wrote "median" whatever the aggregation,
    and published the sum of per-layer medians as the per-inference total."""
    from aidge_deploy.boards.baremetal.qemu.pmu import PmuSymbols, pass_result_from_trace
    from aidge_deploy.profiling.counters import select_counters
    from aidge_deploy.profiling.passes import plan_passes

    (only,) = plan_passes(select_counters("emu-instructions", "emulated"), 4)
    # warm-up forward first; then per-layer medians 10 + 10, but no forward ran 20
    trace = _trace([[99, 99], [10, 30], [10, 10], [30, 10]])

    def run(method: Aggregation):  # type: ignore[no-untyped-def]
        return pass_result_from_trace(
            only,
            trace,
            PmuSymbols(0x100, 0x200),
            layer_names=["conv", "fc"],
            warmup=1,
            aggregation=method,
            icount_shift=6,
        )

    median = run(Aggregation.MEDIAN)
    assert [lc.values["emu-instructions"] for lc in median.layers] == [10.0, 10.0]
    assert median.totals["emu-instructions"] == 40.0  # forwards ran 40, 20, 40
    mean = run(Aggregation.MEAN)
    assert mean.basis.startswith("mean over 3 iterations") and "median" not in mean.basis
    assert mean.totals["emu-instructions"] == pytest.approx(100 / 3)


def test_an_emulated_count_past_2_31_is_not_declared_wrapped() -> None:
    """Issue 9 item 5: the plugin's counts are 64-bit; a global 32-bit width declared a long
    layer (past 2^31 instructions) wrapped and dropped it as invalid."""
    from aidge_deploy.boards.baremetal.qemu.pmu import PmuSymbols, pass_result_from_trace
    from aidge_deploy.profiling.counters import select_counters
    from aidge_deploy.profiling.passes import merge_passes, plan_passes

    selection = select_counters("emu-instructions", "emulated")
    (only,) = plan_passes(selection, 4)
    long = 3_000_000_000  # > 2^31
    trace = _trace([[5, 5], [long, 10], [long + 2, 10], [long + 4, 10]])
    result = pass_result_from_trace(
        only,
        trace,
        PmuSymbols(0x100, 0x200),
        layer_names=["conv", "fc"],
        warmup=1,
        aggregation=Aggregation.MEDIAN,
        icount_shift=6,
    )
    assert not result.unavailable and "rejected" not in result.basis
    assert [lc.values["emu-instructions"] for lc in result.layers] == [long + 2, 10.0]
    assert result.totals["emu-instructions"] == long + 12
    profile = merge_passes(selection, [result])
    assert profile.counter_bits == {"emu-instructions": 64}  # the width of this counter
    (metric,) = profile.measurements()
    assert metric.value == long + 12


@pytest.mark.parametrize(
    ("name", "validation", "tinyml"),
    [
        ("mps2-an386_benchmark_profiling", False, False),
        ("mps2-an386_validation", True, False),
        ("mps2-an386_tinyml", False, True),
    ],
)
def test_one_legacy_results_builder_agrees_with_deploy(
    name: str, validation: bool, tinyml: bool
) -> None:
    """The exporter's ``build_results_from_uart_log`` and ``deploy()``'s ``output`` are the
    same dict for the same UART log (one builder: ``legacy_results``)."""
    from aidge_deploy import benchmark_api, legacy_results
    from aidge_deploy.pipeline.stages import assemble

    assert benchmark_api.legacy_results is legacy_results.legacy_results
    assert assemble.legacy_results is legacy_results.legacy_results
    result = result_from_capture("contract", name, target="stm32h743")
    log = LOGS / "contract" / f"{name}.log"
    from_log = build_results_from_uart_log(log, [7, 7, 7], None, validation, tinyml)
    assert isinstance(result.output, dict)
    assert json.dumps(from_log, sort_keys=True) == json.dumps(result.output, sort_keys=True)
    assert from_log["timings"] == ([] if tinyml else list(result.timings or []))


def test_a_farm_result_keeps_its_timing_and_resolutions() -> None:
    """The ``api`` backend returns what the agent measured: timing and resolutions included."""
    from aidge_deploy.farm.resultcodec import decode_result, encode_result

    result = result_from_capture("qemu", "mps2-an386_benchmark")
    back = decode_result(json.loads(json.dumps(encode_result(result))))
    assert back.timing == result.timing
    assert back.measurements == result.measurements


def test_every_counter_asked_for_is_shown_measured_or_not() -> None:
    """Counters asked for (``--counters``) used to reach summary.json only: the terminal and
    the HTML report showed neither their per-inference figures nor why one was missing."""
    from aidge_deploy.metrics import Metric

    host = result_from_capture("host", "benchmark_profiling")
    clock = Metric("task-clock", 92919.4, "ns", Provenance.HOST, "task clock", resolution=1.0)
    faults = Metric("page-faults", 9.25, "events", Provenance.HOST, "page faults")
    missing = Metric.unavailable("cycles", "cycles", Provenance.HOST, "ENOENT: no such event")
    result = dataclasses.replace(
        host,
        measurements=(*host.measurements, clock, faults, missing),
        metrics={**host.metrics, "counters": ["cycles", "task-clock", "page-faults"]},
    )
    assert result.counter_metrics() == (missing, clock, faults)
    printed = printed_result(result)
    assert "Counters per inference" in printed
    assert "92,919 ns" in printed and "9.25 events" in printed
    assert "cycles: unavailable (ENOENT: no such event)" in printed
    summary = _summary(result)
    assert summary["counters"] == ["cycles", "task-clock", "page-faults"]
    page = render_html(summary, {})
    assert page.count('data-counter-table="1"') == 1
    rows = re.findall(r'<tr data-counter="([^"]+)">(.*?)</tr>', page)
    assert [name for name, _ in rows] == ["cycles", "task-clock", "page-faults"]
    assert "unavailable (ENOENT: no such event)" in rows[0][1] and "92,919 ns" in rows[1][1]
    # a run asked for no counter has no counter section
    assert "Counters per inference" not in printed_result(host)
    assert "data-counter-table" not in render_html(_summary(host), {})
