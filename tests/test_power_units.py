"""Power pieces that need no run: the source grammar, the window arithmetic, the energy
model, the figures with their provenance, validity codes, the reference monitor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import CaptureError, ConfigError
from aidge_deploy.power.analysis import WindowIntegrator, integrate_timed
from aidge_deploy.power.capability import RepeatedRunPower
from aidge_deploy.power.checks import window_issues
from aidge_deploy.power.energy_model import boards_with_models, energy_model_for
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.protocol import (
    GateKind,
    GateReport,
    MonitorCapabilities,
    MonitorIdentity,
    PowerCapture,
    PowerMonitor,
    WindowRequest,
)
from aidge_deploy.power.reference import NO_REFERENCE, ReferenceMonitor
from aidge_deploy.power.registry import parse_power_source
from aidge_deploy.power.result import PowerPlan, PowerResult, TerminalRecord
from aidge_deploy.power.source import PowerSource, PowerSourceKind
from aidge_deploy.profiling.validity import IssueCode
from aidge_deploy.results import DeployContext, Provenance


@pytest.mark.parametrize(
    ("text", "kind", "arg"),
    [
        ("emulated", PowerSourceKind.EMULATED, None),
        ("joulescope", PowerSourceKind.JOULESCOPE, None),
        ("joulescope:000415", PowerSourceKind.JOULESCOPE, "000415"),
        ("jls:/tmp/a:b.jls", PowerSourceKind.JLS, "/tmp/a:b.jls"),
        ("hwmon:VDD_IN", PowerSourceKind.HWMON, "VDD_IN"),
        ("RAPL", PowerSourceKind.RAPL, None),
    ],
)
def test_source_grammar(text: str, kind: PowerSourceKind, arg: str | None) -> None:
    assert parse_power_source(text) == PowerSource(kind, arg)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("joulscope", "Did you mean 'joulescope'"),
        ("jls", "needs a FILE"),
        ("jls:", "empty argument"),
        ("rapl:0", "takes no argument"),
        ("battery", "Unknown power source"),
    ],
)
def test_bad_sources_rejected_with_a_hint(text: str, match: str) -> None:
    """Checked with the run's config (the monitors' registry says what ``--power`` may
    name), before anything is built."""
    from aidge_deploy.configcheck import check_deploy_config

    with pytest.raises(ConfigError, match=match) as info:
        check_deploy_config(DeployConfig(target="host", power=text), "host")
    assert info.value.hint


def test_power_window_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="power_window_s"):
        DeployConfig(power="emulated", power_window_s=0)


def test_integrator_across_chunk_boundaries_and_other_pulses() -> None:
    rate = 1000
    power = np.full(5000, 0.5)
    power[1234:3456] = 2.0
    power[4000:4100] = 3.0  # another pulse of the gate: not idle, not the window
    integrator = WindowIntegrator(rate, len(power), (1234, 3456), [(1234, 3456), (4000, 4100)])
    for start in range(0, len(power), 777):  # chunks that cut the edges anywhere
        integrator.feed(power[start : start + 777])
    w = integrator.result(_gate_report())
    assert (w.start_index, w.end_index) == (1234, 3456)
    assert w.energy_j == pytest.approx(2.0 * 2222 / rate)
    assert w.idle_power_w == pytest.approx(0.5)


def test_integrator_refuses_missing_samples_inside_the_window_only() -> None:
    outside = WindowIntegrator(10.0, 8, (4, 8), [(4, 8)])
    outside.feed(np.array([1.0, np.nan, 1, 1, 2, 2, 2, 2]))  # a gap in the idle part
    assert outside.result(_gate_report()).idle_power_w == pytest.approx(1.0)
    inside = WindowIntegrator(10.0, 8, (0, 4), [(0, 4)])
    with pytest.raises(PowerCaptureError, match="NaN") as info:
        inside.feed(np.array([1.0, np.nan, 1, 1, 2, 2, 2, 2]))
    assert info.value.code is IssueCode.POWER_CAPTURE_FAILED


def _gate_report() -> GateReport:
    return GateReport("gpi[0]", 1000.0, 4e-3, 4e-3, "test", 2, 0, (), 0, (), 1, (), 0, None, "")


def test_integrate_timed_interpolates_the_edges() -> None:
    # constant 3 W sampled irregularly: exactly 3 J per second of window
    t = [0.0, 0.13, 0.5, 0.71, 1.4, 2.0]
    assert integrate_timed(t, [3.0] * 6, 0.2, 1.2) == pytest.approx(3.0)
    # a ramp P = t: energy over [0.5, 1.5] = (1.5^2 - 0.5^2) / 2
    t2 = np.linspace(0, 2, 21)
    assert integrate_timed(t2, t2, 0.5, 1.5) == pytest.approx(1.0)


def test_every_emulated_board_has_a_cited_model_on_one_time_base() -> None:
    """Energy prices the cycles the duration counts (instructions at CPI = 1 until the
    plugin estimates cycles) and the events on top, never events as extra cycles: energy
    over duration is the source's own average power, whatever the instruction mix."""
    from aidge_qemu_boards.boards import list_boards

    assert set(boards_with_models()) == {b.name for b in list_boards()}
    for board in boards_with_models():
        model = energy_model_for(board)
        assert model.sources and model.uncertainty_factor >= 2
        counts = {"instructions": 1000, "loads": 400, "stores": 150, "branches_taken": 90}
        events = sum(
            model.nj_per_event[cls] * counts[counter]
            for cls, counter in (
                ("load", "loads"),
                ("store", "stores"),
                ("branch_taken", "branches_taken"),
            )
        )
        per_cycle = model.run_current_ua_per_mhz * model.supply_v / 1000  # nJ
        assert model.energy_j(counts) == pytest.approx((per_cycle * 1000 + events) * 1e-9)
        assert model.time_base(counts).label == "instructions at CPI = 1"
        estimated = {**counts, "estimated_cycles": 1700}
        assert model.time_base(estimated).cycles == 1700  # the cycle model, once it counts
        assert model.energy_j(estimated) == pytest.approx((per_cycle * 1700 + events) * 1e-9)
    with pytest.raises(ConfigError, match="No energy model"):
        energy_model_for("stm32h7")


