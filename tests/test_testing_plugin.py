"""The pytest plugin (``aidge_deploy.testing``) run the way users run it, with ``pytester``.

User test modules are written into a temporary project and run by pytest with the plugin
loaded from its entry point; deploys are real (Aidge exports, host builds, QEMU boards).
"""

from __future__ import annotations

import itertools
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import modelzoo
from envparts import needs
from farmkit import ALICE, make_farm, needs_farm

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm and the Arm cross toolchain are needed",
)

PLAIN = """
import pytest

@pytest.fixture
def number():
    return 41

def test_pass(number):
    assert number + 1 == 42

def test_fail():
    assert 1 == 2

@pytest.mark.skip(reason="not today")
def test_skip():
    pass

@pytest.mark.parametrize("x", [1, 2])
def test_param(x, record_property):
    record_property("x", x)
    assert x
"""

SAW_AIDGE = """
import sys
def pytest_sessionfinish(session):
    with open("imported.txt", "w") as f:
        f.write(str(sorted(m for m in sys.modules if m.startswith(("aidge_core", "aidge_deploy.api")))))
"""


def _junit_cases(path: Path) -> list[tuple[str, str, list[tuple[str, str]]]]:
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = ",".join(sorted(child.tag for child in case if child.tag != "properties"))
        props = [(p.get("name", ""), p.get("value", "")) for p in case.iter("property")]
        cases.append((case.get("name", ""), outcome, props))
    return cases


def test_tests_without_the_plugins_options_are_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN)
    pytester.makeconftest(SAW_AIDGE)
    with_plugin = pytester.runpytest_subprocess("--junitxml=with.xml", "-p", "aidge_deploy")
    imported = pytester.path.joinpath("imported.txt").read_text()
    without = pytester.runpytest_subprocess("--junitxml=without.xml", "-p", "no:aidge_deploy")
    assert with_plugin.parseoutcomes() == without.parseoutcomes()
    with_plugin.assert_outcomes(passed=3, failed=1, skipped=1)
    assert _junit_cases(pytester.path / "with.xml") == _junit_cases(pytester.path / "without.xml")
    assert "aidge" not in (pytester.path / "with.xml").read_text().replace("aidge_deploy", "")
    # loading the plugin imported neither Aidge nor the deploy machinery
    assert imported == "[]"
    assert not (pytester.path / "metrics.om").exists()


