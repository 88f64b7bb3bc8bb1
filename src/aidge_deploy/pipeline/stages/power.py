"""The power stages of the flat pipeline (profiling pipeline seed), no-ops without ``--power``.

EnsureBoardPowered opens the monitor early (a Joulescope powering the board closes its
relay before anything is flashed). After the profile phase, PlanPowerRun takes the clean
per-inference latency and picks N so the window lasts long enough for the monitor (seconds
and samples); BuildPowerFirmware / FlashPowerFirmware make and load the BSP's power variant
where the target has one; CapturePower arms the monitor, runs the gated window and reads
the capture; CollectPowerTerminal reads the target's record after the gate (N verified),
closes the monitor and settles the validity of the figures. There is no power-only mode:
the clean timing of the profile run is the denominator N is planned from and checked with.
A capture recorded elsewhere (``jls:``) runs nothing: its N is the capture's own, and this
board's clean latency chooses its window.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path

from aidge_deploy.errors import CaptureError, ConfigError, InternalError
from aidge_deploy.pipeline.context import PipelineContext, ProgressKind
from aidge_deploy.power.capability import PowerCapableTarget, PowerRun, clean_latency
from aidge_deploy.power.checks import capture_issue, window_issues
from aidge_deploy.power.monitors import make_monitor
from aidge_deploy.power.protocol import GateKind, WindowRequest
from aidge_deploy.power.result import PowerPlan, PowerResult
from aidge_deploy.profiling.validity import MIN_POWER_WINDOW_SAMPLES, Issue
from aidge_deploy.results import Provenance
from aidge_deploy.targetcaps import power_target, target_caps
from aidge_deploy.targetspec import PowerAbility

log = logging.getLogger("aidge_deploy")

#: default minimum window per gate kind (s): sampled monitors want seconds (edge error
#: P x dt small against N x E), a model has no edge error and only needs whole inferences
DEFAULT_MIN_WINDOW_S = {GateKind.SIGNAL: 5.0, GateKind.HOST: 5.0, GateKind.BOUNDARY: 0.01}
#: at least this many samples inside the window (the validity minimum)
MIN_WINDOW_SAMPLES = MIN_POWER_WINDOW_SAMPLES
#: samples' worth of time the window is planned longer than ``MIN_WINDOW_SAMPLES`` needs:
#: a read that comes late (a busy machine, an SSH round trip) at either edge of the window
#: falls outside it, and a window planned for exactly 50 samples then held 49
SAMPLE_MARGIN = 2
#: a plan needing more repeats than this is refused (the program is far too short)
MAX_REPEATS = 100_000


def _power_target(ctx: PipelineContext) -> PowerCapableTarget:
    target = power_target(ctx.resolved_target)
    if target is None:
        raise InternalError(
            f"Target {ctx.resolved_target_name} cannot run a power window (Preflight let it pass)"
        )
    return target


class _PowerStage:
    """A power stage: a no-op unless ``config.power`` asks for a monitor."""

    name = ""

    def should_skip(self, ctx: PipelineContext) -> bool:
        return ctx.config.power is None


class EnsureBoardPoweredStage(_PowerStage):
    """Open the monitor before the board is touched (it may be what powers the board)."""

    name = "EnsureBoardPowered"

    def run(self, ctx: PipelineContext) -> None:
        monitor = make_monitor(ctx.config, ctx.resolved_target, target_caps(ctx.resolved_target))
        monitor.open()
        ctx.power_monitor = monitor


def planned_window_s(min_window_s: float, sample_rate_hz: float | None) -> float:
    """The window a power run is planned to fill: ``min_window_s``, and long enough for
    ``MIN_WINDOW_SAMPLES`` samples of a sampling monitor with ``SAMPLE_MARGIN`` to spare."""
    if not sample_rate_hz:
        return min_window_s
    return max(min_window_s, (MIN_WINDOW_SAMPLES + SAMPLE_MARGIN) / sample_rate_hz)


def _capture_plan(ctx: PipelineContext) -> PowerPlan:
    """A capture recorded elsewhere: N is the capture's (given or recorded), never planned;
    the clean latency of this board's profile run chooses its window."""
    target = ctx.resolved_target
    monitor = ctx.opened_power_monitor
    given = ctx.config.power_inferences
    n = monitor.recorded_inferences(given)
    latency_s, provenance, resolution_s = clean_latency(
        target, ctx.prepared_context, ctx.parsed_output
    )
    rule = target_caps(target).power_window
    origin = "given: --power-inferences" if given is not None else "recorded in the capture"
    return PowerPlan(
        inferences=n,
        repeats=1,
        inferences_per_repeat=n,
        clean_latency_s=latency_s,
        clean_latency_provenance=provenance,
        clean_latency_resolution_s=resolution_s,
        min_window_s=ctx.config.power_window_s or 0.0,
        min_samples=MIN_WINDOW_SAMPLES,
        basis=f"N = {n} inferences in the capture's window ({origin}); window chosen by N x "
        f"clean latency {latency_s * 1e3:.6g} ms ({provenance.value})",
        inferences_from=origin,
        inferences_provenance=Provenance.STATIC,
        window_rule=rule,
    )


