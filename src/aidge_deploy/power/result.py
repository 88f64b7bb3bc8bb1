"""What a power run produced: the plan, the capture, the terminal record, and the figures.

``PowerResult.metrics()`` turns it into typed ``Metric``s (unit + provenance) for
``DeployResult.measurements``; a figure the monitor cannot give is "unavailable (reason)",
never 0. Provenance follows the monitor: an instrument on the board is silicon, a sensor of
this machine host, a model estimated (with its uncertainty factor in the description).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aidge_deploy.metrics import Metric, Provenance
from aidge_deploy.power.protocol import MonitorCapabilities, PowerCapture

#: step of the host clock that times program runs (``time.monotonic``)
_MONOTONIC_RESOLUTION_S = time.get_clock_info("monotonic").resolution


class PowerIssue(Protocol):
    """A validity finding (``profiling.validity.Issue``; typed structurally so that
    ``results`` -> ``power.result`` does not import the validity registry back)."""

    @property
    def message(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PowerPlan:
    """PlanPowerRun's output: how many inferences the gated window holds, and why."""

    inferences: int  # N
    repeats: int  # calls of the firmware entry point / program runs inside the window
    inferences_per_repeat: int
    clean_latency_s: float  # per inference, from the profile phase
    clean_latency_provenance: Provenance
    #: resolution (s) of the timer behind the clean latency, per inference
    clean_latency_resolution_s: float
    min_window_s: float
    min_samples: int
    basis: str
    #: host wall time (s) of one repeat when a repeat is a whole program run (start-up and
    #: I/O included: host, Linux boards), measured on the profile run; None when the window
    #: holds nothing but the inferences (power variant, models)
    repeat_duration_s: float | None = None
    #: the window the plan aims at (s): at least ``min_window_s`` and long enough for
    #: ``min_samples`` at the monitor's rate; repeated program runs go on until it is reached
    target_window_s: float = 0.0

    @property
    def inference_duration_s(self) -> float:
        """N x clean latency: the time the window spends inferring."""
        return self.inferences * self.clean_latency_s

    @property
    def expected_duration_s(self) -> float:
        """What the window should last: N x clean latency, or the repeats' wall time when
        each repeat is a program run (its start-up is in the host-timed window too)."""
        if self.repeat_duration_s is not None:
            return self.repeats * self.repeat_duration_s
        return self.inference_duration_s

    @property
    def inference_share(self) -> float | None:
        """Fraction of the expected window spent inferring, when it holds more (start-ups)."""
        if self.repeat_duration_s is None or self.expected_duration_s <= 0:
            return None
        return min(1.0, self.inference_duration_s / self.expected_duration_s)

    def as_dict(self) -> dict[str, Any]:
        return {
            "inferences": self.inferences,
            "repeats": self.repeats,
            "inferences_per_repeat": self.inferences_per_repeat,
            "clean_latency_s": self.clean_latency_s,
            "clean_latency_provenance": self.clean_latency_provenance.value,
            "min_window_s": self.min_window_s,
            "min_samples": self.min_samples,
            "repeat_duration_s": self.repeat_duration_s,
            "target_window_s": self.target_window_s,
            "inference_duration_s": self.inference_duration_s,
            "expected_duration_s": self.expected_duration_s,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class TerminalRecord:
    """The target's one record after the gate closed (CollectPowerTerminal)."""

    repeats: int | None
    inferences: int | None
    elapsed_s: float | None  # the target's own clock over the window, when it reports one
    elapsed_provenance: Provenance | None
    raw: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "repeats": self.repeats,
            "inferences": self.inferences,
            "elapsed_s": self.elapsed_s,
            "elapsed_provenance": None
            if self.elapsed_provenance is None
            else self.elapsed_provenance.value,
            "raw": self.raw,
        }


