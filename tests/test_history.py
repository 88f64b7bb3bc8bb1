"""The results history store (``aidge_deploy.history``): recording, queries, commits from
git and CI variables, the regression gate and step detection over a series."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aidge_deploy import DeployConfig, deploy
from aidge_deploy.history import (
    Comparability,
    HistoryStore,
    RunIdentity,
    VcsInfo,
    bundle_facts,
    detect_vcs,
    regression,
)
from aidge_deploy.history.gate import GateStatus, check_regression
from aidge_deploy.report.compare import Figure, parse_thresholds
from aidge_deploy.testing import DEFAULT_THRESHOLDS
from gitrepo import git, new_project

GCC_12 = {"c++": "c++ (Debian 12.2.0-14) 12.2.0", "cmake": "cmake version 3.25.1"}


@pytest.fixture(scope="module")
def host_bundle(export_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    bundle = tmp_path_factory.mktemp("history") / "bundle"
    deploy(export_factory("benchmark").path, DeployConfig(report_dir=bundle))
    return bundle


def test_a_run_is_recorded_from_its_bundle(
    host_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GITHUB_ACTIONS", "GITLAB_CI"):  # the project's git, not this CI's
        monkeypatch.delenv(name, raising=False)
    repo = new_project(tmp_path / "project")
    (repo / "model.txt").write_text("v1")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    sha = git(repo, "rev-parse", "HEAD")

    with HistoryStore(tmp_path / "db" / "results.db") as store:
        record = store.record(host_bundle, "tests/test_m.py::test_latency", source="pytest",
                              project_dir=repo)  # fmt: skip
    # a new connection reads back what the first wrote (a file, not memory)
    with HistoryStore(tmp_path / "db" / "results.db") as store:
        (read,) = store.records()
    assert read == record
    assert read.identity == RunIdentity(
        "tests/test_m.py::test_latency", "host", None, "benchmark", "float32", 10
    )
    assert read.vcs.commit == sha and read.vcs.branch == "main" and read.vcs.dirty is False
    assert read.vcs.commit_time is not None
    assert read.comparability.provenance == "host"
    assert read.comparability.aidge_version == bundle_facts(host_bundle).comparability.aidge_version
    assert "c++" in read.comparability.toolchain
    latency = read.figures["latency"]
    assert latency.unit == "ms" and latency.provenance == "host" and latency.value
    assert latency.resolution is not None
    assert read.figures["image_bytes"].provenance == "static"
    assert read.bundle == host_bundle and read.source == "pytest" and read.accepted
    assert not any(k.startswith("layers/") for k in read.figures)
    with HistoryStore(tmp_path / "db" / "results.db") as store:
        (with_layers,) = store.records(layers=True)
    assert any(k.startswith("layers/") for k in with_layers.figures)


def test_commit_and_branch_from_ci_variables(tmp_path: Path) -> None:
    github = detect_vcs(
        tmp_path,
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_SHA": "a" * 40,
            "GITHUB_REF_NAME": "12/merge",
            "GITHUB_HEAD_REF": "feature-x",
        },
    )
    assert github == VcsInfo("a" * 40, "feature-x", "github-actions")
    gitlab = detect_vcs(
        tmp_path,
        {
            "GITLAB_CI": "true",
            "CI_COMMIT_SHA": "b" * 40,
            "CI_COMMIT_REF_NAME": "main",
            "CI_COMMIT_TIMESTAMP": "2025-03-01T10:00:00+00:00",
        },
    )
    assert gitlab.branch == "main" and gitlab.ci == "gitlab-ci"
    assert gitlab.commit_time == 1740823200.0
    assert detect_vcs(tmp_path, {}) == VcsInfo()  # not a repository: no commit, no error


def _fig(
    value: float | None, unit: str, provenance: str, resolution: float | None = None
) -> Figure:
    return Figure(value, unit, provenance, resolution)


COMP = Comparability("emulated", "0.10.1", {"arm-none-eabi-gcc": "arm-none-eabi-gcc 12.2.1"})


def _store(tmp_path: Path) -> HistoryStore:
    return HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")


def test_gate_exact_counts_and_blocking_differences(tmp_path: Path) -> None:
    rules = parse_thresholds(dict(DEFAULT_THRESHOLDS))
    ident = RunIdentity("t::test", "mps2-an386", iterations=3)
    store = _store(tmp_path)
    store.add(ident, {"emulated_instructions": _fig(1000, "instructions", "emulated")}, COMP,
              source="test")  # fmt: skip
    same = {"emulated_instructions": _fig(1005, "instructions", "emulated")}
    assert check_regression(store, ident, COMP, same, rules).status is GateStatus.PASS
    worse = {"emulated_instructions": _fig(1200, "instructions", "emulated")}
    failed = check_regression(store, ident, COMP, worse, rules)
    assert failed.status is GateStatus.FAIL
    assert "emulated_instructions: 1000 -> 1200 instructions" in failed.message
    # another compiler is what was built (informative): compared through, named with both
    # versions beside the verdict
    newer = Comparability("emulated", "0.10.1", {"arm-none-eabi-gcc": "arm-none-eabi-gcc 13.3.0"})
    compared = check_regression(store, ident, newer, same, rules)
    assert compared.status is GateStatus.PASS
    assert "differs: toolchain arm-none-eabi-gcc 12.2.1 → 13.3.0" in compared.message
    assert check_regression(store, ident, newer, worse, rules).status is GateStatus.FAIL
    # another provenance blocks: the newest comparable record is searched, else it is said
    silicon = Comparability("silicon", "0.10.1", COMP.toolchain)
    refused = check_regression(store, ident, silicon, same, rules)
    assert refused.status is GateStatus.NOT_COMPARABLE
    assert "no comparable earlier result: provenance emulated → silicon" in refused.message
    # another dtype of the same test and target
    int8 = RunIdentity("t::test", "mps2-an386", dtype="int8", iterations=3)
    other = check_regression(store, int8, COMP, same, rules)
    assert other.status is GateStatus.NOT_COMPARABLE
    assert "no comparable earlier result: dtype float32 → int8" in other.message
    first = check_regression(store, RunIdentity("t::new", "host"), COMP, same, rules)
    assert first.status is GateStatus.NO_BASELINE
    # a build driver's version is no reason to refuse
    assert not Comparability("host", "1", GCC_12).blocking_differences(
        Comparability("host", "1", {**GCC_12, "cmake": "cmake version 3.31.0"})
    )


def test_gate_judges_measured_times_against_their_spread(tmp_path: Path) -> None:
    rules = parse_thresholds(dict(DEFAULT_THRESHOLDS))  # latency may grow 10 %
    ident = RunIdentity("t::test", "host", iterations=20)
    comp = Comparability("host", "0.10.1", GCC_12)
    store = _store(tmp_path)
    # a machine with some noise: +-4 % around 1 ms (gated: below changepoint.UNSTABLE_PCT;
    # a noisier series is not gated at all, tests/test_changepoint.py)
    for value in (1.0, 1.04, 0.97, 1.02, 0.96, 1.03, 0.98, 1.04, 0.96, 1.01):
        store.add(ident, {"latency": _fig(value, "ms", "host", 0.001)}, comp, source="test")
    noisy = check_regression(
        store, ident, comp, {"latency": _fig(1.12, "ms", "host", 0.001)}, rules
    )
    assert noisy.status is GateStatus.PASS, noisy.message
    assert "median of the last 10 host results" in noisy.message
    step = check_regression(store, ident, comp, {"latency": _fig(1.9, "ms", "host", 0.001)}, rules)
    assert step.status is GateStatus.FAIL and "latency: 1.0" in step.message


def test_a_rejected_record_is_no_baseline(tmp_path: Path) -> None:
    ident = RunIdentity("t::test", "mps2-an386")
    store = _store(tmp_path)
    good = store.add(ident, {"x": _fig(1, "instructions", "emulated")}, COMP, source="t")
    bad = store.add(ident, {"x": _fig(2, "instructions", "emulated")}, COMP, source="t")
    store.set_accepted(bad.id, False)
    assert store.previous(ident) == good
    assert [r.accepted for r in store.records(identity=ident)] == [True, False]


def test_steps_of_exact_and_measured_series() -> None:
    exact = [10, 10, 10, 12, 12, 10, None, 10]
    assert regression.steps(exact, "emulated") == [3, 5]
    measured = [1.0, 1.1, 0.9, 1.05, 0.95, 2.0, 2.1, 1.9, 2.05, 1.95]
    assert regression.steps(measured, "host") == [5]  # one lasting step, marked once
    assert regression.steps([1.0, 1.3, 0.8], "host") == []  # spread unknown: nothing marked
    judged = regression.judge([1.0, 1.1, 0.9, 1.0], 1.02, "silicon", resolution=0.1)
    assert judged is not None and not judged.stepped and judged.reference == 1.0


def test_a_postgresql_url_is_a_history_too(postgres: str, host_bundle: Path) -> None:
    """The same store on a real PostgreSQL server (the ``postgres`` extra): recorded by one
    connection, read back and judged by another, and listed by the CLI."""
    from typer.testing import CliRunner

    from aidge_deploy.cli.main import app

    ident = RunIdentity("t::test", "mps2-an386")
    with HistoryStore(postgres) as store:
        store.record(host_bundle, "t::host", source="test", vcs=VcsInfo("c" * 40, "main"))
        store.add(ident, {"x": _fig(10, "instructions", "emulated")}, COMP, source="test")
    with HistoryStore(postgres) as store:
        (host,) = store.records(name="t::host")
        assert host.figures["latency"].unit == "ms" and host.vcs.branch == "main"
        rules = parse_thresholds({"schema_version": 1, "metrics": {"x": {"direction": "smaller"}}})
        worse = {"x": _fig(11, "instructions", "emulated")}
        assert check_regression(store, ident, COMP, worse, rules).status is GateStatus.FAIL
    res = CliRunner().invoke(app, ["history", "list", "--history", postgres, "--json"])
    assert res.exit_code == 0, res.output
    assert [r["identity"]["name"] for r in json.loads(res.stdout)] == ["t::host", "t::test"]
