"""The pytest plugin's regression gate run as a team runs it, with ``pytester``: never a
silent pass (issues 28 and 33).

Each test is a user's project written into a temporary folder and run by pytest (the plugin
loaded from its entry point), session after session, the model changed between them as a
team changes it; every deploy is real (Aidge exports of small ONNX models, an emulated
mps2-an386 board). The options are given in space form, as the README writes them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import modelzoo
from envparts import needs
from gitrepo import git, new_project

pytestmark = [
    pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning"),
    pytest.mark.slow,
    pytest.mark.qemu,
    needs(
        shutil.which("qemu-system-arm") is not None
        and shutil.which("arm-none-eabi-gcc") is not None,
        "qemu-system-arm and the Arm cross toolchain are needed",
    ),
]

#: the README's HIL test: budgets, then the gate against --aidge-baseline
GATED = """
import os
import pytest
from aidge_deploy.testing import assert_budget, assert_no_regression


@pytest.mark.aidge_targets("mps2-an386")
def test_model(aidge_run, request):
    result = aidge_run(os.environ["MODEL"], iterations=int(os.environ.get("ITER", "3")))
    assert_budget(result, "flash_bytes", max=float(os.environ.get("FLASH_MAX", "1e7")))
    assert_no_regression(result, request.config.getoption("--aidge-baseline"))
"""
TEST = "test_model[mps2-an386]"
COMMON = ("-p", "no:cacheprovider", "-rA")


def _text(result: pytest.RunResult) -> str:
    """The session's output, whitespace normalised (any console width)."""
    return " ".join((result.stdout.str() + result.stderr.str()).split())


def _failure(result: pytest.RunResult) -> str:
    """The ``E`` lines of the test's failure, joined."""
    text = result.stdout.str()
    start = text.index(f"_ {TEST} _")
    block = text[start : text.find("\n____", start + 1)]
    return " ".join(line[1:].strip() for line in block.splitlines() if line.startswith("E "))