@dataclass(frozen=True)
class PowerResult:
    """Everything the power stages established, as the result, the bundle and reports see it."""

    source: str
    capabilities: MonitorCapabilities
    plan: PowerPlan
    capture: PowerCapture | None
    #: why there is no capture (monitor failed, no reference values...): figures unavailable
    unavailable_reason: str | None = None
    terminal: TerminalRecord | None = None
    issues: tuple[PowerIssue, ...] = ()
    layer_energy_uj: Mapping[str, float] = field(default_factory=dict)
    #: host wall time of the run holding the window (s); None when no run was needed
    window_wall_s: float | None = None

    @property
    def provenance(self) -> Provenance:
        return self.capture.provenance if self.capture else self.capabilities.provenance

    @property
    def inferences(self) -> int:
        if self.terminal is not None and self.terminal.inferences:
            return self.terminal.inferences
        return self.plan.inferences

    @property
    def energy_per_inference_uj(self) -> float | None:
        """Window energy ÷ N; when the window also holds program start-ups (repeated runs),
        the mean window power x the clean latency, so start-ups are not billed to inferences."""
        if self.capture is None or self.inferences <= 0:
            return None
        if self.plan.repeat_duration_s is not None:
            if self.capture.duration_s <= 0:
                return None
            return self.capture.energy_j / self.capture.duration_s * self.plan.clean_latency_s * 1e6
        return self.capture.energy_j / self.inferences * 1e6

    def _energy_basis(self) -> str:
        if self.plan.repeat_duration_s is not None:
            return (
                f"mean window power x clean latency {self.plan.clean_latency_s * 1e3:.6g} ms "
                f"(the window holds {self.plan.repeats} program runs, start-ups included)"
            )
        return f"window energy ÷ {self.inferences} inferences"

    @property
    def average_power_mw(self) -> float | None:
        if self.capture is None or self.capture.duration_s <= 0:
            return None
        return self.capture.energy_j / self.capture.duration_s * 1e3

    def _uncertainty(self) -> str:
        f = self.capture.uncertainty_factor if self.capture else None
        return f"; model uncertainty x/÷{f:g}" if f else ""

    def metrics(self) -> tuple[Metric, ...]:
        prov = self.provenance
        why = self.unavailable_reason
        cap = self.capture
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
        active = None
        per_inference = self.energy_per_inference_uj
        if cap is not None and idle is not None and per_inference is not None:
            if self.plan.repeat_duration_s is not None:
                active = per_inference - idle * self.plan.clean_latency_s * 1e6
            else:
                active = (cap.energy_j - idle * cap.duration_s) / self.inferences * 1e6
        out.append(
            m(
                "energy_active_per_inference",
                active,
                "uJ",
                "energy above the idle baseline per inference",
                idle_reason,
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
        plan = self.plan
        if plan.repeat_duration_s is None:
            expected = Metric(
                "power_window_expected",
                plan.expected_duration_s,
                "s",
                plan.clean_latency_provenance,
                f"N = {plan.inferences} x clean latency {plan.clean_latency_s * 1e3:.6g} ms",
                resolution=plan.inferences * plan.clean_latency_resolution_s,
            )
        else:
            expected = Metric(
                "power_window_expected",
                plan.expected_duration_s,
                "s",
                Provenance.HOST,
                f"{plan.repeats} program runs x {plan.repeat_duration_s:.6g} s (host wall time "
                f"of the profile run, start-up included; N x clean latency is "
                f"{plan.inference_duration_s:.6g} s)",
                resolution=plan.repeats * _MONOTONIC_RESOLUTION_S,
            )
        out.append(expected)
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

    def as_dict(self) -> dict[str, Any]:
        cap = self.capture
        return {
            "source": self.source,
            "provenance": self.provenance.value,
            "scope": self.capabilities.scope,
            "gate": self.capabilities.gate.value,
            "gate_input": self.capabilities.gate_input,
            "unavailable_reason": self.unavailable_reason,
            "plan": self.plan.as_dict(),
            "terminal": None if self.terminal is None else self.terminal.as_dict(),
            "monitor": None if cap is None else cap.identity.as_dict(),
            "uncertainty_factor": None if cap is None else cap.uncertainty_factor,
            "basis": None if cap is None else cap.basis,
            "inferences": self.inferences,
            "window_wall_s": self.window_wall_s,
            "inferences_seen": None if cap is None else cap.inferences_seen,
            "saturated": None if cap is None else cap.saturated,
            "notes": [] if cap is None else list(cap.notes),
            "layer_energy_uj": dict(self.layer_energy_uj),
            "metrics": [x.as_dict() for x in self.metrics()],
            "trace": None
            if cap is None or cap.trace is None
            else {
                "time_s": list(cap.trace.time_s),
                "power_w": list(cap.trace.power_w),
                "window_start_s": cap.trace.window_start_s,
                "window_end_s": cap.trace.window_end_s,
            },
            "issues": [i.as_dict() for i in self.issues],
        }


__all__ = ["PowerPlan", "PowerResult", "TerminalRecord"]