def _caps(
    gate: GateKind = GateKind.SIGNAL, prov: Provenance = Provenance.SILICON
) -> MonitorCapabilities:
    return MonitorCapabilities(("power",), 1000.0, gate, "gpi[0]", True, prov)


def _plan(n: int = 100, latency: float = 0.01) -> PowerPlan:
    return PowerPlan(n, 10, 10, latency, Provenance.SILICON, 1e-6, 0.5, 50, "test")


def _capture(energy: float = 0.5, duration: float = 1.0, **kw: object) -> PowerCapture:
    values: dict[str, object] = {
        "energy_j": energy,
        "duration_s": duration,
        "duration_resolution_s": 1e-3,
        "samples": 1000,
        "sample_rate_hz": 1000.0,
        "identity": MonitorIdentity("stand-in"),
        "provenance": Provenance.SILICON,
        "idle_power_w": 0.1,
    }
    values.update(kw)
    return PowerCapture(**values)  # type: ignore[arg-type]


def test_figures_have_units_provenance_and_reasons() -> None:
    result = PowerResult("jls:x", _caps(), _plan(), _capture())
    by = {m.name: m for m in result.metrics()}
    assert by["energy_per_inference"].value == pytest.approx(5000.0)  # 0.5 J / 100, in µJ
    assert by["energy_per_inference"].unit == "uJ"
    assert by["power_average"].value == pytest.approx(500.0) and by["power_average"].unit == "mW"
    assert by["power_idle"].value == pytest.approx(100.0)
    assert by["energy_active_per_inference"].value == pytest.approx((0.5 - 0.1) / 100 * 1e6)
    assert all(m.provenance is Provenance.SILICON for m in by.values())
    model = PowerResult(
        "emulated",
        _caps(GateKind.BOUNDARY, Provenance.ESTIMATED),
        _plan(),
        _capture(
            idle_power_w=None,
            sample_rate_hz=None,
            uncertainty_factor=10.0,
            provenance=Provenance.ESTIMATED,
        ),
    )
    by = {m.name: m for m in model.metrics()}
    assert by["power_idle"].value is None and "idle" in (by["power_idle"].unavailable_reason or "")
    assert "x/÷10" in by["energy_per_inference"].description
    assert by["power_samples"].value is None and by["power_samples"].unavailable_reason
    missing = PowerResult("reference", _caps(), _plan(), None, unavailable_reason=NO_REFERENCE)
    assert all(
        m.value is None and m.unavailable_reason == NO_REFERENCE
        for m in missing.metrics()
        if m.name != "power_window_expected"
    )


