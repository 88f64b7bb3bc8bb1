"""A profile of a random-weight DS-CNN (the KWS reference shape) on mps2-an386 shows, in its
HTML report opened in the system Chromium, the published MLPerf Tiny Cortex-M4 rows beside
its estimate with the ratio (screenshot kept in ``test-artifacts/``); a campaign report of a
cell made from that same bundle shows them too."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.mlperf.build import build_model
from aidge_deploy.mlperf.models import TinyModel
from aidge_deploy.mlperf.published import beside_published
from browser import screenshot
from envparts import needs

runner = CliRunner()

needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm and the Arm cross toolchain are needed",
)


@pytest.fixture(scope="module")
def kws_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kws-report")
    model = build_model(TinyModel.KWS, root / "kws.onnx")
    bundle = root / "bundle"
    res = runner.invoke(
        app,
        [
            *("profile", str(model), "--target", "mps2-an386", "--iterations", "2"),
            *("--warmup", "1", "--report", str(bundle), "--timeout", "900"),
        ],
    )
    assert res.exit_code == 0, res.output
    return bundle


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.browser
@needs_qemu
def test_the_kws_report_shows_the_published_rows_and_the_ratio(
    kws_bundle: Path, chromium: Any
) -> None:
    from aidge_deploy.report.reader import read_bundle

    summary = read_bundle(kws_bundle).summary
    cycles = summary.metrics["estimated_cycles"].value
    assert cycles and cycles > 0
    want = beside_published(TinyModel.KWS, "cortex-m4", float(cycles), "float32")
    assert want, "no published Cortex-M4 KWS row"
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.goto((kws_bundle / "report.html").as_uri())
    section = page.locator('section[data-published="kws"]')
    assert section.count() == 1
    assert section.get_attribute("data-core") == "cortex-m4"
    assert "Beside published silicon" in section.inner_text()
    rows = section.locator("tr[data-engine]")
    assert rows.count() == len(want)
    for k, b in enumerate(want):
        row = rows.nth(k)
        assert row.get_attribute("data-engine") == b.row.engine
        assert float(row.get_attribute("data-ratio") or 0) == pytest.approx(b.ratio, rel=1e-3)
        assert f"{b.ratio:.2f}×" in row.inner_text()
        assert b.row.source in row.inner_text()
    box = section.bounding_box()
    assert box is not None and box["height"] > 100
    section.scroll_into_view_if_needed()
    screenshot(page, "mlperf-kws-report")
    page.close()


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.browser
@needs_qemu
def test_a_campaign_report_of_the_kws_cell_shows_the_published_rows(
    kws_bundle: Path, chromium: Any, tmp_path: Path
) -> None:
    from aidge_deploy.campaign.figures import bundle_figures
    from aidge_deploy.campaign.html import render_campaign_html
    from aidge_deploy.report.reader import read_bundle

    summary = read_bundle(kws_bundle).summary
    record = {
        "id": "c0",
        "status": "done",
        "model": {"name": "kws.onnx"},
        "target": {"label": "mps2-an386", "target": "mps2-an386"},
        "options": {"dtype": "float32"},
        "option_label": "float32",
        "figures": bundle_figures(summary),
    }
    page_path = tmp_path / "report.html"
    page_path.write_text(
        render_campaign_html({"name": "mlperf"}, [record], generated="now"), encoding="utf-8"
    )
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.goto(page_path.as_uri())
    section = page.locator('section[data-campaign-published] section[data-published="kws"]')
    assert section.count() == 1
    assert "kws.onnx on mps2-an386" in section.inner_text()
    assert section.locator("tr[data-engine]").count() >= 1
    screenshot(page, "mlperf-kws-campaign")
    page.close()
