"""The pytest plugin (``aidge_deploy.testing``) run the way users run it, with ``pytester``.

User test modules are written into a temporary project and run by pytest with the plugin
loaded from its entry point; deploys are real (Aidge exports, host builds, QEMU boards).
"""

from __future__ import annotations

import itertools
import re
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
    with_plugin = pytester.runpytest_subprocess("--junitxml=with.xml")
    imported = pytester.path.joinpath("imported.txt").read_text()
    # -p no:NAME takes the name pytest prints in its plugins line
    (printed,) = [
        name.rsplit("-", 1)[0]
        for line in with_plugin.stdout.lines
        if line.startswith("plugins:")
        for name in line.removeprefix("plugins:").replace(" ", "").split(",")
        if name.startswith("aidge")
    ]
    assert printed == "aidge-deploy"
    without = pytester.runpytest_subprocess("--junitxml=without.xml", "-p", f"no:{printed}")
    assert not any("aidge-deploy" in line for line in without.stdout.lines if "plugins:" in line)
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
from aidge_deploy.testing import assert_budget, assert_no_regression

MODEL = os.environ["LENET"]
DTYPE = os.environ.get("DTYPE", "float32")
# what this team gates on: exact figures (emulated counts, sizes), never host noise
THRESHOLDS = {
    "schema_version": 1,
    "metrics": {
        "emulated_instructions": {"direction": "smaller", "max_regression_pct": 1, "missing": "ignore"},
        "image_bytes": {"direction": "smaller", "max_regression_pct": 1, "missing": "ignore"},
        "flash_bytes": {"direction": "smaller", "max_regression_pct": 1, "missing": "ignore"},
    },
}


@pytest.mark.aidge_targets("host", "mps2-an386", "mps3-an547")
def test_lenet(aidge_run, aidge_target):
    result = aidge_run(MODEL, iterations=3, dtype=DTYPE)
    assert result.target == aidge_target
    assert_budget(result, "latency", max=1000.0)
    assert_no_regression(result, thresholds=THRESHOLDS)


@pytest.mark.aidge_targets("host")
def test_latency_budget_violation(aidge_run):
    result = aidge_run(MODEL, iterations=3)
    assert_budget(result, "latency", max=1e-9)
"""


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """test id -> passed/failed/skipped, from ``-rA``'s short summary."""
    out = {}
    for line in result.stdout.lines:
        for word in ("PASSED", "FAILED", "SKIPPED"):
            if line.startswith(word + " "):
                out[line.split()[1]] = word.lower()
    return out


