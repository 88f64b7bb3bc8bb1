"""Power runs end to end through the CLI: the emulated board's energy model (bundle, HTML in
Chromium, one time base), a Joulescope that is not there and monitors that cannot apply
(Preflight, nothing built), the host with RAPL and hwmon stand-in trees (the host-timed
window of a program run N times, every figure recomputed from the bundle's raw data), an
invalid power run (exit 5), and a capture of the SSH test board's run (``jls:``)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.report import verify_bundle
from aidge_deploy.report.schemas import SchemaName, schema_errors
from aidge_deploy.report.summary import unlabelled_numbers
from envparts import needs
from power_support import CounterWriter, ina3221_tree, rapl_tree, write_jls
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
    """The bundle's summary, verified: manifest, schema, and every number of it (the power
    block's plan, window, trace and gate detection included) with a unit and provenance."""
    verify_bundle(bundle)
    summary = json.loads((bundle / "summary.json").read_text())
    assert schema_errors(SchemaName.SUMMARY, summary) == []
    assert unlabelled_numbers(summary) == []
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
    assert pa["provenance"] == "estimated" and pa["uncertainty_factor"]["value"] == 10
    metrics = {m["name"]: m for m in pa["metrics"]}
    energy = metrics["energy_per_inference"]
    assert energy["unit"] == "uJ" and energy["provenance"] == "estimated" and energy["value"] > 0
    assert a["metrics"]["energy_per_inference"]["provenance"] == "estimated"
    # identical across two runs: the emulated counts are deterministic
    assert pa["metrics"] == pb["metrics"] and pa["layer_energy"] == pb["layer_energy"]
    layers = pa["layer_energy"]["values"]
    assert len(layers) == 4 and all(v > 0 for v in layers.values())
    assert sum(layers.values()) <= energy["value"]  # layers fit inside one inference
    for row in a["layers"]:
        assert row["metrics"]["energy"]["provenance"] == "estimated"
    # the window holds the N planned inferences and matches N x clean latency
    n = pa["inferences"]["value"]
    assert n == pa["plan"]["inferences"]["value"] == pa["terminal"]["inferences"]["value"]
    # one time base: energy ÷ duration is the average power the coefficients' source gives
    # (238 uA/MHz at 3.3 V, ST's STM32F405/407 figure the model cites) at the board's
    # 25 MHz, whatever the instruction mix — computed here from the source's numbers
    source_power_mw = 238e-6 * 25 * 3.3 * 1e3  # A/MHz x MHz x V, in mW
    duration = metrics["power_window_duration"]["value"]
    assert metrics["power_average"]["value"] == pytest.approx(source_power_mw, rel=1e-9)
    assert metrics["energy_per_inference"]["value"] * 1e-6 * n / duration * 1e3 == (
        pytest.approx(source_power_mw, rel=1e-9)
    )
    # the deploy run's time base: the core's timing model (estimated cycles)
    assert "estimated cycles" in pa["basis"]
    # QEMU's virtual time never appears: the terminal record keeps its count, not its ticks
    assert pa["terminal"]["elapsed"]["value"] is None
    assert "virtual clock" in pa["terminal"]["elapsed"]["unavailable_reason"]
    assert "ticks" not in json.dumps(pa)
    # the window's raw data are in the bundle: the plugin trace and the window run's log
    assert sorted(pa["raw_files"]) == ["logs/power/power.trace", "logs/power/uart.log"]
    # the power variant is its own cache entry: the profile build is never modified in place
    builds = Path(os.environ["AIDGE_DEPLOY_CACHE_DIR"]) / "builds"
    power_elves = list(builds.glob("*/bin/*_power.elf"))
    assert power_elves and all(re.search(r"-power\d+$", p.parents[1].name) for p in power_elves)
    assert n % pa["plan"]["inferences_per_repeat"]["value"] == 0
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
    assert abs(duration / pa["plan"]["expected_duration"]["value"] - 1) < 0.1
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
    host = export_factory("benchmark", nb_iterations=3)
    export = tmp_path / "export"
    shutil.copytree(host.path, export, ignore=shutil.ignore_patterns("bin", "build"))
    res = CliRunner().invoke(app, ["run", str(export), "--power", "joulescope"])
    assert res.exit_code == 2, res.output
    flat = " ".join(res.output.split())  # any console width
    assert "No Joulescope found" in flat and "stage Preflight" in flat
    assert "Hint" in res.output and "jls:FILE" in res.output
    assert not (export / "bin").exists() and not (export / "build").exists()  # nothing built
    # an emulated board has no supply for an instrument to measure: refused, said why
    board = export_factory("benchmark", target="mps2-an386", nb_iterations=3)
    emulated = tmp_path / "emulated"
    shutil.copytree(board.path, emulated, ignore=shutil.ignore_patterns("bin", "build"))
    res = CliRunner().invoke(app, ["run", str(emulated), "--power", "joulescope"])
    assert res.exit_code == 2 and "no supply to measure" in " ".join(res.output.split())
    assert not (emulated / "bin").exists()