USER_TESTS = """
import os
import pytest
from aidge_deploy.testing import assert_budget, assert_no_regression, assert_outputs_close

MODEL = {model!r}


@pytest.mark.aidge_targets("host", "mps2-an386", "mps3-an547")
def test_runs_within_budget(aidge_run, aidge_target):
    result = aidge_run(MODEL, iterations=3)
    assert result.target == aidge_target
    assert_budget(result, "latency", max=1000.0)
    # a host program has no flash: its loadable size is the image
    size = "image_bytes" if aidge_target == "host" else "flash_bytes"
    assert_budget(result, size, max=4 * 1024 * 1024, min=1)


@pytest.mark.aidge_targets("host")
def test_outputs_match_onnxruntime(aidge_run, aidge_target):
    import numpy as np
    import onnxruntime as ort

    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 4, 4)).astype(np.float32)
    result = aidge_run(MODEL, kind="output", inputs=[x])
    sess = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    reference = sess.run(None, {{"x": x}})[0]
    assert_outputs_close(result, [reference], atol=1e-5, rtol=1e-4)


@pytest.mark.aidge_targets("host")
def test_latency_budget_violation(aidge_run):
    result = aidge_run(MODEL, iterations=3)
    assert_budget(result, "latency", max=1e-9)


@pytest.mark.aidge_targets("host")
def test_no_regression(aidge_run, aidge_baseline):
    result = aidge_run(MODEL, iterations=3, profiling=os.environ.get("PROFILING") == "1")
    if aidge_baseline is None:
        pytest.skip("no baseline")
    assert_no_regression(
        result,
        aidge_baseline,
        {{"schema_version": 1, "metrics": {{"image_bytes": {{"direction": "smaller"}}}}}},
    )
"""


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_user_tests_on_host_and_emulated_boards(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
    pytester.makepyfile(test_model=USER_TESTS.format(model=str(model)))
    base = tmp_path / "base"
    monkeypatch.setenv("PROFILING", "0")
    # in subprocesses: Aidge's exporter registries do not survive pytester's in-process
    # reset of sys.modules between two runs
    first = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--aidge-report-dir={base}", "--junitxml=first.xml", "-rA"
    )
    first.assert_outcomes(passed=4, failed=1, skipped=1)
    out = first.stdout.str()
    # the budget violation names metric, value, budget and bundle
    violation = next(
        line for line in out.splitlines() if line.startswith("E ") and "exceeds its budget" in line
    )
    assert "latency =" in violation and "max 1e-09 ms" in violation
    bundle = base / "test_model" / "test_latency_budget_violation-host" / "host"
    assert f"[target host; bundle {bundle}" in violation, violation
    assert (bundle / "manifest.json").is_file()
    # the run's bundle and log are attached to the test report
    assert "aidge-deploy host" in out and "--- last" in out
    # JUnit XML: the metrics of every run as properties
    cases = {name: props for name, _, props in _junit_cases(pytester.path / "first.xml")}
    props = dict(cases["test_runs_within_budget[mps2-an386]"])
    assert float(props["aidge.mps2-an386.latency[ms]"]) > 0
    assert float(props["aidge.mps2-an386.emulated_instructions[instructions]"]) > 0
    assert props["aidge.mps2-an386.provenance"] == "emulated"
    assert Path(props["aidge.mps2-an386.bundle"]).is_dir()
    assert props["aidge.mps2-an386.target"] == "mps2-an386"
    host = dict(cases["test_runs_within_budget[host]"])
    assert host["aidge.host.provenance"] == "host" and float(host["aidge.host.image_bytes[B]"]) > 0
    # the OpenMetrics file parses, with seconds and bytes as base units
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    text = (base / "metrics.om").read_text()
    assert text.rstrip().endswith("# EOF")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    latency = families["aidge_latency_seconds"]
    assert latency.unit == "seconds"
    samples = {(s.labels["test"], s.labels["target"]): s for s in latency.samples}
    sample = samples[("test_model.py::test_runs_within_budget[mps3-an547]", "mps3-an547")]
    assert sample.labels["provenance"] == "emulated" and 0 < sample.value < 1.0
    assert families["aidge_flash_bytes"].unit == "bytes"

    # a regression against the baseline fails with the compare verdict
    monkeypatch.setenv("PROFILING", "1")
    second = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--aidge-baseline={base}",
        f"--aidge-report-dir={tmp_path / 'cand'}",
        "-k",
        "no_regression",
    )
    second.assert_outcomes(failed=1)
    text = second.stdout.str()
    assert "regression against baseline" in text and "compare verdict: fail" in text
    assert "image_bytes:" in text and "regressed" in text


LOCK_TESTS = """
import time, os

def _hold(aidge_board, name):
    start = time.time()
    time.sleep(1.0)
    with open(os.path.join({out!r}, name), "w") as f:
        f.write(f"{{start}} {{time.time()}} {{aidge_board.name}}")

def test_a(aidge_board):
    _hold(aidge_board, "a")

def test_b(aidge_board):
    _hold(aidge_board, "b")

def test_c(aidge_board):
    _hold(aidge_board, "c")
"""

LAB = """
version: 1
boards:
  nucleo:
    target: stm32h7a3
    probe: {unique_id: "003F00493133510F37363734"}
    serial: {port: /dev/serial/by-id/usb-STMicroelectronics_STLINK-V3_003F00493133510F37363734-if01}
"""


def test_two_xdist_workers_never_hold_one_board_at_once(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """A lab board of a physical probe (no deploy: the board is only held) shared by three
    tests on two workers: their holding intervals never overlap."""
    out = tmp_path / "held"
    out.mkdir()
    pytester.makepyfile(test_lock=LOCK_TESTS.format(out=str(out)))
    lab = pytester.path / "lab.yaml"
    lab.write_text(LAB)
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        f"--aidge-lab={lab}",
        "--aidge-target=stm32h7a3",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=3)
    spans = sorted(
        tuple(float(v) for v in (out / n).read_text().split()[:2]) for n in ("a", "b", "c")
    )
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(spans)), spans
    assert {(out / n).read_text().split()[2] for n in "abc"} == {"nucleo"}


