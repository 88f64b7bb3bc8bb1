"""The HTML report: self-contained, charts drawn, provenance labelled; rendered in Chromium."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from aidge_deploy.config import DeployConfig
from aidge_deploy.report.assess import assess
from aidge_deploy.report.html import render_html
from aidge_deploy.report.summary import build_summary
from aidge_deploy.results import DeployResult
from captured import result_from_capture
from envparts import missing
from test_report_bundle import deploy_with_report

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
_ID = "0b7f3b43-1c1e-4a5e-9d3b-6b1d2c3e4f50"
_HASH = "0" * 64


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not Path(CHROMIUM).exists():
        missing("chromium is not installed (apt-get install chromium)")
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _summary(result: DeployResult) -> dict[str, Any]:
    return build_summary(
        result,
        run_id=_ID,
        timestamp="2025-01-01T00:00:00Z",
        identity={
            "model_hash": _HASH,
            "io_signature": _HASH,
            "export_hash": _HASH,
            "target": str(result.target),
        },
        validity=assess(result),
    )


def _emulated_summary() -> dict[str, Any]:
    """The real mps2-an386 benchmark capture, assembled by the QEMU board target itself."""
    return _summary(result_from_capture("qemu", "mps2-an386_benchmark"))


def _silicon_summary() -> dict[str, Any]:
    """The contract's UART benchmark capture read as a probe board's (1 ms HAL tick)."""
    return _summary(
        result_from_capture("contract", "mps2-an386_benchmark_profiling", target="stm32h743")
    )


def chart_quantities(page: str) -> list[str]:
    """The ``data-quantity`` of every chart of a page, in order."""
    return re.findall(r'<svg[^>]*class="chart"[^>]*data-quantity="([^"]*)"', page)


def assert_no_quantity_charted_twice(page: str) -> None:
    quantities = chart_quantities(page)
    assert quantities, "no chart on the page"
    assert len(quantities) == len(set(quantities)), quantities


def test_page_is_self_contained_and_escapes_names() -> None:
    summary = _emulated_summary()
    summary["layers"][0]["name"] = "<script>alert(1)</script>"
    page = render_html(summary, {"target": {"name": "mps2_an386", "hardware": {}}})
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page
    # nothing is fetched: no external URL in any src/href, no <link> or <script src>
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and not re.search(r"<script[^>]+src", page)
    assert page.count("<script>") == 1  # the inline table sorter


def test_emulated_report_labels_counts_and_estimated_times() -> None:
    summary = _emulated_summary()
    page = render_html(summary, {})
    assert 'data-provenance="emulated"' in page
    assert "emulated instruction counts, not cycles" in page
    assert "estimated at 25 MHz, CPI = 1" in page
    assert "measured on target silicon" not in page
    # the provenance legend, once, naming exactly the provenances on the page
    assert page.count("data-provenance-legend") == 1
    assert re.findall(r'data-legend="(\w+)"', page) == ["emulated", "estimated"]
    # one per-layer table with the share of time and the instruction counts as columns
    assert page.count('data-layer-table="1"') == 1
    assert 'data-key="share"' in page and 'data-key="emulated_instructions"' in page
    # the estimated time is instructions ÷ clock: charted once, as instructions
    assert 'data-chart="layer-emulated_instructions"' in page
    assert 'data-chart="layer-time"' not in page
    assert_no_quantity_charted_twice(page)
    assert 'data-validity="valid"' in page


def test_same_quantity_under_two_names_is_charted_once() -> None:
    """Issue 9 item 7: "emulated_instructions" and "emu-instructions" are one quantity."""
    result = result_from_capture("qemu", "mps2-an386_benchmark")
    layers = tuple(
        dataclasses.replace(
            layer,
            counters={
                **layer.counters,
                "emu-instructions": layer.counters["emulated_instructions"] + 17,
                "emu-loads": 100.0 + i,
            },
        )
        for i, layer in enumerate(result.layers)
    )
    metrics = {
        **result.metrics,
        "counter_units": {"emu-instructions": "instructions", "emu-loads": "events"},
        "counter_quantities": {
            **result.metrics["counter_quantities"],
            "emu-instructions": "instructions",
            "emu-loads": "emu-loads",
        },
        "counter_provenance": {
            **result.metrics["counter_provenance"],
            "emu-instructions": "emulated",
            "emu-loads": "emulated",
        },
    }
    summary = _summary(dataclasses.replace(result, layers=layers, metrics=metrics))
    assert summary["charted_columns"] == ["emulated_instructions", "emu-loads"]
    page = render_html(summary, {})
    assert_no_quantity_charted_twice(page)
    assert 'data-key="emu-instructions"' in page  # still a column of the table


def test_silicon_report_flags_layers_near_the_timer_step() -> None:
    summary = _silicon_summary()
    assert summary["timing"]["layer_resolution_ms"] == 1.0
    page = render_html(summary, {})
    assert "&lt;1 step" in page  # the Reshape layer read 0 ms of a 1 ms tick
    reshape = next(layer for layer in summary["layers"] if "Reshape" in layer["name"])
    assert reshape["metrics"]["time"]["below_resolution"] is True
    assert reshape["metrics"]["share"]["value"] is None  # no ratio of a sub-tick reading
    assert "timer.resolution_coarse" in page and 'data-validity="degraded"' in page
    assert 'data-chart="layer-time"' in page  # silicon times are measured: charted
    assert_no_quantity_charted_twice(page)


def test_latency_histogram_has_enough_bins_to_be_a_distribution() -> None:
    page = render_html(_emulated_summary(), {})
    hist = re.search(r'<svg[^>]*data-chart="latency-histogram"[^>]*data-bars="(\d+)"', page)
    assert hist is not None and int(hist.group(1)) >= 12


def screenshot(tmp_path: Path, page: Path, name: str) -> Path:
    """A full-page screenshot of ``page`` in Chromium, kept under ``test-artifacts/``."""
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / name
    shot.unlink(missing_ok=True)
    done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2800", page.as_uri())
    assert done.returncode == 0 and shot.stat().st_size > 20_000, done.stderr[-2000:]
    return shot


def rendered_dom(tmp_path: Path, page: Path) -> str:
    """The DOM after Chromium ran the page (its script included): no script error allowed."""
    dom = _chromium(tmp_path, "--enable-logging=stderr", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr, dom.stderr[-2000:]
    return dom.stdout


@pytest.mark.browser
def test_layer_table_sorts_in_chromium(tmp_path: Path) -> None:
    """Click the time column twice: layers by decreasing, then increasing time."""
    page = render_html(_silicon_summary(), {})
    probe = (
        "<script>var th=document.querySelector('th[data-key=time]');th.click();"
        "var a=[].map.call(document.querySelectorAll('table.layers tbody tr'),"
        "function(r){return r.cells[1].textContent}).join(',');th.click();"
        "var b=[].map.call(document.querySelectorAll('table.layers tbody tr'),"
        "function(r){return r.cells[1].textContent}).join(',');"
        "document.body.setAttribute('data-first',a);document.body.setAttribute('data-second',b);"
        "</script></body>"
    )
    path = tmp_path / "sort.html"
    path.write_text(page.replace("</body>", probe))
    html = rendered_dom(tmp_path, path)
    first = re.search(r'data-first="([^"]*)"', html)
    second = re.search(r'data-second="([^"]*)"', html)
    assert first is not None and second is not None
    by_time = sorted(
        _silicon_summary()["layers"], key=lambda layer: -layer["metrics"]["time"]["value"]
    )
    assert first.group(1).split(",")[0] == by_time[0]["name"]
    assert second.group(1).split(",") == list(reversed(first.group(1).split(",")))


@pytest.mark.browser
@pytest.mark.slow
def test_real_bundle_report_renders_with_charts(export_factory: Any, tmp_path: Path) -> None:
    """A host profile's report in Chromium (screenshot kept): table, charts, histogram."""
    ctx = deploy_with_report(
        export_factory("benchmark"), DeployConfig(report_dir=tmp_path / "bundle"), tmp_path / "w"
    )
    report = tmp_path / "bundle" / "report.html"
    html = rendered_dom(tmp_path, report)
    n_layers = len(ctx.deploy_result.layers)
    layer_chart = re.search(r'<svg[^>]*data-chart="layer-time"[^>]*>(.*?)</svg>', html, re.S)
    assert layer_chart is not None
    assert layer_chart.group(1).count('class="bar"') == n_layers == 4
    table = re.search(r'<table[^>]*data-layer-table="1"[^>]*>(.*?)</table>', html, re.S)
    assert table is not None and table.group(1).count("<tr") == n_layers + 1
    histogram = re.search(r'<svg[^>]*data-chart="latency-histogram"[^>]*>(.*?)</svg>', html, re.S)
    assert histogram is not None
    counts = [int(v) for v in re.findall(r'class="bar" data-value="(\d+)"', histogram.group(1))]
    assert sum(counts) == len(ctx.deploy_result.timings or []) and len(counts) >= 12
    memory = re.search(r'<svg[^>]*data-chart="memory"[^>]*>(.*?)</svg>', html, re.S)
    assert memory is not None and memory.group(1).count('class="bar"') >= 3
    assert "measured on the host" in html and "Program image" in html
    assert_no_quantity_charted_twice(html)
    screenshot(tmp_path, report, "report_host.png")