def _failure(result: pytest.RunResult, test: str) -> str:
    """The ``E`` lines of ``test``'s failure, joined (any console width)."""
    text = result.stdout.str()
    start = text.index(f"_ {test} _")
    block = text[start : text.find("\n____", start + 1)]
    return " ".join(line[1:].strip() for line in block.splitlines() if line.startswith("E "))


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_a_changed_model_is_checked_against_its_earlier_runs(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate a team adopts the plugin for: runs recorded by identity in a results history
    (``--aidge-history``), the same test file and model path throughout, the model changed
    between sessions as a team changes it."""
    model = tmp_path / "lenet.onnx"
    modelzoo.lenet(model)
    monkeypatch.setenv("LENET", str(model))
    pytester.makepyfile(test_model=USER_TESTS)
    history = tmp_path / "results.db"
    report = tmp_path / "report"
    common = ["-p", "no:cacheprovider", "-rA", f"--aidge-history={history}"]

    # 1. the first session: every test runs; the gate has nothing to compare with yet, and
    #    fails unless told to start the series
    first = pytester.runpytest_subprocess(
        *common, f"--aidge-report-dir={report}", "--junitxml=first.xml", "--aidge-update-baseline"
    )
    first.assert_outcomes(passed=3, failed=1)
    assert "this run is the new baseline" in first.stdout.str()
    assert "first of its series" in first.stdout.str()
    violation = _failure(first, "test_latency_budget_violation[host]")
    assert "latency =" in violation and "exceeds its budget" in violation
    assert "max 1e-09 ms" in violation and "[target host; bundle" in violation
    # the run's bundle and log are attached to the test report
    assert "aidge-deploy host" in first.stdout.str() and "--- last" in first.stdout.str()
    cases = {name: props for name, _, props in _junit_cases(pytester.path / "first.xml")}
    props = dict(cases["test_lenet[mps2-an386]"])
    assert float(props["aidge.mps2-an386.emulated_instructions[instructions]"]) > 0
    assert props["aidge.mps2-an386.provenance"] == "emulated"
    assert Path(props["aidge.mps2-an386.bundle"]).is_dir()

    # 2. a wider layer: each target fails, naming the metric and both values
    modelzoo.lenet(model, hidden=48)
    wider = pytester.runpytest_subprocess(
        *common, "--aidge-target=host", "--aidge-target=mps2-an386", "-k", "test_lenet"
    )
    wider.assert_outcomes(failed=2, skipped=1)
    an386 = _failure(wider, "test_lenet[mps2-an386]")
    assert "regression against the run of" in an386 and "compare verdict: fail" in an386
    counts = re.search(r"emulated_instructions: ([\d.]+) -> ([\d.]+) instructions", an386)
    assert counts, an386
    before, after = map(float, counts.groups())
    assert after > before
    host = _failure(wider, "test_lenet[host]")
    assert re.search(r"image_bytes: \d+ -> \d+ B .*regressed", host), host
    assert "--aidge-update-baseline" in host

    # 3. the first model retrained (one layer's weights x 1.01, same shapes): judged by its
    #    figures against the last accepted run (the rejected wider runs are no baseline)
    modelzoo.lenet(model, retrained=1.01)
    retrained = pytester.runpytest_subprocess(
        *common, "--aidge-target=mps2-an386", "-k", "test_lenet"
    )
    outcome = _outcomes(retrained)["test_model.py::test_lenet[mps2-an386]"]
    text = retrained.stdout.str()
    assert "no baseline" not in text and "first of its series" not in text
    if outcome == "failed":
        assert "compare verdict: fail" in _failure(retrained, "test_lenet[mps2-an386]")

    # 4. another dtype of the same test and target: not comparable, until accepted
    monkeypatch.setenv("DTYPE", "int8")
    int8 = pytester.runpytest_subprocess(*common, "--aidge-target=host", "-k", "test_lenet")
    int8.assert_outcomes(failed=1, skipped=2)
    assert "no comparable earlier result: dtype float32 → int8" in _failure(
        int8, "test_lenet[host]"
    )
    accepted = pytester.runpytest_subprocess(
        *common, "--aidge-target=host", "-k", "test_lenet", "--aidge-update-baseline"
    )
    accepted.assert_outcomes(passed=1, skipped=2)
    assert "the new baseline" in accepted.stdout.str()
    again = pytester.runpytest_subprocess(*common, "--aidge-target=host", "-k", "test_lenet")
    again.assert_outcomes(passed=1, skipped=2)


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


def test_a_target_no_selected_test_runs_on_fails_the_session(pytester: pytest.Pytester) -> None:
    """``--aidge-target netduinoplus2`` (a valid target) where no test lists it: every test is
    skipped, and the session exits non-zero with a one-line reason (CI is not green with
    nothing run); a board of the lab that no test's target matches, likewise."""
    pytester.makepyfile(
        test_sel="""
import pytest

@pytest.mark.aidge_targets("host", "mps2-an386")
def test_t(aidge_target):
    pass

def test_plain():
    pass
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--aidge-target", "netduinoplus2"
    )
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    reason = [line for line in result.stdout.lines if "no test ran on" in line]
    assert reason == [
        "aidge-deploy: no test ran on --aidge-target netduinoplus2: no selected test lists "
        "netduinoplus2 in @aidge_targets (or every one was deselected or skipped)"
    ]
    lab = pytester.path / "lab.yaml"
    lab.write_text("version: 1\nboards:\n  n2: {target: netduinoplus2, emulated: true}\n")
    board = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--aidge-lab", str(lab), "--aidge-target", "n2"
    )
    assert board.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "no test ran on --aidge-target n2 (a board of netduinoplus2)" in board.stdout.str()
    # a target some test runs on: the session's own outcome stands
    ran = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--aidge-target", "host")
    ran.assert_outcomes(passed=2, skipped=1)
    assert ran.ret == pytest.ExitCode.OK


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

    def fig(name: str, value: float, unit: str, provenance: str) -> dict[str, object]:
        return {"name": name, "value": value, "unit": unit, "provenance": provenance}

    text = render_openmetrics(
        [
            (
                "t.py::test[x]",
                [
                    {
                        "run": "mps2-an386",
                        "target": "mps2-an386",
                        "board": "",
                        "figures": [
                            fig("latency", 2.5, "ms", "estimated"),
                            fig("flash_bytes", 1024, "B", "static"),
                            fig("emulated_instructions", 1000, "instructions", "emulated"),
                            fig("energy_per_inference", 12.0, "uJ", "estimated"),
                        ],
                    }
                ],
            )
        ]
    )
    families = {f.name: f for f in text_string_to_metric_families(text)}
    latency = families["aidge_latency_seconds"]
    assert latency.unit == "seconds" and latency.samples[0].value == pytest.approx(0.0025)
    assert latency.samples[0].labels["provenance"] == "estimated"
    flash = families["aidge_flash_bytes"]
    assert flash.unit == "bytes" and flash.samples[0].labels["provenance"] == "static"
    assert families["aidge_energy_per_inference_joules"].samples[0].value == pytest.approx(12e-6)
    count = families["aidge_emulated_instructions"].samples[0]
    assert count.labels == {
        "test": "t.py::test[x]",
        "run": "mps2-an386",
        "target": "mps2-an386",
        "board": "",
        "provenance": "emulated",
    }
    assert "unit" not in count.labels  # the unit is the family's, never a label


def test_an_unknown_target_fails_the_session_with_did_you_mean(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_sel="""
import pytest

@pytest.mark.aidge_targets("host", "mps2-an386")
def test_t(aidge_target):
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--aidge-target=mps2-an368")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = " ".join(result.stderr.str().split())
    assert "--aidge-target 'mps2-an368' is neither a target nor a board of the lab" in err
    assert "did you mean mps2-an386" in err
    assert "passed" not in result.stdout.str() and "skipped" not in result.stdout.str()
    # so does a baseline folder that does not exist (a typo would skip every comparison)
    missing = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--aidge-baseline=nope/")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    assert "--aidge-baseline nope is not a folder" in " ".join(missing.stderr.str().split())


SESSION_TESTS = """
import os
import pytest
from aidge_deploy.testing import assert_no_regression


@pytest.mark.aidge_targets("host", "mps2-an386")
def test_tiny(aidge_run, aidge_target, aidge_board):
    result = aidge_run(os.environ["TINY"], iterations=2)
    if aidge_target == "mps2-an386":
        assert aidge_board is not None and aidge_board.name == "bench-an386"
    assert_no_regression(result)


@pytest.mark.aidge_targets("host")
def test_outputs_int8(aidge_run):
    import numpy as np
    import onnxruntime as ort
    from aidge_deploy.testing import assert_outputs_close

    x = np.random.default_rng(3).uniform(-1, 1, (1, 16)).astype(np.float32)
    result = aidge_run(os.environ["MLP"], kind="output", dtype="int8", inputs=[x])
    assert result.output_raw is not None and result.output_raw[0].dtype.kind in "if"
    assert np.all(np.abs(result.output_raw[0]) <= 128)  # codes; the output is in floats
    reference = ort.InferenceSession(os.environ["MLP"]).run(None, {"x": x})
    assert_outputs_close(result, reference)  # within a few quantisation steps
"""


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_a_lab_board_name_and_a_second_session_into_the_same_report_folder(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--aidge-target bench-an386`` (an emulated board of the lab) runs the tests of its
    target on it; a second session into the same report folder keeps the first's bundles,
    compares with them (``--aidge-baseline`` = that folder) and rewrites metrics.om."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    monkeypatch.setenv("TINY", str(modelzoo.tiny_cnn(tmp_path / "tiny.onnx")))
    monkeypatch.setenv("MLP", str(modelzoo.two_head_mlp(tmp_path / "mlp.onnx")))
    pytester.makepyfile(test_session=SESSION_TESTS)
    lab = pytester.path / "lab.yaml"
    lab.write_text("version: 1\nboards:\n  bench-an386: {target: mps2-an386, emulated: true}\n")
    report = tmp_path / "report"
    args = ["-p", "no:cacheprovider", "-rA", f"--aidge-lab={lab}", f"--aidge-report-dir={report}"]
    args.append(f"--aidge-baseline={report}")  # the earlier sessions of the same folder
    first = pytester.runpytest_subprocess(
        *args, "--aidge-target=bench-an386", "--aidge-update-baseline"
    )
    first.assert_outcomes(passed=1, skipped=2)  # host not selected by the board
    assert _outcomes(first)["test_session.py::test_tiny[mps2-an386]"] == "passed"
    second = pytester.runpytest_subprocess(*args, "--aidge-update-baseline")
    second.assert_outcomes(passed=3)
    sessions = sorted(p for p in report.iterdir() if p.is_dir())
    assert len(sessions) == 2, sessions  # each session's bundles in a folder of its own
    assert (sessions[0] / "test_session" / "test_tiny-mps2-an386" / "mps2-an386").is_dir()
    gates = {
        line.split()[1]: line
        for line in second.stdout.lines
        if line.startswith("PASSED test_") and "]: " in line  # the gates' lines
    }
    # the host run had no baseline (accepted as the first of its series); the board's run
    # was compared with the first session's
    assert "first of its series" in gates["test_session.py::test_tiny[host]"]
    board = gates["test_session.py::test_tiny[mps2-an386]"]
    assert "no regression against the run of" in board and str(sessions[0]) in board

    text = (report / "metrics.om").read_text()
    assert text == (sessions[1] / "metrics.om").read_text()  # the latest session's
    families = {f.name: f for f in text_string_to_metric_families(text)}
    latency = families["aidge_latency_seconds"]
    assert latency.unit == "seconds"
    by_target = {s.labels["target"]: s for s in latency.samples}
    assert by_target["host"].labels["provenance"] == "host"
    assert 0 < by_target["host"].value < 0.1  # seconds, not milliseconds
    assert by_target["mps2-an386"].labels["provenance"] in ("estimated", "emulated")
    flash = families["aidge_flash_bytes"]
    assert flash.unit == "bytes" and {s.labels["provenance"] for s in flash.samples} == {"static"}
    image = families["aidge_image_bytes"]
    assert {s.labels["provenance"] for s in image.samples} == {"static"}
    assert text.rstrip().endswith("# EOF")


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