def test_validity_codes() -> None:
    plan = _plan(n=100, latency=0.01)  # expect 1.0 s, at least 0.5 s and 50 samples
    codes = lambda cap, term=None, exp=False: {  # noqa: E731
        i.code for i in window_issues(plan, cap, term, exp)
    }
    assert codes(_capture()) == set()
    assert IssueCode.POWER_WINDOW_MISMATCH in codes(_capture(duration=1.2))
    assert IssueCode.POWER_WINDOW_SHORT in codes(_capture(duration=0.3))
    assert IssueCode.POWER_SAMPLES_TOO_FEW in codes(_capture(samples=10))
    assert IssueCode.POWER_SAMPLES_TOO_FEW not in codes(_capture(samples=50))
    assert IssueCode.POWER_SATURATED in codes(_capture(saturated=True))
    assert IssueCode.POWER_TERMINAL_MISMATCH in codes(_capture(), None, True)
    wrong = TerminalRecord(10, 90, None, Provenance.SILICON, "AIDGE_POWER_TERMINAL ...")
    assert IssueCode.POWER_TERMINAL_MISMATCH in codes(_capture(), wrong, True)
    assert IssueCode.POWER_TERMINAL_MISMATCH in codes(_capture(inferences_seen=99))
    assert IssueCode.POWER_GATE_MISSING in codes(_capture(gate_seen=False))
    assert IssueCode.POWER_TERMINAL_MISMATCH in codes(_capture(recorded_inferences=99))


def test_an_idle_baseline_above_the_window_is_noise_not_a_negative_energy() -> None:
    noisy = _capture(energy=0.5, duration=1.0, idle_power_w=0.52)  # window mean 0.5 W
    issues = window_issues(_plan(), noisy, None, False)
    assert [i.code for i in issues] == [IssueCode.POWER_IDLE_ABOVE_WINDOW]
    assert "idle baseline above the window's mean (noise)" in issues[0].message
    by = {m.name: m for m in PowerResult("rapl", _caps(), _plan(), noisy).metrics()}
    active = by["energy_active_per_inference"]
    assert active.value is None
    assert active.unavailable_reason == "idle baseline above the window's mean (noise)"
    assert by["energy_per_inference"].value == pytest.approx(5000.0)  # still published


def test_reference_monitor(tmp_path: Path) -> None:
    from aidge_core.hw_model import get_target_by_name

    stm32 = get_target_by_name("stm32f413")
    monitor = ReferenceMonitor(parse_power_source("reference"), "stm32f413", stm32)
    monitor.arm(WindowRequest(100, 0.5, tmp_path, resolution_s=1e-4))
    capture = monitor.capture()
    assert capture.provenance is Provenance.ESTIMATED
    assert capture.energy_j == pytest.approx(25.4e-3 * 3.3 * 0.5)
    from aidge_qemu_boards.hw_targets import MPS2_AN386

    none = ReferenceMonitor(parse_power_source("reference"), "mps2-an386", MPS2_AN386())
    none.arm(WindowRequest(100, 0.5, tmp_path))
    with pytest.raises(CaptureError, match=NO_REFERENCE):
        none.capture()
    # which Preflight refuses before anything is built
    from aidge_deploy.power.monitors import preflight_checks
    from aidge_deploy.registry import get_deploy_target_class
    from aidge_deploy.targetcaps import pair_caps

    config = DeployConfig(target="mps2-an386", power="reference")
    (check,) = preflight_checks(
        config, get_deploy_target_class("mps2-an386", "local"), pair_caps("mps2-an386", "local")
    )
    assert (
        not check.ok and NO_REFERENCE in check.detail and "--power emulated" in (check.hint or "")
    )