def test_marker_needs_targets_and_a_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.aidge_targets()
def test_none(aidge_target):
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert "names no target" in result.stdout.str() + result.stderr.str()


def test_target_option_narrows_the_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_sel="""
import pytest

@pytest.mark.aidge_targets("host", "mps2-an386")
def test_t(aidge_target):
    assert aidge_target in ("host", "mps2-an386")

def test_unmarked(aidge_target):
    assert aidge_target == "mps2-an386"
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--aidge-target=mps2-an386", "-rs", "-v"
    )
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*host not selected by --aidge-target*"])


def test_unknown_aidge_run_option_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_opt="""
def test_o(aidge_run):
    aidge_run("model.onnx", iteratons=3)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert "unknown options ['iteratons']" in result.stdout.str()


def test_openmetrics_units_and_labels() -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from aidge_deploy.testing.openmetrics import render_openmetrics

    text = render_openmetrics(
        [
            (
                "t.py::test[x]",
                [
                    ("aidge.host.target", "host"),
                    ("aidge.host.provenance", "host"),
                    ("aidge.host.latency[ms]", 2.5),
                    ("aidge.host.peak_rss[B]", 1024),
                    ("aidge.host.cycles[cycles]", 1000),
                    ("aidge.host.bundle", "/x"),
                ],
            )
        ]
    )
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["aidge_latency_seconds"].samples[0].value == pytest.approx(0.0025)
    assert families["aidge_peak_rss_bytes"].samples[0].value == 1024
    cycles = families["aidge_cycles"].samples[0]
    assert cycles.labels == {
        "test": "t.py::test[x]",
        "run": "host",
        "target": "host",
        "provenance": "host",
        "unit": "cycles",
    }
    assert json.dumps(sorted(families)) == json.dumps(
        ["aidge_cycles", "aidge_latency_seconds", "aidge_peak_rss_bytes"]
    )


FARM_TESTS = """
import pytest
from aidge_deploy.testing import assert_budget

@pytest.mark.aidge_targets("mps2-an386")
def test_on_the_farm(aidge_run, aidge_board):
    assert aidge_board.name == "farm-an386"
    result = aidge_run({model!r}, iterations=3)
    assert result.backend == "api" and result.farm_board == "an386-a"
    assert result.metrics["provenance"] == "emulated"
    assert_budget(result, "emulated_instructions", min=1)
"""


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
@needs_farm()
def test_lab_with_a_farm_reaches_its_boards_through_the_api_backend(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lab file with a ``farm:`` section: the test's board is a board of a real farm (the
    farm's own test kit: labgrid coordinator, service and an agent with a QEMU board)."""
    farm = make_farm(tmp_path / "farm")
    try:
        farm.start_agent("host-a", {"an386-a": "mps2-an386"})
        model = modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
        pytester.makepyfile(test_farm=FARM_TESTS.format(model=str(model)))
        lab = pytester.path / "lab.yaml"
        lab.write_text(
            "version: 1\n"
            f"farm: {{url: {farm.url}/api, username: {ALICE[0]}, poll_interval: 0.5}}\n"
            "boards:\n"
            "  farm-an386: {target: mps2-an386, farm_board: an386-a}\n"
        )
        monkeypatch.setenv("AIDGE_DEPLOY_API_PASSWORD", ALICE[1])
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--aidge-lab={lab}", "--junitxml=farm.xml"
        )
        result.assert_outcomes(passed=1)
        props = dict(_junit_cases(pytester.path / "farm.xml")[0][2])
        assert props["aidge.mps2-an386.board"] == "farm-an386"
        assert float(props["aidge.mps2-an386.emulated_instructions[instructions]"]) > 0
        assert ALICE[1] not in (pytester.path / "farm.xml").read_text()
    finally:
        farm.stop_all()