class PlanPowerRunStage(_PowerStage):
    name = "PlanPowerRun"

    def run(self, ctx: PipelineContext) -> None:
        monitor = ctx.opened_power_monitor
        caps = monitor.capabilities
        if caps.recorded_elsewhere:
            ctx.power_plan = _capture_plan(ctx)
            ctx.report(self.name, ProgressKind.STATUS, ctx.power_plan.basis)
            return
        target = _power_target(ctx)
        latency_s, provenance, resolution_s = target.power_clean_latency(
            ctx.prepared_context, ctx.parsed_output
        )
        per_repeat = target.power_inferences_per_repeat(ctx.prepared_context)
        min_window = ctx.config.power_window_s or DEFAULT_MIN_WINDOW_S[caps.gate]
        min_samples = MIN_WINDOW_SAMPLES if caps.sample_rate_hz else 0
        wanted_s = planned_window_s(min_window, caps.sample_rate_hz)
        repeat_s = target.power_repeat_duration(ctx.prepared_context, ctx.built, ctx.executed)
        if repeat_s is not None and repeat_s > 0:
            # at least these; the target runs more if faster runs leave the window short
            repeats = max(1, math.ceil(wanted_s / repeat_s))
        else:
            inferences = max(1, math.ceil(wanted_s / latency_s)) if latency_s > 0 else 1
            repeats = max(1, math.ceil(inferences / per_repeat))
        if repeats > MAX_REPEATS:
            raise ConfigError(
                f"A {wanted_s:g} s power window needs {repeats} repeats of the program",
                hint=f"Export more iterations per run, or ask a shorter window (--power-window); "
                f"at most {MAX_REPEATS} repeats are planned.",
            )
        runs_programs = repeat_s is not None and repeat_s > 0
        ctx.power_plan = PowerPlan(
            inferences=repeats * per_repeat,
            repeats=repeats,
            inferences_per_repeat=per_repeat,
            clean_latency_s=latency_s,
            clean_latency_provenance=provenance,
            clean_latency_resolution_s=resolution_s,
            min_window_s=min_window,
            min_samples=min_samples,
            repeat_duration_s=repeat_s if runs_programs else None,
            target_window_s=wanted_s,
            basis=f"N = {repeats} repeats x {per_repeat} inferences for a window of at least "
            f"{wanted_s:g} s"
            + (
                f" ({repeat_s:.4g} s per program run, start-up included)"
                if repeat_s
                else f" (clean latency {latency_s * 1e3:.6g} ms, {provenance.value})"
            ),
            inferences_from="counted: program runs in the window x inferences per run"
            if runs_programs
            else "planned: built into the power firmware",
            inferences_provenance=Provenance.HOST if runs_programs else Provenance.STATIC,
            window_rule=target.power_window_rule,
        )
        ctx.report(self.name, ProgressKind.STATUS, ctx.power_plan.basis)


class BuildPowerFirmwareStage(_PowerStage):
    name = "BuildPowerFirmware"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return ctx.config.power is None or not _has_variant(ctx)

    def run(self, ctx: PipelineContext) -> None:
        target = _power_target(ctx)
        ctx.power_firmware = target.build_power_firmware(
            ctx.prepared_context, ctx.built, ctx.planned_power_run
        )


class FlashPowerFirmwareStage(_PowerStage):
    name = "FlashPowerFirmware"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return ctx.config.power is None or not _has_variant(ctx)

    def run(self, ctx: PipelineContext) -> None:
        target = _power_target(ctx)
        firmware = ctx.power_firmware_build
        _arm(ctx, firmware.artifact_path)
        target.flash_power_firmware(ctx.prepared_context, firmware, ctx.opened_power_monitor)