def test_bad_power_values_rejected_before_anything_runs(tiny_cnn: Path, tmp_path: Path) -> None:
    res = _profile(tiny_cnn, tmp_path, tmp_path / "w", "--power", "joulscope")
    assert res.exit_code == 2 and "Did you mean 'joulescope'" in " ".join(res.output.split())
    res = _profile(
        tiny_cnn, tmp_path, tmp_path / "w", "--power", "emulated", "--power-window", "-1"
    )
    assert res.exit_code == 2 and "power_window_s must be positive" in res.output
    assert not (tmp_path / "w").exists()  # not even exported
    res = _profile(tiny_cnn, tmp_path, tmp_path / "w2", "--target", "host", "--power", "emulated")
    assert res.exit_code == 2 and "needs an emulated board" in res.output
    res = _profile(tiny_cnn, tmp_path, tmp_path / "w", "--power", "rapl", "--power-inferences", "9")
    assert res.exit_code == 2 and "--power-inferences is for a capture" in res.output


def test_reference_without_values_and_captures_on_the_wrong_target_are_refused(
    tiny_cnn: Path, tmp_path: Path
) -> None:
    """``--power reference`` on a board whose hardware model has no reference current, and a
    JLS capture against an emulated board or the host, stop in Preflight: nothing is
    exported or built, and the reason is said."""
    capture = tmp_path / "cap.jls"
    write_jls(capture, annotation={"inferences": 100})
    cases = [
        ("mps2-an386", "reference", "no reference values for this board"),
        ("host", "reference", "no reference values for this board"),
        ("mps2-an386", f"jls:{capture}", "an emulated board"),
        ("host", f"jls:{capture}", "is the host"),
    ]
    for target, power, reason in cases:
        work = tmp_path / f"w-{target}-{power.partition(':')[0]}"
        res = _profile(tiny_cnn, tmp_path, work, "--target", target, "--power", power)
        text = " ".join(res.output.split())
        assert res.exit_code == 2, res.output
        assert reason in text and "Power monitor" in text, text
        assert not work.exists()  # refused before the export, let alone a build


def _metrics(power: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in power["metrics"]}


def _host_run(tiny_cnn: Path, tmp_path: Path, name: str, *power: str) -> Any:
    return _profile(
        tiny_cnn,
        tmp_path,
        tmp_path / "w",
        "--target",
        "host",
        *power,
        "--power-window",
        "0.5",
        "--report",
        str(tmp_path / name),
    )


