"""Linux perf_event counters on this machine: probe, counted runs, the C launcher, a real deploy.

This VM has no hardware PMU (hardware events fail with ENOENT) but software events work;
the assertions about hardware events are skipped where ``perf stat`` says they are counted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import aidge_deploy
import aidge_deploy.api
from aidge_deploy.config import DeployConfig
from aidge_deploy.pipeline.default import build_default_pipeline
from aidge_deploy.pipeline.runner import PipelineRunner
from aidge_deploy.pipeline.stages.profile_passes import ProfilePassesStage
from aidge_deploy.profiling.counters import load_catalogue
from aidge_deploy.profiling.native import (
    PerfRunReport,
    compile_command,
    parse_perf_run_report,
    parse_probe,
    perf_run_argv,
    perf_run_source,
)
from aidge_deploy.profiling.perf_linux import pass_figures, probe_available, run_with_counters
from aidge_deploy.results import Provenance
from envparts import missing, not_applicable


def _hardware_events_supported() -> bool:
    """Ask the real ``perf`` tool (if any) whether this machine counts instructions."""
    if shutil.which("perf") is None:
        return probe_available().get("instructions") is None
    proc = subprocess.run(
        ["perf", "stat", "-x,", "-e", "instructions", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return (
        proc.returncode == 0
        and "<not supported>" not in proc.stderr
        and "<not counted>" not in proc.stderr
    )


def _counters(*names: str):  # type: ignore[no-untyped-def]
    cat = load_catalogue()
    return [cat.get(n, "linux-perf") for n in names]


def test_probe_software_events_work_here() -> None:
    probed = probe_available()
    assert set(probed) == {c.name for c in load_catalogue().in_domain("linux-perf")}
    assert probed["task-clock"] is None and probed["page-faults"] is None


def test_probe_reports_hardware_events_unavailable_with_reason() -> None:
    if _hardware_events_supported():
        not_applicable("this machine has a hardware PMU: hardware events are countable")
    probed = probe_available()
    for name in ("cycles", "instructions", "branch-misses", "L1-dcache-load-misses"):
        reason = probed[name]
        assert reason, f"{name} reported available on a machine without a PMU"
        assert reason.split(":")[0] in {"ENOENT", "EOPNOTSUPP", "ENODEV", "EACCES", "EPERM"}
        if reason.startswith("ENOENT"):
            assert "no hardware PMU driver" in reason


def test_one_implementation_probe_and_run_agree_on_refusals(tmp_path: Path) -> None:
    """The probe and a counted run are the same C code: same verdict, same reason."""
    probed = probe_available()
    run = run_with_counters(
        ["/bin/true"],
        _counters("task-clock", "instructions", "cycles"),
        cwd=tmp_path,
        timeout_s=60,
        stdout_path=tmp_path / "o.log",
        stderr_path=tmp_path / "e.log",
    )
    assert run.report is not None
    for name in ("task-clock", "instructions", "cycles"):
        if probed[name] is None:
            assert name in run.report.counters
        else:
            assert run.report.unavailable[name] == probed[name]
    assert "aidge_deploy.profiling.perf_linux" in sys.modules
    assert not hasattr(sys.modules["aidge_deploy.profiling.perf_linux"], "perf_event_open")


def test_counted_run_of_a_real_program(tmp_path: Path) -> None:
    # a shell that touches fresh memory (page faults) and spins a little (task-clock)
    script = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3"
    run = run_with_counters(
        ["/bin/sh", "-c", script],
        _counters("task-clock", "page-faults", "context-switches", "instructions"),
        cwd=tmp_path,
        timeout_s=60,
        stdout_path=tmp_path / "out.log",
        stderr_path=tmp_path / "err.log",
    )
    report = run.report
    assert report is not None
    assert run.run.returncode == 3 and not run.run.timed_out
    scaled = report.scaled("task-clock")
    assert scaled is not None and scaled > 1e6  # > 1 ms
    assert report.counters["page-faults"] > 0
    assert report.running_ratio == pytest.approx(1.0)
    # forked from the small launcher: the program's own peak RSS (a shell: a few MB)
    assert run.run.peak_rss_bytes is not None and 0 < run.run.peak_rss_bytes < 32 * 2**20
    if not _hardware_events_supported():
        assert "instructions" in run.unavailable and "instructions" not in report.counters
    # counting starts at the program's exec: the launcher's own work is not in it
    assert report.time_enabled_ns <= run.run.duration_s * 1e9


def test_counted_run_times_out_and_never_reports_a_program_that_did_not_start(
    tmp_path: Path,
) -> None:
    hang = run_with_counters(
        ["/bin/sh", "-c", "sleep 30"],
        _counters("task-clock"),
        cwd=tmp_path,
        timeout_s=0.5,
        stdout_path=tmp_path / "o.log",
        stderr_path=tmp_path / "e.log",
    )
    assert hang.run.timed_out and hang.run.returncode is None and hang.report is None
    missing = run_with_counters(
        [str(tmp_path / "no-such-program")],
        _counters("task-clock", "page-faults"),
        cwd=tmp_path,
        timeout_s=10,
        stdout_path=tmp_path / "o2.log",
        stderr_path=tmp_path / "e2.log",
    )
    assert missing.run.returncode == 127 and missing.report is not None
    assert not missing.report.counters and missing.report.running_ratio is None
    assert "did not start" in missing.unavailable["task-clock"]
    figures = pass_figures(missing.report, ["task-clock", "page-faults"], 12, "no report")
    assert not figures.totals and not figures.running_ratio, "no made-up ratio"
    assert figures.unavailable["task-clock"].startswith("NOTRUN")


# ---------------------------------------------------------------- the perf_run C launcher


@pytest.fixture(scope="module")
def perf_run_native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        missing("no C compiler (apt-get install gcc)")
    out = tmp_path_factory.mktemp("perf_run") / "perf_run"
    subprocess.run(
        [
            *compile_command(cc, out)[:-3],
            "-Wall",
            "-Wextra",
            "-Werror",
            *compile_command(cc, out)[-3:],
        ],
        check=True,
        timeout=120,
    )
    return out


def test_perf_run_preserves_exit_code_and_reports_json(
    perf_run_native: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    argv = perf_run_argv(
        str(perf_run_native),
        _counters("task-clock", "page-faults", "instructions"),
        ["/bin/sh", "-c", "exit 7"],
        str(report),
    )
    assert subprocess.run(argv, timeout=60).returncode == 7
    parsed = parse_perf_run_report(report.read_text())
    assert parsed.exit_code == 7 and parsed.signal is None
    assert parsed.counters["task-clock"] > 0 and parsed.scaled("page-faults") > 0
    # forked from the small launcher, the child's peak RSS is its own (a shell: a few MB)
    assert 0 < parsed.peak_rss_bytes < 32 * 2**20
    if not _hardware_events_supported():
        assert parsed.unavailable["instructions"].startswith("ENOENT")
    killed = subprocess.run(
        [str(perf_run_native), "/bin/sh", "-c", "kill -9 $$"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == 128 + 9
    from_stderr = parse_perf_run_report(killed.stderr)
    assert from_stderr.signal == 9 and from_stderr.exit_code is None
    missing = subprocess.run(
        [str(perf_run_native), str(tmp_path / "nope")], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 127
    assert all(
        r.startswith("NOTRUN") or r.startswith("ENOENT")
        for r in parse_perf_run_report(missing.stderr).unavailable.values()
    )
    assert not parse_perf_run_report(missing.stderr).counters


def test_perf_run_probe_mode(perf_run_native: Path) -> None:
    done = subprocess.run(
        [str(perf_run_native), "--probe", "-e", "task-clock=1:1", "-e", "no-such=99:0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0
    probe = parse_probe(done.stderr)
    assert probe.available == ("task-clock",)
    assert probe.unavailable["no-such"].startswith("ENOENT: no such event")


@pytest.mark.aarch64
def test_perf_run_static_aarch64_under_qemu_user_reports_enosys(tmp_path: Path) -> None:
    cc = shutil.which("aarch64-linux-gnu-gcc")
    qemu = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
    if cc is None or qemu is None:
        missing("aarch64-linux-gnu-gcc or qemu-aarch64 is not installed")
    out = tmp_path / "perf_run-aarch64"
    subprocess.run(compile_command(cc, out, static=True), check=True, timeout=180)
    from elftools.elf.elffile import ELFFile

    with out.open("rb") as fh:
        assert ELFFile(fh).header["e_machine"] == "EM_AARCH64"
    proc = subprocess.run(
        [qemu, str(out), "-e", "task-clock=1:1", "--", "/bin/sh", "-c", "exit 4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4
    report = parse_perf_run_report(proc.stderr)
    assert report.unavailable["task-clock"].startswith("ENOSYS") and not report.counters


# ---------------------------------------------------------------- a real deploy


@pytest.fixture
def pipeline_with_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the default pipeline; insert ProfilePasses before Assemble if it is not wired yet."""

    def build() -> PipelineRunner:
        stages = build_default_pipeline().stages
        names = [s.name for s in stages]
        if "ProfilePasses" not in names:
            stages.insert(names.index("Assemble"), ProfilePassesStage())
        return PipelineRunner(stages)

    monkeypatch.setattr(aidge_deploy.api, "build_default_pipeline", build)