class CapturePowerStage(_PowerStage):
    name = "CapturePower"

    def run(self, ctx: PipelineContext) -> None:
        if not _runs_window(ctx):  # a model of the clean timing, or a recorded capture
            _arm(ctx, None)
            ctx.power_run = PowerRun(0.0, 0.0, "")
            return
        target = _power_target(ctx)
        monitor = ctx.opened_power_monitor
        plan = ctx.planned_power_run
        build = ctx.power_firmware if ctx.power_firmware is not None else ctx.built
        if not target.power_variant:
            _arm(ctx, None)
        ctx.report(
            self.name, ProgressKind.STATUS, f"{plan.inferences} inferences, {monitor.source}"
        )
        ctx.power_run = target.run_power_window(ctx.prepared_context, build, plan, monitor)


class CollectPowerTerminalStage(_PowerStage):
    name = "CollectPowerTerminal"

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        monitor = ctx.opened_power_monitor
        plan = ctx.planned_power_run
        run = ctx.completed_power_run
        if run.repeats is not None and run.repeats != plan.repeats:
            # the target ran more repeats to fill the planned window: N is what ran
            plan = replace(
                plan,
                repeats=run.repeats,
                inferences=run.repeats * plan.inferences_per_repeat,
                basis=f"{plan.basis}; {run.repeats} repeats ran to fill the window",
            )
            ctx.power_plan = plan
        terminal = None
        window = power_target(target)
        if window is not None:
            terminal = window.parse_power_terminal(run, plan)
        monitor.set_host_window(run.started_s, run.ended_s)
        capture = None
        reason = None
        issues: list[Issue] = []
        gate = None
        try:
            capture = monitor.capture()
        except CaptureError as exc:
            reason = exc.message
            issues.append(capture_issue(exc))
            gate = getattr(exc, "gate", None)
            log.warning("power capture failed: %s", exc.message)
        finally:
            monitor.close()
            ctx.power_monitor_closed = True
        if capture is not None:
            expected = target_caps(target).power_variant and _runs_window(ctx)
            issues += window_issues(plan, capture, terminal, expected)
        layer_energy = {}
        if capture is not None and capture.layer_energy_j:
            layer_energy = {k: v * 1e6 for k, v in capture.layer_energy_j.items()}
        raw = [] if capture is None else list(capture.raw_files)
        raw += [p for p in run.raw_files if p.is_file()]
        if _runs_window(ctx) and run.log_path is not None and Path(run.log_path).is_file():
            raw.append(Path(run.log_path))
        ctx.power_result = PowerResult(
            source=str(monitor.source),
            capabilities=monitor.capabilities,
            plan=plan,
            capture=capture,
            unavailable_reason=reason,
            terminal=terminal,
            issues=tuple(issues),
            layer_energy_uj=layer_energy,
            window_wall_s=(run.ended_s - run.started_s) if _runs_window(ctx) else None,
            gate=gate,
            raw_files=tuple(raw),
        )


def _has_variant(ctx: PipelineContext) -> bool:
    target = ctx.target
    return target is not None and target_caps(target).power_variant and _runs_window(ctx)


def _runs_window(ctx: PipelineContext) -> bool:
    """False for monitors that are models of the clean timing (reference) and for captures
    recorded elsewhere (jls:): no run needed."""
    monitor = ctx.power_monitor
    return monitor is None or monitor.capabilities.needs_window_run


def _arm(ctx: PipelineContext, firmware: object) -> None:
    plan = ctx.planned_power_run
    parsed = ctx.parsed_output
    target = ctx.target
    layers = tuple(parsed.layer_cycles or parsed.layer_times_ms or {})
    caps = target_caps(target) if target is not None else None
    fixed = caps is None or caps.power is PowerAbility.NONE or caps.power_variant
    ctx.opened_power_monitor.arm(
        WindowRequest(
            inferences=plan.inferences,
            expected_duration_s=plan.inference_duration_s,
            resolution_s=plan.expected_resolution_s or 1e-9,
            work_dir=ctx.prepared_context.log_dir / "power",
            firmware=firmware if isinstance(firmware, Path) else None,
            layer_names=layers,
            window_rule=plan.window_rule,
            inferences_fixed=fixed,
            gate_min_pulse_s=ctx.config.power_gate_min_pulse_s,
            gate_max_dropout_s=ctx.config.power_gate_max_dropout_s,
        )
    )


__all__ = [
    "BuildPowerFirmwareStage",
    "CapturePowerStage",
    "CollectPowerTerminalStage",
    "EnsureBoardPoweredStage",
    "FlashPowerFirmwareStage",
    "PlanPowerRunStage",
]
