"""Power runs end to end through the CLI: the emulated board's energy model (bundle, HTML in
Chromium), a Joulescope that is not there (Preflight, nothing built), and the host with a
RAPL stand-in tree (the host-timed window of a program run N times)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.report import verify_bundle
from aidge_deploy.report.schemas import SchemaName, schema_errors
from envparts import needs
from power_support import CounterWriter, rapl_tree
from test_report_html import _chromium

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


def _profile(model: Path, out: Path, work: Path, *args: str) -> Any:
    return CliRunner().invoke(
        app,
        ["profile", str(model), "--iterations", "3", "--work-dir", str(work), *args],
        env={"COLUMNS": "200"},
    )


def _summary(bundle: Path) -> dict[str, Any]:
    verify_bundle(bundle)
    summary = json.loads((bundle / "summary.json").read_text())
    assert schema_errors(SchemaName.SUMMARY, summary) == []
    return summary


@pytest.mark.qemu
@pytest.mark.browser
@needs(shutil.which("qemu-system-arm") is not None, "needs qemu-system-arm")
def test_emulated_energy_per_inference_and_layer(tiny_cnn: Path, tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        res = _profile(
            tiny_cnn,
            tmp_path,
            tmp_path / "w",
            "--target",
            "mps2-an386",
            "--power",
            "emulated",
            "--report",
            str(tmp_path / name),
        )
        assert res.exit_code == 0, res.output
        runs.append((res.output, _summary(tmp_path / name)))
    (out_a, a), (_, b) = runs
    # labelled estimated in the CLI
    assert re.search(r"Power — emulated \(ESTIMATED, model uncertainty ×/÷10\)", out_a)
    assert "energy per inference" in out_a and "Energy per layer (estimated)" in out_a
    # each layer's energy is a column of the per-layer table, not a second table
    assert "µJ per call" not in out_a and "the layers add up to" in " ".join(out_a.split())
    pa, pb = a["power"], b["power"]
    assert pa["provenance"] == "estimated" and pa["uncertainty_factor"] == 10
    metrics = {m["name"]: m for m in pa["metrics"]}
    energy = metrics["energy_per_inference"]
    assert energy["unit"] == "uJ" and energy["provenance"] == "estimated" and energy["value"] > 0
    assert a["metrics"]["energy_per_inference"]["provenance"] == "estimated"
    # identical across two runs: the emulated counts are deterministic
    assert pa["metrics"] == pb["metrics"] and pa["layer_energy_uj"] == pb["layer_energy_uj"]
    layers = pa["layer_energy_uj"]
    assert len(layers) == 4 and all(v > 0 for v in layers.values())
    assert sum(layers.values()) <= energy["value"]  # layers fit inside one inference
    for row in a["layers"]:
        assert row["metrics"]["energy"]["provenance"] == "estimated"
    # the window holds the N planned inferences and matches N x clean latency
    assert pa["inferences"] == pa["plan"]["inferences"] == pa["terminal"]["inferences"]
    # the power variant is its own cache entry: the profile build is never modified in place
    builds = Path(os.environ["AIDGE_DEPLOY_CACHE_DIR"]) / "builds"
    power_elves = list(builds.glob("*/bin/*_power.elf"))
    assert power_elves and all(re.search(r"-power\d+$", p.parents[1].name) for p in power_elves)
    assert pa["plan"]["inferences"] % pa["plan"]["inferences_per_repeat"] == 0
    assert not [i for i in pa["issues"] if i["code"].startswith("power.")], pa["issues"]
    # compare: energy thresholds apply to the headline and the per-layer energy
    rules = tmp_path / "thresholds.json"
    rules.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "metrics": {
                    "energy_per_inference": {"direction": "smaller", "max_regression_pct": 1},
                    "layers/*/energy": {"direction": "equal", "unit": "uJ"},
                },
            }
        )
    )
    cmp = CliRunner().invoke(
        app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--thresholds", str(rules)]
    )
    assert cmp.exit_code == 0, cmp.output
    assert "energy_per_inference" in cmp.output
    assert (
        abs(metrics["power_window_duration"]["value"] / pa["plan"]["expected_duration_s"] - 1) < 0.1
    )
    # the HTML says estimated, with the trace and its gate window (rendered by Chromium)
    page = (tmp_path / "a" / "report.html").as_uri()
    dom = _chromium(tmp_path, "--dump-dom", page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-chart="power-trace"' in dom.stdout and 'class="gate-window"' in dom.stdout
    # the provenance legend names "estimated" once; the power figures carry its badge
    assert 'data-legend="estimated"' in dom.stdout and "badge prov-estimated" in dom.stdout
    assert "Energy per layer (estimated by a model)" in dom.stdout
    assert "power-layers" not in dom.stdout, "the layers' energy is in the per-layer table"
    assert (
        "measured" not in re.sub(r".*<h2>Power", "", dom.stdout, flags=re.S).split("</section>")[0]
    )
    ARTIFACTS.mkdir(exist_ok=True)
    shot = _chromium(
        tmp_path,
        f"--screenshot={ARTIFACTS / 'power_emulated_report.png'}",
        "--window-size=1280,4000",
        page,
    )
    assert shot.returncode == 0


@pytest.mark.qemu
def test_joulescope_absent_fails_in_preflight_before_building(
    export_factory: Any, tmp_path: Path
) -> None:
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=3)
    export = tmp_path / "export"
    shutil.copytree(artifact.path, export, ignore=shutil.ignore_patterns("bin", "build"))
    res = CliRunner().invoke(app, ["run", str(export), "--power", "joulescope"])
    assert res.exit_code == 2, res.output
    assert "No Joulescope found" in res.output and "stage Preflight" in res.output
    assert "Hint" in res.output and "jls:FILE" in res.output
    assert not (export / "bin").exists() and not (export / "build").exists()  # nothing built


def test_bad_power_values_rejected_before_anything_runs(tiny_cnn: Path, tmp_path: Path) -> None:
    res = _profile(tiny_cnn, tmp_path, tmp_path / "w", "--power", "joulscope")
    assert res.exit_code == 2 and "Did you mean 'joulescope'" in res.output
    res = _profile(
        tiny_cnn, tmp_path, tmp_path / "w", "--power", "emulated", "--power-window", "-1"
    )
    assert res.exit_code == 2 and "power_window_s must be positive" in res.output
    assert not (tmp_path / "w").exists()  # not even exported
    res = _profile(tiny_cnn, tmp_path, tmp_path / "w2", "--target", "host", "--power", "emulated")
    assert res.exit_code == 2 and "needs an emulated board" in res.output


def test_host_rapl_window(tiny_cnn: Path, tmp_path: Path) -> None:
    root = tmp_path / "sys"
    counter = rapl_tree(root, energy_uj=0, max_range_uj=262_143_328_850)
    with CounterWriter(counter, watts=3.0, max_range=262_143_328_850):
        res = _profile(
            tiny_cnn,
            tmp_path,
            tmp_path / "w",
            "--target",
            "host",
            "--power",
            "rapl",
            "--power-sysfs-root",
            str(root),
            "--power-window",
            "0.5",
            "--report",
            str(tmp_path / "r"),
        )
    assert res.exit_code == 0, res.output
    power = _summary(tmp_path / "r")["power"]
    metrics = {m["name"]: m for m in power["metrics"]}
    assert power["provenance"] == "host" and power["gate"] == "host"
    # the stand-in counter is the clock at each read and a reading is stamped at the middle
    # of its read: the window's energy is off by at most 3 W x the slowest read
    slowest_s = float(power["monitor"]["details"]["slowest_read_ms"]) / 1e3
    duration = metrics["power_window_duration"]["value"]
    assert abs(metrics["power_average"]["value"] - 3000) <= 3000 * slowest_s / duration + 0.01
    assert abs(metrics["power_idle"]["value"] - 3000) <= 3000 * 2 * slowest_s / 0.4 + 0.01
    plan = power["plan"]
    assert power["plan"]["inferences"] == power["inferences"] > 0
    # the window holds program runs with their start-ups: it is planned and checked on the
    # profile run's wall time, and energy per inference is the window's power x the clean
    # latency (start-ups are not billed to the inferences)
    assert plan["expected_duration_s"] == pytest.approx(plan["repeats"] * plan["repeat_duration_s"])
    assert plan["inference_duration_s"] < plan["expected_duration_s"]
    assert metrics["power_window_duration"]["value"] >= plan["target_window_s"] >= 0.5
    assert metrics["energy_per_inference"]["value"] == pytest.approx(
        metrics["power_average"]["value"] * 1e-3 * plan["clean_latency_s"] * 1e6, rel=1e-9
    )
    assert "start-ups included" in metrics["energy_per_inference"]["description"]
    # a healthy run carries no power warning
    assert [i for i in power["issues"] if i["code"].startswith("power.")] == []
    # the host's hardware model has no reference current: unavailable, never 0
    res = _profile(
        tiny_cnn,
        tmp_path,
        tmp_path / "w",
        "--target",
        "host",
        "--power",
        "reference",
        "--report",
        str(tmp_path / "ref"),
    )
    assert res.exit_code == 0, res.output
    assert "unavailable" in res.output  # the table cell wraps at the terminal width
    ref = _summary(tmp_path / "ref")["power"]
    assert ref["unavailable_reason"] == "no reference values for this board"
    assert all(m["value"] is None for m in ref["metrics"] if m["name"] != "power_window_expected")
    assert not ref["issues"]
    # energy from two different monitors is not compared: a warning, not a verdict
    rules = tmp_path / "thresholds.json"
    rules.write_text(
        json.dumps(
            {"schema_version": 1, "metrics": {"energy_per_inference": {"direction": "smaller"}}}
        )
    )
    cmp = CliRunner().invoke(
        app, ["compare", str(tmp_path / "r"), str(tmp_path / "ref"), "--thresholds", str(rules)]
    )
    assert cmp.exit_code == 1, cmp.output
    assert "power monitors differ" in cmp.output