def test_doctor_lists_the_monitors_found(tmp_path: Path) -> None:
    """On stand-in sysfs trees (this machine has no sensor) doctor finds hwmon and RAPL."""
    from aidge_deploy.power.monitors import discover_monitors
    from aidge_deploy.power.registry import ThisMachine
    from power_support import ina226_tree, rapl_tree

    ina226_tree(tmp_path)
    rapl_tree(tmp_path, energy_uj=5, max_range_uj=100)
    found = {c.name: c for c in discover_monitors(ThisMachine(sysfs_root=tmp_path))}
    assert found["hwmon:ina226"].ok and "power of ina226" in found["hwmon:ina226"].detail
    assert found["rapl"].ok and found["rapl"].detail == "package-0"
    assert found["emulated"].ok and found["pyjls"].ok
    assert not found["joulescope"].ok and found["joulescope"].hint  # none attached here


def test_doctor_command_shows_power_monitors() -> None:
    from typer.testing import CliRunner

    from aidge_deploy.cli.main import app

    res = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert "Power monitors (--power SOURCE; optional)" in res.output
    assert "joulescope" in res.output and "No Joulescope found" in res.output


def test_repeated_program_runs_are_not_billed_for_their_start_ups() -> None:
    """A host-timed window of whole program runs (host, SSH boards) holds start-ups: it is
    expected to outlast N x clean latency (no warning then), only a window too short to
    hold the N inferences is flagged, and energy per inference is the window's mean power
    x the clean latency, not the window's energy over N."""
    # 10 runs of 10 inferences at 10 ms, each run 0.5 s with its start-up: a 5 s window
    plan = PowerPlan(100, 10, 10, 0.01, Provenance.HOST, 1e-6, 5.0, 50, "test", 0.5)
    assert plan.expected_duration_s == pytest.approx(5.0)
    assert plan.inference_duration_s == pytest.approx(1.0)
    healthy = _capture(energy=10.0, duration=5.2, provenance=Provenance.HOST, idle_power_w=1.0)
    assert window_issues(plan, healthy, None, False) == []
    too_short = _capture(energy=1.0, duration=0.8, provenance=Provenance.HOST)
    codes = [i.code for i in window_issues(plan, too_short, None, False)]
    assert IssueCode.POWER_WINDOW_MISMATCH in codes and IssueCode.POWER_WINDOW_SHORT in codes
    by = {m.name: m for m in PowerResult("rapl", _caps(GateKind.HOST), plan, healthy).metrics()}
    # 10 J / 5.2 s = 1.923 W; x 10 ms = 19.23 mJ per inference (10 J / 100 would be 100 mJ)
    assert by["energy_per_inference"].value == pytest.approx(10.0 / 5.2 * 0.01 * 1e6)
    assert "start-ups included" in by["energy_per_inference"].description
    assert by["energy_active_per_inference"].value == pytest.approx((10.0 / 5.2 - 1.0) * 0.01 * 1e6)
    assert by["power_window_expected"].value == pytest.approx(5.0)
    assert by["power_window_expected"].provenance is Provenance.HOST
    # the same window gated on the inferences alone (a power variant) is a mismatch
    gated = PowerPlan(100, 10, 10, 0.01, Provenance.HOST, 1e-6, 0.5, 50, "test")
    codes = [i.code for i in window_issues(gated, healthy, None, False)]
    assert codes == [IssueCode.POWER_WINDOW_MISMATCH]