def _gate_line(result: pytest.RunResult) -> str:
    """The test's line in the session's "regression gates" section."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "aidge-deploy regression gates" in line)
    (line,) = [x for x in lines[start + 1 :] if TEST in x][:1]
    return line


def _counts(message: str) -> tuple[float, float]:
    found = re.search(r"emulated_instructions: ([\d.]+) -> ([\d.]+) instructions", message)
    assert found, message
    before, after = map(float, found.groups())
    return before, after


def test_the_readme_flow_fails_a_wider_model_against_an_earlier_report_folder(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two report folders and a 4x wider hidden layer fail with the compare verdict naming
    the metric and both values; an unmatched baseline fails; ``--aidge-update-baseline``
    accepts; a third session after a re-run into the same folder compares with the newest.
    The folders are outside the project and given in space form (pytest takes them for test
    paths and moves its rootdir: the runs keep their names)."""
    # the flow as a developer runs it: under CI=true a session with no baseline fails its
    # gate (a gate must gate), checked at the end
    monkeypatch.delenv("CI", raising=False)
    model = modelzoo.lenet(tmp_path / "model.onnx")
    monkeypatch.setenv("MODEL", str(model))
    pytester.makepyfile(test_gated=GATED)
    base, new, empty = tmp_path / "base", tmp_path / "new", tmp_path / "empty"
    empty.mkdir()

    # 1. no baseline asked for: the budget decides the test; only the gate is skipped, said
    first = pytester.runpytest_subprocess(*COMMON, "--aidge-report-dir", str(base))
    first.assert_outcomes(passed=1)
    assert "regression check skipped: no baseline asked for" in _text(first)
    assert "regression check skipped" in _gate_line(first)
    monkeypatch.setenv("FLASH_MAX", "1")
    over = pytester.runpytest_subprocess(*COMMON)
    over.assert_outcomes(failed=1)
    assert "flash_bytes =" in _failure(over) and "exceeds its budget" in _failure(over)
    monkeypatch.delenv("FLASH_MAX")

    # 2. the wider model against the first session's folder: fails, naming both values
    modelzoo.lenet(model, hidden=64)
    wider = pytester.runpytest_subprocess(
        *COMMON, "--aidge-baseline", str(base), "--aidge-report-dir", str(new)
    )
    wider.assert_outcomes(failed=1)
    message = _failure(wider)
    assert "compare verdict: fail" in message
    before, after = _counts(message)
    assert after > before
    assert re.search(r"flash_bytes: \d+ -> \d+ B .*regressed", message), message
    (session_1,) = [p for p in base.iterdir() if p.is_dir()]
    assert "against the run of " in message and str(session_1) in message
    assert str(session_1) in _gate_line(wider)  # the report line names the baseline

    # 3. an explicit baseline that holds no earlier run of the test fails, with the reason
    unmatched = pytester.runpytest_subprocess(*COMMON, "--aidge-baseline", str(empty))
    unmatched.assert_outcomes(failed=1)
    text = _failure(unmatched)
    assert "no earlier result of test_gated.py::test_model on mps2-an386" in text
    assert f"in --aidge-baseline {empty}" in text and "--aidge-update-baseline" in text

    # 4. the intended change, accepted into the same folder (a re-run: a new session folder)
    args = (*COMMON, "--aidge-baseline", str(base), "--aidge-report-dir", str(base))
    accepted = pytester.runpytest_subprocess(*args, "--aidge-update-baseline")
    accepted.assert_outcomes(passed=1)
    assert "this run is the new baseline" in _text(accepted)
    # 5. a third session into the same folder compares with the newest: the accepted one
    third = pytester.runpytest_subprocess(*args)
    third.assert_outcomes(passed=1)
    sessions = sorted(p for p in base.iterdir() if p.is_dir())
    assert len(sessions) == 3 and sessions[0] == session_1
    line = _gate_line(third)
    assert "no regression against the run of" in line and str(sessions[1]) in line, line

    # 6. in CI a session with no baseline asked for fails its gate instead of skipping it
    monkeypatch.setenv("CI", "true")
    in_ci = pytester.runpytest_subprocess(*COMMON)
    in_ci.assert_outcomes(failed=1)
    assert "in CI (CI=true) a gate must gate" in _failure(in_ci)


def test_the_same_gate_through_a_history(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--aidge-history FILE`` (space form, a file outside the project): a first run fails
    until accepted with ``--aidge-update-baseline``; the wider model then fails."""
    model = modelzoo.lenet(tmp_path / "model.onnx")
    monkeypatch.setenv("MODEL", str(model))
    pytester.makepyfile(test_gated=GATED)
    history = ("--aidge-history", str(tmp_path / "h.db"))
    first = pytester.runpytest_subprocess(*COMMON, *history)
    first.assert_outcomes(failed=1)
    assert "this run would be the first of its series" in _failure(first)
    assert f"in --aidge-history {tmp_path / 'h.db'}" in _failure(first)
    pytester.runpytest_subprocess(*COMMON, *history, "--aidge-update-baseline").assert_outcomes(
        passed=1
    )
    modelzoo.lenet(model, hidden=64)
    wider = pytester.runpytest_subprocess(*COMMON, *history)
    wider.assert_outcomes(failed=1)
    before, after = _counts(_failure(wider))
    assert after > before and "compare verdict: fail" in _failure(wider)

    from aidge_deploy.history import HistoryStore

    with HistoryStore(tmp_path / "h.db") as store:
        names = {r.identity.name for r in store.records()}
    assert names == {"test_gated.py::test_model"}


def _checkout(root: Path) -> Path:
    """A clone of the team's project: an ini file and its tests under ``tests/``, in git."""
    project = new_project(root)
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_gated.py").write_text(GATED)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the team's tests")
    return project


