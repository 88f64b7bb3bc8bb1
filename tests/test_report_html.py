"""The HTML report: self-contained, charts drawn, provenance labelled; rendered in Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from aidge_deploy.config import DeployConfig
from aidge_deploy.profiling.validity import assess
from aidge_deploy.report.html import render_html
from aidge_deploy.report.summary import build_summary
from aidge_deploy.results import DeployResult, LayerFigure, Provenance, TimingSeries
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


def _emulated_summary() -> dict[str, Any]:
    """A summary of the real QEMU mps2-an386 capture in aidge_contract.md (uart-benchmark)."""
    result = DeployResult(
        output=None,
        metrics={
            "provenance": Provenance.EMULATED.value,
            "cycles": [14037, 14036, 14044, 14038, 14044],
            "cycles_name": "instructions",
            "cycles_unit": "instructions",
            "binary": {
                "flash_bytes": 3_900_000,
                "flash_capacity": 4 * 1024 * 1024,
                "ram_bytes": 40_000,
                "ram_capacity": 4 * 1024 * 1024,
            },
        },
        memory_peak_bytes=None,
        timings=TimingSeries([0.6, 0.5, 0.6, 0.5, 0.6]),
        protocol="aidge-uart-benchmark/v1",
        target="mps2_an386",
        backend="local",
        layers=(
            LayerFigure("_0_ConvAct_0", 0.18, {"instructions": 4310}),
            LayerFigure("_1_Transpose_0", 0.22, {"instructions": 5291}),
            LayerFigure("_2_Reshape_0", 0.0, {"instructions": 281}),
            LayerFigure("_3_FC_0", 0.16, {"instructions": 3867}),
        ),
    )
    return build_summary(
        result,
        run_id=_ID,
        timestamp="2025-01-01T00:00:00Z",
        identity={
            "model_hash": _HASH,
            "io_signature": _HASH,
            "export_hash": _HASH,
            "target": "mps2_an386",
        },
        validity=assess(result),
    )


def test_page_is_self_contained_and_escapes_names() -> None:
    summary = _emulated_summary()
    summary["layers"][0]["name"] = "<script>alert(1)</script>"
    page = render_html(summary, {"target": {"name": "mps2_an386", "hardware": {}}})
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page
    # nothing is fetched: no external URL in any src/href, no <link> or <script src>
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "<script" not in page


def test_emulated_figures_are_labelled_as_instruction_counts() -> None:
    page = render_html(_emulated_summary(), {})
    assert 'data-provenance="emulated"' in page
    assert page.count("emulated instruction counts, not cycles") >= 2  # banner and badges
    assert "measured on target silicon" not in page
    assert 'data-chart="layer-instructions"' in page
    assert "timer.resolution_coarse" in page  # the 1 ms tick versus 0.18 ms layers
    assert 'data-validity="degraded"' in page


@pytest.mark.browser
@pytest.mark.slow
def test_real_bundle_report_renders_with_charts(export_factory: Any, tmp_path: Path) -> None:
    ctx = deploy_with_report(
        export_factory("benchmark"), DeployConfig(report_dir=tmp_path / "bundle"), tmp_path / "w"
    )
    report = tmp_path / "bundle" / "report.html"
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    n_layers = len(ctx.deploy_result.layers)
    layer_chart = re.search(r'<svg[^>]*data-chart="layer-time"[^>]*>(.*?)</svg>', html, re.S)
    assert layer_chart is not None
    assert layer_chart.group(1).count('class="bar"') == n_layers == 4
    histogram = re.search(r'<svg[^>]*data-chart="latency-histogram"[^>]*>(.*?)</svg>', html, re.S)
    assert histogram is not None
    counts = [int(v) for v in re.findall(r'class="bar" data-value="(\d+)"', histogram.group(1))]
    assert sum(counts) == len(ctx.deploy_result.timings or [])
    memory = re.search(r'<svg[^>]*data-chart="memory"[^>]*>(.*?)</svg>', html, re.S)
    assert memory is not None and memory.group(1).count('class="bar"') >= 3
    assert "measured on the host" in html

    ARTIFACTS.mkdir(exist_ok=True)
    for name, page in (("report_host.png", report), ("report_emulated.png", None)):
        if page is None:
            page = tmp_path / "emulated.html"
            page.write_text(render_html(_emulated_summary(), {}))
        shot = ARTIFACTS / name
        shot.unlink(missing_ok=True)
        done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
        assert done.returncode == 0 and shot.stat().st_size > 20_000, done.stderr[-2000:]