def test_sub_tick_layer_times_read_in_the_timers_unit_and_are_never_0() -> None:
    """Per-layer times of a 1 ms tick (0.18, 0.22, 0, 0.16 ms): the table used to say
    "<1,000 µs" and the chart "180 µs" ... "0 µs" — finer than the timer, and a 0."""
    page = render_html(_silicon_summary(), {})
    header = re.search(r'<th[^>]*data-key="time"[^>]*>(.*?)</th>', page)
    assert header is not None and "(ms)" in header.group(1)
    chart = re.search(r'<svg[^>]*data-chart="layer-time"[^>]*>(.*?)</svg>', page, re.S)
    assert chart is not None
    labels = re.findall(r"<text[^>]*>([^<]*(?:ms|µs|ns))</text>", chart.group(1))
    assert labels == ["&lt;1 ms"] * 4, labels
    assert "e.g. _2_Reshape_0: &lt;1 ms" in page  # the validity note: not "0 ms"


def test_histogram_pads_no_bin_below_one_step() -> None:
    """Five 0.5/0.6 ms samples on a 0.1 ms grid: the padding bins used to run down to a
    bin centred on 0 ms (axis "<100 µs"), a reading no run made."""
    from aidge_deploy.report.svg import MIN_BINS, histogram_bins

    low, high, counts = histogram_bins([0.5, 0.6, 0.6, 0.5, 0.6], 0.1)
    assert len(counts) >= MIN_BINS and sum(counts) == 5
    assert low + 0.05 == pytest.approx(0.1)  # the first bin is one step, not 0
    assert high == pytest.approx(low + 0.1 * len(counts))
    page = render_html(_silicon_summary(), {})
    hist = re.search(r'<svg[^>]*data-chart="latency-histogram"[^>]*>(.*?)</svg>', page, re.S)
    assert hist is not None and "&lt;" not in hist.group(1)