def test_one_identity_from_two_checkout_folders_and_a_space_form_history(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two CI runners check the project out into different folders; the history is a file
    elsewhere, given in space form. The runs keep one identity (the test's path in the
    project), so the regressed model fails on the second runner, naming the first's commit."""
    model = modelzoo.lenet(tmp_path / "model.onnx")
    monkeypatch.setenv("MODEL", str(model))
    r1, r2 = _checkout(tmp_path / "builds" / "r1"), _checkout(tmp_path / "builds" / "r2")
    history = ("--aidge-history", str(tmp_path / "shared" / "h.db"))

    monkeypatch.chdir(r1)
    pytester.runpytest_subprocess(*COMMON, *history, "--aidge-update-baseline").assert_outcomes(
        passed=1
    )
    modelzoo.lenet(model, hidden=64)
    monkeypatch.chdir(r2)
    wider = pytester.runpytest_subprocess(*COMMON, *history)
    wider.assert_outcomes(failed=1)
    message = _failure(wider)
    assert "compare verdict: fail" in message
    before, after = _counts(message)
    assert after > before
    assert f"commit {git(r1, 'rev-parse', 'HEAD')[:10]}" in message

    from aidge_deploy.history import HistoryStore

    with HistoryStore(tmp_path / "shared" / "h.db") as store:
        records = store.records()
    assert {r.identity.name for r in records} == {"tests/test_gated.py::test_model"}
    assert all(r.vcs.commit for r in records)  # each runner's own commit


LAB = "version: 1\nboards:\n  {name}: {{target: mps2-an386, emulated: true}}\n"


def test_a_changed_kind_board_or_lab_is_never_a_silent_new_series(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under CI=true: another iteration count fails as no comparable earlier result; a renamed
    lab board and a run without ``--aidge-lab`` continue the series (so the regressed model
    fails) and are named; with ``--aidge-board-series`` the renamed board is another series,
    which fails naming the boards. Each gated test's report line names its baseline."""
    monkeypatch.setenv("CI", "true")
    model = modelzoo.lenet(tmp_path / "model.onnx")
    monkeypatch.setenv("MODEL", str(model))
    project = _checkout(pytester.path / "project")
    monkeypatch.chdir(project)
    commit = git(project, "rev-parse", "HEAD")[:10]
    lab = tmp_path / "lab.yaml"
    history = ("--aidge-history", str(tmp_path / "h.db"))

    def session(board: str | None, *extra: str) -> pytest.RunResult:
        options = list(extra)
        if board is not None:
            lab.write_text(LAB.format(name=board))
            options += ["--aidge-lab", str(lab)]
        return pytester.runpytest_subprocess(*COMMON, *history, *options)

    session("bench-a", "--aidge-update-baseline").assert_outcomes(passed=1)

    monkeypatch.setenv("ITER", "5")
    iterations = session("bench-a")
    iterations.assert_outcomes(failed=1)
    assert "no comparable earlier result: iterations 3 → 5" in _failure(iterations)
    assert "no comparable earlier result: iterations 3 → 5" in _gate_line(iterations)
    monkeypatch.delenv("ITER")

    modelzoo.lenet(model, hidden=64)
    renamed = session("bench-b")
    renamed.assert_outcomes(failed=1)
    message = _failure(renamed)
    assert "compare verdict: fail" in message and "lab board bench-a → bench-b" in message
    line = _gate_line(renamed)
    assert "against the run of " in line and f"commit {commit}" in line, line

    no_lab = session(None)
    no_lab.assert_outcomes(failed=1)
    message = _failure(no_lab)
    assert "compare verdict: fail" in message and "lab board bench-a → none" in message

    modelzoo.lenet(model)  # the accepted model again: a renamed board passes, and is named
    same = session("bench-b")
    same.assert_outcomes(passed=1)
    line = _gate_line(same)
    assert "no regression against the run of" in line and f"commit {commit}" in line
    assert "lab board bench-a → bench-b" in line

    per_board = session("bench-c", "--aidge-board-series")
    per_board.assert_outcomes(failed=1)
    assert "no comparable earlier result: lab board bench-b → bench-c" in _failure(per_board)