class _CountingMonitor(PowerMonitor):
    """A stand-in monitor that has taken one sample per program run (or cannot say)."""

    def __init__(self, runs: list[int], says: bool) -> None:
        super().__init__(parse_power_source("rapl"))
        self.runs, self.says = runs, says

    @property
    def capabilities(self) -> MonitorCapabilities:
        return _caps(GateKind.HOST, Provenance.HOST)

    def arm(self, request: WindowRequest) -> None:
        pass

    def capture(self) -> PowerCapture:
        return _capture()

    def samples_since(self, started_s: float) -> int | None:
        return len(self.runs) if self.says else None


class _Program(RepeatedRunPower):
    """A target whose program run is a call (each counted)."""

    def __init__(self) -> None:
        self.runs: list[int] = []

    def execute(self, ctx: object, build: object) -> None:
        self.runs.append(1)


@pytest.mark.parametrize(
    ("says", "min_samples", "runs"), [(True, 5, 5), (False, 5, 2), (True, 99, 8)]
)
def test_a_host_window_goes_on_until_it_holds_its_samples(
    says: bool, min_samples: int, runs: int, tmp_path: Path
) -> None:
    """Sensor reads can come late (a busy machine, an SSH round trip): the window of repeated
    program runs goes on until the monitor has its planned samples, within the repeats'
    limit (4 x planned); a monitor that cannot count stops at the planned repeats."""
    import dataclasses

    program = _Program()
    plan = dataclasses.replace(_plan(), repeats=2, min_samples=min_samples, target_window_s=0.0)
    ctx = DeployContext(None, tmp_path, "host", "local", tmp_path, tmp_path / "logs")  # type: ignore[arg-type]
    run = program.run_power_window(
        ctx,
        None,  # type: ignore[arg-type]
        plan,
        _CountingMonitor(program.runs, says),
    )
    assert run.repeats == len(program.runs) == runs
    assert (tmp_path / "logs" / "power").is_dir()  # the window's runs log there


class _ClockMonitor(_CountingMonitor):
    """A stand-in monitor sampling at 100 Hz of the host's monotonic clock."""

    def samples_since(self, started_s: float) -> int | None:
        import time

        return int((time.monotonic() - started_s) * 100)


class _FastProgram(_Program):
    """A program whose window runs take 5 ms, far faster than the runs the plan timed."""

    def execute(self, ctx: object, build: object) -> None:
        import time

        time.sleep(0.005)
        super().execute(ctx, build)


def test_fast_window_runs_go_past_the_repeat_limit_until_the_window_holds_its_samples(
    tmp_path: Path,
) -> None:
    """On a loaded machine the profile run that planned the repeats can be 20x slower than
    the window's runs: one planned repeat (limit 4 runs) would give 20 ms, 2 samples. The
    window goes on until its samples are in (20 at 100 Hz), within 4 x its planned duration."""
    import dataclasses

    program = _FastProgram()
    plan = dataclasses.replace(_plan(), repeats=1, min_samples=20, target_window_s=0.1)
    ctx = DeployContext(None, tmp_path, "host", "local", tmp_path, tmp_path / "logs")  # type: ignore[arg-type]
    run = program.run_power_window(ctx, None, plan, _ClockMonitor(program.runs, True))  # type: ignore[arg-type]
    assert run.repeats == len(program.runs) > 4  # past the count limit
    assert run.ended_s - run.started_s >= 0.2  # 20 samples at 100 Hz: the samples are in


def test_a_window_whose_samples_never_come_stops_at_four_times_its_planned_duration(
    tmp_path: Path,
) -> None:
    import dataclasses

    program = _FastProgram()
    plan = dataclasses.replace(_plan(), repeats=1, min_samples=10**6, target_window_s=0.05)
    ctx = DeployContext(None, tmp_path, "host", "local", tmp_path, tmp_path / "logs")  # type: ignore[arg-type]
    run = program.run_power_window(ctx, None, plan, _ClockMonitor(program.runs, True))  # type: ignore[arg-type]
    # it stops (a sensor that never gives its samples does not hold the run forever), once
    # 4 x 50 ms have passed and the 4 runs are done
    assert run.ended_s - run.started_s >= 0.2 and run.repeats is not None