def test_host_rapl_window_and_its_bundle_reproduces_every_power_figure(
    tiny_cnn: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sys"
    counter = rapl_tree(root, energy_uj=0, max_range_uj=262_143_328_850)
    with CounterWriter(counter, watts=3.0, max_range=262_143_328_850):
        res = _host_run(tiny_cnn, tmp_path, "r", "--power", "rapl", "--power-sysfs-root", str(root))
    assert res.exit_code == 0, res.output
    summary = _summary(tmp_path / "r")
    power = summary["power"]
    metrics = _metrics(power)
    assert power["provenance"] == "host" and power["gate"] == "host"
    # the stand-in counter is the clock at each read and a reading is stamped at the middle
    # of its read: the window's energy is off by at most 3 W x the slowest read
    slowest_s = float(power["monitor"]["details"]["slowest_read_ms"]) / 1e3
    duration = metrics["power_window_duration"]["value"]
    assert abs(metrics["power_average"]["value"] - 3000) <= 3000 * slowest_s / duration + 0.01
    assert abs(metrics["power_idle"]["value"] - 3000) <= 3000 * 2 * slowest_s / 0.4 + 0.01
    plan = power["plan"]
    assert plan["inferences"]["value"] == power["inferences"]["value"] > 0
    assert plan["inferences"]["provenance"] == "host"  # counted: the program runs that ran
    # the window holds program runs with their start-ups: it is planned and checked on the
    # profile run's wall time, and energy per inference is the window's power x the clean
    # latency (start-ups are not billed to the inferences)
    assert plan["expected_duration"]["value"] == pytest.approx(
        plan["repeats"]["value"] * plan["repeat_duration"]["value"]
    )
    assert plan["inference_duration"]["value"] < plan["expected_duration"]["value"]
    assert duration >= plan["target_window"]["value"] >= 0.5
    assert "start-ups included" in metrics["energy_per_inference"]["description"]
    # a healthy run carries no power issue; the stand-in's power is constant, so its idle
    # baseline equals the window's mean up to the reads' timing: the noise flag may show
    assert {i["code"] for i in power["issues"]} <= {"power.idle_above_window"}
    assert_reproduced(tmp_path / "r")


def test_host_hwmon_bundle_reproduces_every_power_figure_and_compares(
    tiny_cnn: Path, tmp_path: Path
) -> None:
    """Host + hwmon (a Jetson-style INA3221 stand-in): its input rail alone, figures
    recomputed from the bundle's raw data; its energy is not compared with a RAPL run's."""
    root = tmp_path / "sys"
    ina3221_tree(root, {"VDD_IN": (5000, 400), "VDD_SOC": (1000, 300)})
    res = _host_run(tiny_cnn, tmp_path, "h", "--power", "hwmon", "--power-sysfs-root", str(root))
    assert res.exit_code == 0, res.output
    power = _summary(tmp_path / "h")["power"]
    assert "input rail VDD_IN of ina3221" in power["scope"]
    assert _metrics(power)["power_average"]["value"] == pytest.approx(2000.0)  # not 2300
    assert_reproduced(tmp_path / "h")
    # the profile run's log is the profile run's: the window's runs logged beside it
    log = (tmp_path / "h" / "logs" / "run.log").read_text()
    assert log.count("inference_time:") == 1
    assert "logs/power/run.log" in power["raw_files"]
    # a capture is silicon only when it records a board's run: not the host's
    capture = tmp_path / "cap.jls"
    write_jls(capture)
    bare = tmp_path / "bare"
    res = _profile(tiny_cnn, tmp_path, tmp_path / "w", "--target", "host", "--report", str(bare))
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        app, ["power", "analyse", str(capture), "--inferences", "9", "--into", str(bare)]
    )
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "silicon only when it records this board's run" in text
    assert _summary(bare)["power"] is None  # untouched
    # energy from two different monitors is not compared: a warning, not a verdict
    counter = rapl_tree(tmp_path / "sys2", energy_uj=0, max_range_uj=10**12)
    with CounterWriter(counter, watts=3.0, max_range=10**12):
        res = _host_run(
            tiny_cnn, tmp_path, "r", "--power", "rapl", "--power-sysfs-root", str(tmp_path / "sys2")
        )
    assert res.exit_code == 0, res.output
    rules = tmp_path / "thresholds.json"
    rules.write_text(
        json.dumps(
            {"schema_version": 1, "metrics": {"energy_per_inference": {"direction": "smaller"}}}
        )
    )
    cmp = CliRunner().invoke(
        app,
        ["compare", str(tmp_path / "r"), str(tmp_path / "h"), "--thresholds", str(rules)],
        env={"COLUMNS": "400"},  # the table's message cell must not wrap between its words
    )
    assert cmp.exit_code == 1, cmp.output
    assert "power monitors differ" in " ".join(cmp.output.split())


