"""What a power run produced: the plan, the capture, the terminal record, and the figures.

``PowerResult.metrics()`` turns it into typed ``Metric``s (unit + provenance) for
``DeployResult.measurements``; a figure the monitor cannot give is "unavailable (reason)",
never 0. Provenance follows the monitor: an instrument on the board is silicon, a sensor of
this machine host, a model estimated (with its uncertainty factor in the description).
``as_dict()`` is the ``power`` block of ``summary.json``: every number in it is a figure
with its unit and provenance (``metrics.figure`` / ``metrics.series``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aidge_deploy.metrics import Metric, Provenance, figure, series
from aidge_deploy.power.protocol import GateReport, MonitorCapabilities, PowerCapture, WindowRule

#: step of the host clock that times program runs (``time.monotonic``)
MONOTONIC_RESOLUTION_S = time.get_clock_info("monotonic").resolution
#: the figure published instead of a negative energy above idle
IDLE_ABOVE_WINDOW = "idle baseline above the window's mean (noise)"
#: an idle baseline above the window's mean by less than this (relative) is rounding
_ROUNDING = 1e-9


def idle_above_window(capture: PowerCapture) -> bool:
    """The idle baseline is above the window's mean power (beyond float rounding): the
    monitor's noise is larger than the inferences' own power."""
    idle = capture.idle_power_w
    if idle is None or capture.duration_s <= 0:
        return False
    return idle > capture.energy_j / capture.duration_s * (1 + _ROUNDING)


class PowerIssue(Protocol):
    """A validity finding (``profiling.validity.Issue``; typed structurally so that
    ``results`` -> ``power.result`` does not import the validity registry back)."""

    @property
    def message(self) -> str: ...

    @property
    def severity(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PowerPlan:
    """PlanPowerRun's output: how many inferences the gated window holds, and why."""

    inferences: int  # N
    repeats: int  # calls of the firmware entry point / program runs inside the window
    inferences_per_repeat: int
    #: per inference, from the profile phase (None: unknown, a capture analysed alone)
    clean_latency_s: float | None
    clean_latency_provenance: Provenance | None
    #: resolution (s) of the timer behind the clean latency, per inference
    clean_latency_resolution_s: float | None
    min_window_s: float
    min_samples: int
    basis: str
    #: host wall time (s) of one repeat when a repeat is a whole program run (start-up and
    #: I/O included: host, Linux boards), measured on the profile run; None when the window
    #: holds nothing but the inferences (power variant, models, captures)
    repeat_duration_s: float | None = None
    #: the window the plan aims at (s): at least ``min_window_s`` and long enough for
    #: ``min_samples`` at the monitor's rate; repeated program runs go on until it is reached
    target_window_s: float = 0.0
    #: where N comes from, and what it is: built into the power firmware (static), counted
    #: by the host running the program (host), given by the user or recorded in a capture
    inferences_from: str = "planned: built into the power firmware"
    inferences_provenance: Provenance = Provenance.STATIC
    #: what a window consistent with N x clean latency is (``AT_LEAST`` when it may hold
    #: more than the inferences: program start-ups)
    window_rule: WindowRule = WindowRule.MATCH

    @property
    def inference_duration_s(self) -> float | None:
        """N x clean latency: the time the window spends inferring."""
        if self.clean_latency_s is None:
            return None
        return self.inferences * self.clean_latency_s

    @property
    def expected_duration_s(self) -> float | None:
        """What the window should last: N x clean latency, or the repeats' wall time when
        each repeat is a program run (its start-up is in the host-timed window too)."""
        if self.repeat_duration_s is not None:
            return self.repeats * self.repeat_duration_s
        return self.inference_duration_s

    @property
    def expected_resolution_s(self) -> float | None:
        if self.repeat_duration_s is not None:
            return self.repeats * MONOTONIC_RESOLUTION_S
        if self.clean_latency_resolution_s is None:
            return None
        return self.inferences * self.clean_latency_resolution_s

    def as_dict(self) -> dict[str, Any]:
        latency_prov = self.clean_latency_provenance or Provenance.STATIC
        no_latency = "no clean latency (a capture analysed without its board's profile run)"

        def seconds(value: float | None, prov: Provenance, res: float | None) -> dict[str, Any]:
            return figure(value, "s", prov, res, unavailable_reason=no_latency)

        n_prov = self.inferences_provenance
        return {
            "inferences": figure(self.inferences, "inferences", n_prov),
            "repeats": figure(self.repeats, "repeats", n_prov),
            "inferences_per_repeat": figure(
                self.inferences_per_repeat, "inferences", Provenance.STATIC
            ),
            "inferences_from": self.inferences_from,
            "clean_latency": seconds(
                self.clean_latency_s, latency_prov, self.clean_latency_resolution_s
            ),
            "min_window": figure(self.min_window_s, "s", Provenance.STATIC),
            "min_samples": figure(self.min_samples, "samples", Provenance.STATIC),
            "repeat_duration": None
            if self.repeat_duration_s is None
            else figure(self.repeat_duration_s, "s", Provenance.HOST, MONOTONIC_RESOLUTION_S),
            "target_window": figure(self.target_window_s, "s", Provenance.STATIC),
            "inference_duration": seconds(
                self.inference_duration_s,
                latency_prov,
                None
                if self.clean_latency_resolution_s is None
                else self.inferences * self.clean_latency_resolution_s,
            ),
            "expected_duration": seconds(
                self.expected_duration_s,
                Provenance.HOST if self.repeat_duration_s is not None else latency_prov,
                self.expected_resolution_s,
            ),
            "window_rule": self.window_rule.value,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class TerminalRecord:
    """The target's one record after the gate closed (CollectPowerTerminal)."""

    repeats: int | None
    inferences: int | None
    #: the target's own clock over the window, when it is a clock of the target (None on
    #: an emulator: QEMU's virtual time is not a time base of any model)
    elapsed_s: float | None
    #: what printed the record: the board (silicon) or the emulated firmware (emulated)
    provenance: Provenance
    raw: str
    elapsed_resolution_s: float | None = None
    elapsed_unavailable_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        prov = self.provenance
        return {
            "repeats": figure(self.repeats, "repeats", prov, unavailable_reason="not printed"),
            "inferences": figure(
                self.inferences, "inferences", prov, unavailable_reason="not printed"
            ),
            "elapsed": figure(
                self.elapsed_s,
                "s",
                prov,
                self.elapsed_resolution_s,
                unavailable_reason=self.elapsed_unavailable_reason,
            ),
            "raw": self.raw,
        }


def gate_dict(gate: GateReport, prov: Provenance) -> dict[str, Any]:
    """The gate detector's findings, every time and count with its unit."""

    def pulses(items: Any) -> dict[str, Any]:
        return {
            "start": series([p.start_s for p in items], "s", prov),
            "width": series([p.width_s for p in items], "s", prov),
        }

    static = Provenance.STATIC
    return {
        "input": gate.gate_input,
        "sample_rate": figure(gate.sample_rate_hz, "Hz", prov),
        "min_pulse": figure(gate.min_pulse_s, "s", static),
        "max_dropout": figure(gate.max_dropout_s, "s", static),
        "settings_basis": gate.settings_basis,
        "edges": figure(gate.edges, "edges", prov),
        "glitches": figure(gate.glitch_count, "pulses", prov),
        "glitches_listed": pulses(gate.glitches),
        "dropouts": figure(gate.dropout_count, "gaps", prov),
        "dropouts_listed": pulses(gate.dropouts),
        "pulses": figure(gate.pulse_count, "pulses", prov),
        "pulses_listed": pulses(gate.pulses),
        "chosen_pulse": gate.chosen,
        "expected": figure(
            gate.expected_s, "s", static, unavailable_reason="no clean latency to choose by"
        ),
        "selection": gate.selection,
        "unclosed_at": None
        if gate.unclosed_at_s is None
        else figure(gate.unclosed_at_s, "s", prov),
        "started_high": gate.started_high,
    }


@dataclass(frozen=True)
class PowerResult:
    """Everything the power stages established, as the result, the bundle and reports see it."""

    source: str
    capabilities: MonitorCapabilities
    plan: PowerPlan
    capture: PowerCapture | None
    #: why there is no capture (monitor failed, gate missing...): figures unavailable
    unavailable_reason: str | None = None
    terminal: TerminalRecord | None = None
    issues: tuple[PowerIssue, ...] = ()
    layer_energy_uj: Mapping[str, float] = field(default_factory=dict)
    #: host wall time of the run holding the window (s); None when no run was needed
    window_wall_s: float | None = None
    #: what the gate detector found (also when it found no window)
    gate: GateReport | None = None
    #: the raw data of the window: the capture's files and the window run's own log
    raw_files: tuple[Path, ...] = ()

    @property
    def provenance(self) -> Provenance:
        return self.capture.provenance if self.capture else self.capabilities.provenance

    @property
    def invalid(self) -> bool:
        """An issue of error severity: the power figures must not be trusted."""
        return any(str(i.severity) == "error" for i in self.issues)

    @property
    def invalid_reason(self) -> str | None:
        """Why the capture is invalid (its error issues, by code), None when it is valid:
        the reason every figure of the window is published as unavailable."""
        errors = [i.as_dict() for i in self.issues if str(i.severity) == "error"]
        if not errors:
            return None
        said = "; ".join(f"{e['code']}: {e['message']}" for e in errors)
        return f"invalid capture, {said}"

    @property
    def window(self) -> PowerCapture | None:
        """The capture whose figures are published: none of an invalid one (its figures
        would be labelled with the monitor's provenance while they are not what they say)."""
        return None if self.invalid else self.capture

    @property
    def published_layer_energy_uj(self) -> Mapping[str, float]:
        """The energy per layer, none of an invalid capture."""
        return {} if self.invalid else self.layer_energy_uj

    @property
    def _why_unavailable(self) -> str | None:
        return self.invalid_reason or self.unavailable_reason

    @property
    def inferences(self) -> int:
        if self.terminal is not None and self.terminal.inferences:
            return self.terminal.inferences
        return self.plan.inferences

    @property
    def energy_per_inference_uj(self) -> float | None:
        """Window energy ÷ N; when the window also holds program start-ups (repeated runs),
        the mean window power x the clean latency, so start-ups are not billed to inferences."""
        cap = self.window
        if cap is None or self.inferences <= 0:
            return None
        latency = self.plan.clean_latency_s
        if self.plan.repeat_duration_s is not None and latency is not None:
            if cap.duration_s <= 0:
                return None
            return cap.energy_j / cap.duration_s * latency * 1e6
        return cap.energy_j / self.inferences * 1e6

    def _energy_basis(self) -> str:
        latency = self.plan.clean_latency_s
        if self.plan.repeat_duration_s is not None and latency is not None:
            return (
                f"mean window power x clean latency {latency * 1e3:.6g} ms "
                f"(the window holds {self.plan.repeats} program runs, start-ups included)"
            )
        return f"window energy ÷ {self.inferences} inferences ({self.plan.inferences_from})"

    @property
    def average_power_mw(self) -> float | None:
        cap = self.window
        if cap is None or cap.duration_s <= 0:
            return None
        return cap.energy_j / cap.duration_s * 1e3

    @property
    def active_energy_uj(self) -> float | None:
        """Energy above the idle baseline per inference (may come out negative: noise)."""
        cap, per_inference = self.window, self.energy_per_inference_uj
        idle = cap.idle_power_w if cap is not None else None
        if cap is None or idle is None or per_inference is None:
            return None
        latency = self.plan.clean_latency_s
        if self.plan.repeat_duration_s is not None and latency is not None:
            return per_inference - idle * latency * 1e6
        return (cap.energy_j - idle * cap.duration_s) / self.inferences * 1e6

    def _uncertainty(self) -> str:
        f = self.window.uncertainty_factor if self.window else None
        return f"; model uncertainty x/÷{f:g}" if f else ""

    def metrics(self) -> tuple[Metric, ...]:
        prov = self.provenance
        why = self._why_unavailable
        cap = self.window
        src = f"power source {self.source}"
        unc = self._uncertainty()

        def m(
            name: str, value: float | int | None, unit: str, desc: str, reason: str | None = None
        ) -> Metric:
            if value is None:
                return Metric(name, None, unit, prov, desc, why or reason or "not measured")
            return Metric(name, value, unit, prov, desc)

        out = [
            m(
                "power_average",
                self.average_power_mw,
                "mW",
                f"mean over the gated window, {src}{unc}",
            ),
            m(
                "energy_per_inference",
                self.energy_per_inference_uj,
                "uJ",
                f"{self._energy_basis()}, {src}{unc}",
            ),
        ]
        idle_reason = f"{self.capabilities.gate.value}-gated monitor {self.source} does not see the idle target"
        idle = cap.idle_power_w if cap is not None else None
        out.append(
            m(
                "power_idle",
                None if idle is None else idle * 1e3,
                "mW",
                "mean outside the window",
                idle_reason,
            )
        )
        active = self.active_energy_uj
        noise = cap is not None and idle_above_window(cap)
        out.append(
            m(
                "energy_active_per_inference",
                None if active is None or noise else max(0.0, active),
                "uJ",
                "energy above the idle baseline per inference",
                IDLE_ABOVE_WINDOW if noise else idle_reason,
            )
        )
        if cap is None:
            out.append(m("power_window_duration", None, "s", "measured gated window"))
        else:
            out.append(
                Metric(
                    "power_window_duration",
                    cap.duration_s,
                    "s",
                    prov,
                    "gated window",
                    resolution=cap.duration_resolution_s,
                )
            )
        out.append(self._expected_metric())
        if cap is not None and cap.sample_rate_hz:
            out.append(
                Metric("power_samples", cap.samples, "samples", prov, "samples inside the window")
            )
            out.append(
                Metric("power_sample_rate", cap.sample_rate_hz, "Hz", prov, "monitor sample rate")
            )
        else:
            reason = why or f"{self.source} is a model, not a sampler"
            out.append(
                Metric("power_samples", None, "samples", prov, "samples inside the window", reason)
            )
            out.append(Metric("power_sample_rate", None, "Hz", prov, "monitor sample rate", reason))
        return tuple(out)

    def _expected_metric(self) -> Metric:
        plan = self.plan
        expected = plan.expected_duration_s
        if expected is None or plan.clean_latency_s is None:
            return Metric.unavailable(
                "power_window_expected",
                "s",
                plan.clean_latency_provenance or Provenance.STATIC,
                "no clean latency to plan the window from (a capture analysed alone)",
                "N x clean latency",
            )
        if plan.repeat_duration_s is None:
            return Metric(
                "power_window_expected",
                expected,
                "s",
                plan.clean_latency_provenance or Provenance.STATIC,
                f"N = {plan.inferences} x clean latency {plan.clean_latency_s * 1e3:.6g} ms",
                resolution=plan.expected_resolution_s,
            )
        return Metric(
            "power_window_expected",
            expected,
            "s",
            Provenance.HOST,
            f"{plan.repeats} program runs x {plan.repeat_duration_s:.6g} s (host wall time "
            f"of the profile run, start-up included; N x clean latency is "
            f"{plan.inference_duration_s:.6g} s)",
            resolution=plan.expected_resolution_s,
        )

    def as_dict(self) -> dict[str, Any]:
        """The ``power`` block; an invalid capture's block keeps its plan, monitor, issues
        and raw files but no figure of its window (trace, gate detection, layer energy)."""
        cap = self.window
        prov = self.provenance
        gate = self.gate if self.gate is not None else (cap.gate if cap is not None else None)
        if self.invalid:
            gate = None
        return {
            "source": self.source,
            "provenance": prov.value,
            "scope": self.capabilities.scope,
            "gate": self.capabilities.gate.value,
            "gate_input": self.capabilities.gate_input,
            "unavailable_reason": self._why_unavailable,
            "invalid_reason": self.invalid_reason,
            "plan": self.plan.as_dict(),
            "terminal": None if self.terminal is None else self.terminal.as_dict(),
            "monitor": None if self.capture is None else self.capture.identity.as_dict(),
            "uncertainty_factor": None
            if cap is None or cap.uncertainty_factor is None
            else figure(cap.uncertainty_factor, "factor", Provenance.ESTIMATED),
            "basis": None if cap is None else cap.basis,
            "inferences": figure(self.inferences, "inferences", self._n_provenance()),
            "window_wall": None
            if self.window_wall_s is None
            else figure(self.window_wall_s, "s", Provenance.HOST, MONOTONIC_RESOLUTION_S),
            "inferences_seen": None
            if cap is None or cap.inferences_seen is None
            else figure(cap.inferences_seen, "inferences", Provenance.EMULATED),
            "saturated": None if cap is None else cap.saturated,
            "notes": [] if cap is None else list(cap.notes),
            "gate_detection": None if gate is None else gate_dict(gate, prov),
            "layer_energy": series(dict(self.published_layer_energy_uj), "uJ", prov),
            "metrics": [x.as_dict() for x in self.metrics()],
            "trace": None
            if cap is None or cap.trace is None
            else {
                "time": series(list(cap.trace.time_s), "s", prov),
                "power": series(list(cap.trace.power_w), "W", prov),
                "window_start": figure(cap.trace.window_start_s, "s", prov),
                "window_end": figure(cap.trace.window_end_s, "s", prov),
            },
            "raw_files": [p.name for p in self.raw_files],
            "issues": [i.as_dict() for i in self.issues],
        }

    def _n_provenance(self) -> Provenance:
        if self.terminal is not None and self.terminal.inferences:
            return self.terminal.provenance
        return self.plan.inferences_provenance


__all__ = [
    "IDLE_ABOVE_WINDOW",
    "MONOTONIC_RESOLUTION_S",
    "PowerPlan",
    "PowerResult",
    "TerminalRecord",
    "gate_dict",
    "idle_above_window",
]
