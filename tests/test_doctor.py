"""``doctor`` tells the truth, from what each registered thing declares it needs, and a run
that needs a missing tool fails in Preflight with the words of ``doctor``'s row.

Checked on this machine as it is (the K230 cross compiler and SEGGER's J-Link software are
not installed by scripts/setup.sh; the STM32 BSPs are downloaded at the first export) and
with a ``PATH`` lacking a tool a target needs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import aidge_deploy
from aidge_deploy.checkup import Readiness, checkup, target_readiness
from aidge_deploy.cli.main import app
from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import PreflightError
from envparts import not_applicable

runner = CliRunner()


def flat(text: str) -> str:
    """Without table borders and with whitespace normalised: a row's cells in reading order."""
    return " ".join(text.replace("│", " ").replace("┃", " ").split())


def row(rows: tuple[Readiness, ...], target: str, way: str) -> Readiness:
    """The row of ``target`` reached the ``way`` ("ssh --cross-compile")."""
    found = []
    for r in rows:
        names, _, reached = r.subject.partition(" /")
        if reached == way and target in names.split(", "):
            found.append(r)
    assert len(found) == 1, [r.subject for r in rows]
    return found[0]


@pytest.fixture(scope="module")
def report() -> Any:
    return checkup()


def test_k230_cross_build_is_missing_its_compiler_here(report: Any) -> None:
    if shutil.which("riscv64-linux-gnu-g++"):
        not_applicable("the RISC-V cross compiler is installed here")
    cross = row(report.targets, "k230", "ssh --cross-compile")
    assert not cross.ready
    assert cross.status == "missing riscv64-linux-gnu-g++ (not found)"
    assert "g++-riscv64-linux-gnu" in cross.how
    # building on the board needs nothing here: ready, with what the run must provide
    native = row(report.targets, "k230", "ssh")
    assert native.ready and any("--ssh-host" in need for need in native.run_needs)
    assert any("cmake and a C++ compiler on the board" in n for n in native.run_needs)


def test_ssh_targets_are_listed_with_what_a_run_needs(report: Any) -> None:
    for target in ("raspberrypi", "jetson-agx", "host"):
        for way in ("ssh", "ssh_docker"):
            needs = " ".join(row(report.targets, target, way).run_needs)
            assert "--ssh-host" in needs and "known_hosts" in needs
    assert "--docker-image" in " ".join(row(report.targets, "raspberrypi", "ssh_docker").run_needs)


def test_jlink_is_absent_and_its_boards_say_so(report: Any) -> None:
    if shutil.which("JLinkGDBServerCLExe"):
        not_applicable("SEGGER J-Link software is installed here")
    (jlink,) = [r for r in report.flashers if r.subject == "jlink"]
    assert jlink.status == "missing JLinkGDBServerCLExe (not found)"
    board = row(report.targets, "stm32h7a3", "local --flash-method jlink")
    assert board.status == jlink.status and "SEGGER" in board.how
    assert any("--serial-port" in need for need in board.run_needs)


def test_stm32_exports_need_their_bsp_download(report: Any) -> None:
    (h7,) = [r for r in report.exports if r.subject.startswith("stm32h7a3:")]
    (an386,) = [r for r in report.exports if r.subject.startswith("mps2-an386:")]
    assert an386.ready  # the emulated boards' BSPs ship with aidge_qemu_boards
    if h7.ready:
        not_applicable("the STM32H7A3 BSP was downloaded on this machine")
    assert "aidge_deploy_bsp_stm32h7a3" in h7.status and "fails offline" in h7.status
    assert "AIDGE_BSP_REGISTRY_URL" in h7.how


def test_no_reference_tick_where_no_target_here_has_reference_values(report: Any) -> None:
    (reference,) = [r for r in report.monitors if r.subject == "reference"]
    assert not reference.ready
    assert "no target of this machine (backend local)" in reference.status


def test_counter_sources_and_plugins_are_listed(report: Any) -> None:
    names = {r.subject.split(" ")[0] for r in report.counters}
    assert {"linux-perf", "linux-perf-board", "emulated-pmu"} <= names
    assert report.broken == ()


def test_doctor_command_prints_the_readiness_and_exits_1_for_what_is_missing() -> None:
    res = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    out = flat(res.output)
    assert "Everything every registered target needs is installed" not in out
    assert "k230 /ssh --cross-compile" in out and "/ssh_docker" in out
    if res.exit_code == 0:
        assert "ways of running the registered targets are ready" in out
    else:
        assert res.exit_code == 1 and "not ready here" in out


def _path_without(tmp_path: Path, *missing: str) -> str:
    """A PATH holding every program of the current one but ``missing``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            if entry.name in missing or (bin_dir / entry.name).exists():
                continue
            if entry.is_file() and os.access(entry.path, os.X_OK):
                os.symlink(entry.path, bin_dir / entry.name)
    return str(bin_dir)


@pytest.mark.slow
def test_a_missing_tool_is_the_same_words_in_doctor_and_in_preflight(
    export_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cmake gone from PATH: doctor's host row says so, and a host deploy stops in
    Preflight (nothing built) with the same missing item and the same way to get it."""
    artifact = export_factory("benchmark")
    monkeypatch.setenv("PATH", _path_without(tmp_path, "cmake"))
    host = row(target_readiness(), "host", "local")
    assert host.status == "missing cmake (not found)"
    assert host.how == "apt-get install --no-install-recommends cmake"
    with pytest.raises(PreflightError) as info:
        aidge_deploy.deploy(artifact, DeployConfig(), work_dir=tmp_path / "run")
    assert info.value.stage == "Preflight"
    assert info.value.message == f"Target host/local is {host.status}"
    assert info.value.hint == host.how
    res = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert res.exit_code == 1
    assert "host /local missing cmake (not found) get it: apt-get install" in flat(res.output)


def test_profile_k230_cross_fails_before_exporting_with_doctors_words(tmp_path: Path) -> None:
    if shutil.which("riscv64-linux-gnu-g++"):
        not_applicable("the RISC-V cross compiler is installed here")
    model = tmp_path / "m.onnx"
    import modelzoo

    modelzoo.tiny_cnn(model)
    cross = row(target_readiness(), "k230", "ssh --cross-compile")
    res = runner.invoke(
        app,
        ["profile", str(model), "--target", "k230", "--backend", "ssh", "--ssh-host",
         "k230.invalid", "--cross-compile"],
        env={"COLUMNS": "200", "AIDGE_DEPLOY_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    out = flat(res.output)
    assert res.exit_code == 2, out
    assert f"Target k230/ssh is {cross.status}" in out and flat(cross.how) in out
    assert not (tmp_path / "cache" / "exports").exists(), "nothing was exported"