@pytest.mark.slow
def test_deploy_counts_software_events_of_a_real_export(
    export_factory, pipeline_with_counters
) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark")
    result = aidge_deploy.deploy(
        artifact, DeployConfig(counters=("task-clock", "page-faults", "instructions"))
    )
    task = result.metric("task-clock")
    faults = result.metric("page-faults")
    assert task is not None and task.value is not None and task.value > 0 and task.unit == "ns"
    assert faults is not None and faults.value is not None and faults.value > 0
    assert task.provenance is Provenance.HOST
    assert "per inference" in task.description and "12 executed inferences" in task.description
    instructions = result.metric("instructions")
    assert instructions is not None
    if not _hardware_events_supported():
        assert instructions.value is None and instructions.unavailable_reason
        assert "ENOENT" in instructions.unavailable_reason
    assert "ProfilePasses" in result.stage_durations_ms
    logs = os.listdir(result.log_path.parent) if result.log_path else []
    assert any(name.startswith("counters-0-") for name in logs)


@pytest.mark.slow
def test_deploy_typo_in_counters_is_a_config_error(export_factory, pipeline_with_counters) -> None:  # type: ignore[no-untyped-def]
    from aidge_deploy.errors import ConfigError

    with pytest.raises(ConfigError, match="Did you mean 'task-clock'"):
        aidge_deploy.deploy(export_factory("benchmark"), DeployConfig(counters=("task-clok",)))


