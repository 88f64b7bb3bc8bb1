"""CI=true turns every environment skip into a failure; on a developer's machine it stays a skip.

The mechanism (tests/envparts.py) is run on a small inner test suite with pytester, once as a
developer's machine and once as CI, so each kind of skip is seen going through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

INNER = """
import pytest
from envparts import missing, needs, not_applicable

needs_nothing_here = needs(False, "frobnicator is not installed")


@pytest.fixture(scope="session")
def board():
    missing("sshd not found: install openssh-server")


def test_fixture_part_missing(board):
    pass


def test_part_missing():
    missing("dockerd needs root")


@needs_nothing_here
def test_needs_mark():
    pass


def test_bare_skip():
    pytest.skip("chromium is not installed")


@pytest.mark.skipif(True, reason="qemu-system-arm is not installed")
def test_skipif_mark():
    pass


def test_importorskip():
    pytest.importorskip("no_such_module_aidge_deploy_test")


def test_not_applicable():
    not_applicable("this machine has a hardware PMU")


@pytest.mark.xfail(reason="known", strict=True)
def test_xfail():
    raise AssertionError


def test_passes():
    pass
"""

MODULE_SKIP = """
import pytest
pytest.skip("binfmt is not registered", allow_module_level=True)

def test_never_runs():
    pass
"""

MODULE_NOT_APPLICABLE = """
from envparts import not_applicable
not_applicable("only on aarch64 hosts")

def test_never_runs():
    pass
"""

ENV_SKIPS = (
    "test_fixture_part_missing",
    "test_part_missing",
    "test_needs_mark",
    "test_bare_skip",
    "test_skipif_mark",
    "test_importorskip",
)


def _run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> pytest.RunResult:
    pytester.makepyfile(test_inner=INNER)
    # only this plugin in the inner run (labgrid's, autoloaded, cannot be configured twice)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    return pytester.runpytest_inprocess("-p", "envparts", "-rA", "-p", "no:cacheprovider")


def test_developer_machine_skips_missing_parts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run(pytester, monkeypatch, None)
    result.assert_outcomes(passed=1, skipped=len(ENV_SKIPS) + 1, xfailed=1)
    assert result.ret == 0


@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
def test_ci_fails_every_environment_skip(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    result = _run(pytester, monkeypatch, ci)
    # a skip in a fixture or a mark happens at set-up: pytest counts those failures as errors
    result.assert_outcomes(passed=1, failed=3, errors=3, skipped=1, xfailed=1)
    assert result.ret != 0
    reports = result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
    assert {r.nodeid.split("::")[-1] for r in reports if r.failed} == set(ENV_SKIPS)
    out = result.stdout.str()
    assert "CI=true: a missing part fails in CI instead of skipping: sshd not found" in out
    assert "CI=true: a skip fails in CI instead of skipping: chromium is not installed" in out
    assert "CI=true: a missing part fails in CI instead of skipping: frobnicator" in out
    assert "CI=true: a skip fails in CI instead of skipping: qemu-system-arm is not" in out
    assert "no_such_module_aidge_deploy_test" in out
    # the one legitimate skip stays a skip, with its reason
    assert "not applicable here: this machine has a hardware PMU" in out


def test_ci_false_is_a_developer_machine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(pytester, monkeypatch, "false").assert_outcomes(
        passed=1, skipped=len(ENV_SKIPS) + 1, xfailed=1
    )


def test_module_level_skip_fails_collection_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_mod_skip=MODULE_SKIP, test_mod_na=MODULE_NOT_APPLICABLE)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest_inprocess("-p", "envparts", "-rA", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1, skipped=1)
    assert "binfmt is not registered" in result.stdout.str()
    monkeypatch.delenv("CI")
    result = pytester.runpytest_inprocess("-p", "envparts", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2)


def test_every_skip_of_the_suite_goes_through_envparts() -> None:
    """No test skips on its own (``pytest.skip``, ``skipif``, ``importorskip``): each says
    whether a part is missing or the test does not apply, so the CI rule is in one place."""
    here = Path(__file__).parent
    found = []
    for path in sorted(here.rglob("*.py")):
        if path.name in ("envparts.py", "test_envparts.py") or "data" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("skip", "skipif", "importorskip"):
                base = node.value
                names = {getattr(base, "id", None), getattr(base, "attr", None)}
                if names & {"pytest", "mark"}:
                    found.append(f"{path.name}:{node.lineno} {node.attr}")
    assert found == []


@pytest.mark.parametrize(("given", "seen"), [(None, "true"), ("true", "true"), ("1", "1")])
def test_ci_entry_point_runs_as_ci(tmp_path: Path, given: str | None, seen: str) -> None:
    """``.ci/run`` is CI whether or not its runner sets ``CI``: run for real, with a stand-in
    ``run.sh`` that reports what it was given."""
    import os
    import shutil
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / ".ci").mkdir()
    shutil.copy(repo / ".ci" / "run", tmp_path / ".ci" / "run")
    stand_in = tmp_path / "run.sh"
    stand_in.write_text('#!/bin/sh\necho "CI=$CI ARGS=$*"\n')
    stand_in.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if given is not None:
        env["CI"] = given
    done = subprocess.run([str(tmp_path / ".ci" / "run")], capture_output=True, text=True,
                          env=env, timeout=30, check=True)  # fmt: skip
    assert done.stdout.strip() == f"CI={seen} ARGS=test"
