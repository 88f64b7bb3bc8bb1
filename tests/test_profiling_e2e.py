"""Issue 5 end to end: `aidge-deploy profile --counters ... --report DIR` on the host and on an
emulated board; bundles verify, validate against the shipped schemas and render in Chromium."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.report import verify_bundle
from aidge_deploy.report.schemas import SchemaName, schema_errors
from envparts import needs
from test_report_html import _chromium, assert_no_quantity_charted_twice, screenshot

pytestmark = pytest.mark.slow

DOCS = {
    "summary.json": SchemaName.SUMMARY,
    "run_metadata.json": SchemaName.RUN_METADATA,
    "manifest.json": SchemaName.MANIFEST,
}


def _profile(model: Path, tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "bundle"
    res = CliRunner().invoke(
        app,
        [
            "profile",
            str(model),
            "--iterations",
            "3",
            "--work-dir",
            str(tmp_path / "w"),
            "--report",
            str(out),
            *args,
        ],
    )
    assert res.exit_code == 0, res.output
    return out


def _check_bundle(bundle: Path, tmp_path: Path) -> list[dict[str, str]]:
    verify_bundle(bundle)
    for name, schema in DOCS.items():
        assert schema_errors(schema, json.loads((bundle / name).read_text())) == [], name
    dom = _chromium(tmp_path, "--dump-dom", (bundle / "report.html").as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-layer-table="1"' in dom.stdout and dom.stdout.count('class="bar"') >= 4
    assert_no_quantity_charted_twice(dom.stdout)
    with (bundle / "profile_results.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_host_profile_with_software_counters(tiny_cnn: Path, tmp_path: Path) -> None:
    bundle = _profile(
        tiny_cnn, tmp_path, "--target", "host", "--counters", "task-clock,page-faults"
    )
    _check_bundle(bundle, tmp_path)
    summary = json.loads((bundle / "summary.json").read_text())
    metrics = (
        {m["name"]: m for m in summary["metrics"]}
        if isinstance(summary["metrics"], list)
        else summary["metrics"]
    )
    for name in ("task-clock", "page-faults"):
        assert name in metrics, sorted(metrics)
        assert metrics[name]["value"] and metrics[name]["value"] > 0
        assert metrics[name]["provenance"] == "host" and metrics[name]["unit"]
    assert metrics["task-clock"]["unit"] == "ns" and metrics["task-clock"]["resolution"] == 1.0
    screenshot(tmp_path, bundle / "report.html", "report_host_counters.png")


@pytest.mark.qemu
@needs(shutil.which("qemu-system-arm") is not None, "qemu-system-arm is not installed")
def test_emulated_profile_multi_pass_merged_and_deterministic(
    export_factory, tiny_cnn: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import aidge_deploy

    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=3)
    cfg = {"counters": ("emulated",), "max_counters_per_pass": 2}
    first = aidge_deploy.deploy(
        artifact, aidge_deploy.DeployConfig(report_dir=tmp_path / "a", **cfg)
    )  # type: ignore[arg-type]
    assert len(first.metrics["counter_passes"]) >= 2, first.metrics["counter_passes"]
    rows = _check_bundle(tmp_path / "a", tmp_path)
    counters = ["emu-instructions", "emu-loads", "emu-stores", "emu-branches-taken"]
    assert len(rows) == 4
    for row in rows:  # every counter for every layer, merged from several passes
        for counter in counters:
            (column,) = [c for c in row if c.startswith(counter + "_")]
            assert float(row[column]) > 0, (row["layer"], counter)
        assert row["provenance"] == "emulated"
    second = aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig(**cfg))  # type: ignore[arg-type]
    assert [dict(layer.counters) for layer in first.layers] == [
        dict(layer.counters) for layer in second.layers
    ]
    # the plugin's instruction count agrees with the firmware's SysTick-derived count
    for layer in first.layers:
        plugin, systick = (
            layer.counters["emu-instructions"],
            layer.counters["emulated_instructions"],
        )
        assert abs(plugin - systick) <= max(25.0, 0.01 * systick), (layer.name, plugin, systick)


@pytest.mark.qemu
@needs(shutil.which("qemu-system-arm") is not None, "qemu-system-arm is not installed")
def test_emulated_profile_cli_bundle(tiny_cnn: Path, tmp_path: Path) -> None:
    """The report of ``profile --counters emulated`` in Chromium (screenshot kept)."""
    bundle = _profile(tiny_cnn, tmp_path, "--target", "mps2-an386", "--counters", "emulated")
    rows = _check_bundle(bundle, tmp_path)
    assert rows and all(row["provenance"] == "emulated" for row in rows)
    page = (bundle / "report.html").read_text()
    # the firmware's instruction count and the plugin's are one quantity: charted once
    assert 'data-key="emulated_instructions"' in page and 'data-key="emu-instructions"' in page
    assert page.count('data-quantity="instructions"') == 1
    assert "estimated (M4 timing model) at 25 MHz" in page
    screenshot(tmp_path, bundle / "report.html", "report_emulated_counters.png")