def _report(enabled: int, running: int, counters: dict[str, int], unavailable: dict[str, str]):  # type: ignore[no-untyped-def]
    return PerfRunReport(
        exit_code=0, signal=None, peak_rss_bytes=0, user_s=0.0, system_s=0.0, wall_s=0.0,
        time_enabled_ns=enabled, time_running_ns=running,
        counters=counters, unavailable=unavailable,
    )  # fmt: skip


def test_multiplexed_reading_is_scaled_and_an_unscheduled_one_is_not_a_zero() -> None:
    half = _report(1000, 250, {"cycles": 100}, {})
    assert half.scaled("cycles") == pytest.approx(400.0)
    assert half.running_ratio == pytest.approx(0.25)
    figures = pass_figures(half, ["cycles"], 4, "x")
    assert figures.totals == {"cycles": pytest.approx(100.0)}
    assert figures.running_ratio == {"cycles": pytest.approx(0.25)}
    # never scheduled: the launcher lists the counter unavailable; nothing is scaled or made up
    never = _report(1000, 0, {}, {"cycles": "NOTSCHED: never scheduled on the PMU"})
    assert never.scaled("cycles") is None and never.running_ratio is None
    figures = pass_figures(never, ["cycles"], 4, "x")
    assert figures.unavailable == {"cycles": "NOTSCHED: never scheduled on the PMU"}
    assert not figures.running_ratio


def test_launcher_reports_never_scheduled_counters_as_unavailable(tmp_path: Path) -> None:
    """perf_run.c: a group enabled but never on the PMU has no count and no ratio."""
    source = perf_run_source().read_text()
    assert '"NOTSCHED"' in source and "never_scheduled" in source