def assert_reproduced(bundle: Path) -> None:
    """Every power figure of ``summary.json`` recomputed from the bundle's raw data alone:
    the sensor's readings and window edges (``power-samples.csv``), the host timings of the
    window's program runs (``power-window.json``) and the profile run's log (clean
    latency) — with the arithmetic written out here, not the tool's."""
    power = json.loads((bundle / "summary.json").read_text())["power"]
    raw = bundle / "logs" / "power"
    lines = (raw / "power-samples.csv").read_text().splitlines()
    edges = dict(
        field.split("=") for field in next(x for x in lines if "window_start_s=" in x)[2:].split()
    )
    start, end, kind = float(edges["window_start_s"]), float(edges["window_end_s"]), edges["kind"]
    rows = np.array(
        [[float(v) for v in x.split(",")] for x in lines if not x[0].isalpha() and x[0] != "#"]
    )
    t, v = rows[:, 0], rows[:, 1]
    if kind == "energy_j":  # a counter: read at the window's edges, interpolated
        energy = float(np.interp(end, t, v) - np.interp(start, t, v))
        outside = (t[1:] <= start) | (t[:-1] >= end)
        idle = float(np.sum(np.diff(v)[outside]) / np.sum(np.diff(t)[outside]))
    else:  # power readings: trapezoids, the series interpolated at the edges
        grid = np.concatenate(([start], t[(t > start) & (t < end)], [end]))
        p = np.interp(grid, t, v)
        energy = float(np.sum((p[1:] + p[:-1]) * np.diff(grid)) / 2)
        idle = float(np.mean(v[(t < start) | (t > end)]))
    window = json.loads((raw / "power-window.json").read_text())
    assert (window["window_started_s"], window["window_ended_s"]) == (start, end)
    log = (bundle / "logs" / "run.log").read_text()
    timings = [float(x) for x in re.search(r"inference_time: ([^\n]*) ms", log)[1].split()]
    latency_s = float(np.median(timings)) / 1e3
    repeat_s = min(window["profile_run_s"], window["warm_run_s"])
    mean_w = energy / (end - start)
    expected = {
        "power_average": mean_w * 1e3,
        "energy_per_inference": mean_w * latency_s * 1e6,
        "power_idle": idle * 1e3,
        "energy_active_per_inference": (mean_w - idle) * latency_s * 1e6,
        "power_window_duration": end - start,
        "power_window_expected": window["window_runs"] * repeat_s,
        "power_samples": int(np.count_nonzero((t >= start) & (t <= end))),
        "power_sample_rate": (len(t) - 1) / (t[-1] - t[0]),
    }
    got = _metrics(power)
    assert set(got) == set(expected)
    for name, value in expected.items():
        if (
            name == "energy_active_per_inference"
            and value <= 1e-9 * expected["energy_per_inference"]
        ):  # below the idle baseline (noise) or at it (a constant stand-in)
            assert got[name]["value"] in (None, 0.0), got[name]
            continue
        assert got[name]["value"] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    assert power["inferences"]["value"] == window["window_runs"] * window["inferences_per_run"]


def test_an_invalid_power_run_exits_5_and_keeps_its_results(tiny_cnn: Path, tmp_path: Path) -> None:
    """The sensor fails in the middle of the window: the figures are unavailable, the
    validity names why, the bundle is written, and the run exits 5 — not 0."""
    root = tmp_path / "sys"
    counter = rapl_tree(root, energy_uj=0, max_range_uj=10**12)
    with CounterWriter(counter, watts=3.0, max_range=10**12, fail_after_reads=20):
        res = _host_run(
            tiny_cnn, tmp_path, "bad", "--power", "rapl", "--power-sysfs-root", str(root)
        )
    assert res.exit_code == 5, res.output
    text = " ".join(res.output.split())
    assert "power.capture_failed" in text and "The power figures are invalid" in text
    summary = _summary(tmp_path / "bad")
    assert summary["validity"]["status"] == "invalid"
    assert _metrics(summary["power"])["energy_per_inference"]["value"] is None


@pytest.mark.ssh
@pytest.mark.browser
def test_a_capture_of_a_board_run_is_analysed_for_the_n_it_holds(
    ssh_board: Any, export_factory: Any, tmp_path: Path
) -> None:
    """``--power jls:FILE --power-inferences N`` on a board (the SSH test board): nothing is
    run for power, the window is the capture's, its energy ÷ N the analytic figure; an N
    the capture cannot hold (its window shorter than N x the board's clean latency) is a
    validity failure and exit 5; no N at all is refused before building."""
    artifact = export_factory("benchmark", target="raspberrypi", nb_iterations=5)
    capture = tmp_path / "board_window.jls"
    energy = write_jls(capture, gate=(0.5, 1.5))  # a 1 s window
    args = [
        "run",
        str(artifact.path),
        "--target",
        "raspberrypi",
        "--backend",
        "ssh",
        "--ssh-host",
        ssh_board.host,
        "--ssh-port",
        str(ssh_board.port),
        "--ssh-user",
        ssh_board.user,
        "--ssh-key-path",
        str(ssh_board.key_path),
        "--ssh-known-hosts-path",
        str(ssh_board.known_hosts_path),
        "--power",
        f"jls:{capture}",
    ]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "cannot tell how many inferences this capture holds" in " ".join(res.output.split())
    res = CliRunner().invoke(app, [*args, "--power-inferences", "50", "--json"])
    assert res.exit_code == 0, res.output
    power = json.loads(res.stdout)["power"]
    per_inference = _metrics(power)["energy_per_inference"]
    assert per_inference["provenance"] == "silicon"
    assert per_inference["value"] == pytest.approx(energy / 50 * 1e6, rel=1e-3)
    assert power["plan"]["inferences_from"] == "given: --power-inferences"
    assert power["window_wall"] is None  # nothing was run for it
    res = CliRunner().invoke(app, [*args, "--power-inferences", "100000000", "--json"])
    assert res.exit_code == 5, res.output
    codes = [i["code"] for i in json.loads(res.stdout)["power"]["issues"]]
    assert codes == ["power.window_mismatch"]
    # the same capture added to the bundle of a board run made without power
    bundle = tmp_path / "board-run"
    res = CliRunner().invoke(app, [*args[:-2], "--report", str(bundle)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        app, ["power", "analyse", str(capture), "--inferences", "50", "--into", str(bundle)]
    )
    assert res.exit_code == 0, res.output
    summary = _summary(bundle)  # the manifest verifies: every checksum rewritten
    power = summary["power"]
    assert power["provenance"] == "silicon" and power["source"] == f"jls:{capture}"
    assert summary["metrics"]["energy_per_inference"]["value"] == pytest.approx(
        energy / 50 * 1e6, rel=1e-3
    )
    # the window was chosen by the board run's own clean latency
    assert power["plan"]["clean_latency"]["value"] == pytest.approx(
        summary["latency"]["median"] / 1e3
    )
    assert power["raw_files"] == ["logs/power/board_window.jls"]
    assert (bundle / "logs" / "power" / "board_window.jls").read_bytes() == capture.read_bytes()
    html = (bundle / "report.html").read_text()
    assert "Power" in html and "Gate detection (gpi[0])" in html and "data-edges='2'" in html
    # rendered by Chromium, as a user opens it: the gate detection with the figures
    page = (bundle / "report.html").as_uri()
    dom = _chromium(tmp_path, "--dump-dom", page)
    assert dom.returncode == 0 and 'class="gate-detection"' in dom.stdout, dom.stderr[-2000:]
    # the window holds far more than 50 inferences of this board: said next to the figure
    assert "the energy per inference includes everything it held" in dom.stdout
    ARTIFACTS.mkdir(exist_ok=True)
    shot = _chromium(
        tmp_path,
        f"--screenshot={ARTIFACTS / 'power_capture_report.png'}",
        "--window-size=1280,4000",
        page,
    )
    assert shot.returncode == 0
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["comparability"]["power_source"] == f"jls:{capture}"
    # twice is refused: the bundle holds power figures now
    res = CliRunner().invoke(
        app, ["power", "analyse", str(capture), "--inferences", "50", "--into", str(bundle)]
    )
    assert res.exit_code == 2 and "already holds power figures" in " ".join(res.output.split())
