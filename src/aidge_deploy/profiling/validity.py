"""Is a run's result trustworthy? Typed issue codes and the ``valid|degraded|invalid`` verdict.

A number can be printed and still be wrong: a counter wrapped, the timer ticks slower than
the layers it times, the layers do not add up to the inference. Each such finding is an
``Issue`` with a code from one registry (``IssueCode``), so reports, bundles and
comparisons speak the same vocabulary. Severity ``error`` makes a run invalid, ``warning``
degraded; ``info`` only informs (an emulated timing is exactly what was asked for).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from aidge_deploy.config import Aggregation
from aidge_deploy.metrics import COARSE_STEPS, format_figure
from aidge_deploy.profiling.aggregate import (
    TRIMMED_MIN_SAMPLES,
    Aggregate,
    aggregate_samples,
)
from aidge_deploy.results import DeployResult, Provenance

#: the per-layer sum may differ from the end-to-end figure by this fraction before it is "far"
LAYER_SUM_TOLERANCE = 0.5
#: flash or RAM use above this fraction of the capacity is reported
NEAR_CAPACITY = 0.9
#: fewer samples than this make a latency figure statistically weak
MIN_SAMPLES = 3
#: the power window may differ from N x clean latency by this fraction
POWER_WINDOW_TOLERANCE = 0.10
#: a power window holds at least this many monitor samples, or it has no energy figure
MIN_POWER_WINDOW_SAMPLES = 50


class Severity(StrEnum):
    ERROR = "error"  # the run is invalid: a figure is wrong, not just imprecise
    WARNING = "warning"  # the run is degraded: figures are usable with care
    INFO = "info"  # worth knowing, changes nothing about trust


class ValidityStatus(StrEnum):
    VALID = "valid"
    DEGRADED = "degraded"
    INVALID = "invalid"


class IssueCode(StrEnum):
    """Every validity finding aidge-deploy can report (see ``ISSUE_SPECS``)."""

    COUNTER_OVERFLOW = "counter.overflow"
    COUNTER_UNAVAILABLE = "counter.unavailable"
    PROFILE_LAYER_SUM_MISMATCH = "profile.layer_sum_mismatch"
    SAMPLES_TOO_FEW = "samples.too_few"
    SAMPLES_REJECTED = "samples.rejected"
    TIMER_RESOLUTION_COARSE = "timer.resolution_coarse"
    TIMING_EMULATED = "timing.emulated"
    MEMORY_NEAR_CAPACITY = "memory.near_capacity"
    POWER_CAPTURE_NOT_JLS = "power.capture_not_jls"
    POWER_CAPTURE_TRUNCATED = "power.capture_truncated"
    POWER_CAPTURE_FAILED = "power.capture_failed"
    POWER_GATE_MISSING = "power.gate_missing"
    POWER_GATE_UNCLOSED = "power.gate_unclosed"
    POWER_GATE_AMBIGUOUS = "power.gate_ambiguous"
    POWER_WINDOW_SHORT = "power.window_short"
    POWER_WINDOW_MISMATCH = "power.window_mismatch"
    POWER_SAMPLES_TOO_FEW = "power.samples_too_few"
    POWER_SATURATED = "power.saturated"
    POWER_TERMINAL_MISMATCH = "power.terminal_mismatch"
    POWER_IDLE_ABOVE_WINDOW = "power.idle_above_window"

    @property
    def severity(self) -> Severity:
        return ISSUE_SPECS[self].severity

    @property
    def description(self) -> str:
        return ISSUE_SPECS[self].description


@dataclass(frozen=True)
class IssueSpec:
    severity: Severity
    description: str


#: the registry: severity and meaning of each code (a test checks every code has one)
ISSUE_SPECS: Mapping[IssueCode, IssueSpec] = MappingProxyType(
    {
        IssueCode.COUNTER_OVERFLOW: IssueSpec(
            Severity.ERROR,
            "A hardware counter wrapped (in its own width: a value of at least 2^31 for a "
            "32-bit counter, or a negative delta) and no usable reading is left for the figure.",
        ),
        IssueCode.COUNTER_UNAVAILABLE: IssueSpec(
            Severity.WARNING,
            "A requested counter was not reported, or is missing for some layers.",
        ),
        IssueCode.PROFILE_LAYER_SUM_MISMATCH: IssueSpec(
            Severity.WARNING,
            "The per-layer figures do not add up to the end-to-end figure (off by more than "
            f"{LAYER_SUM_TOLERANCE:.0%}): layers are missing, double-counted or mis-timed.",
        ),
        IssueCode.SAMPLES_TOO_FEW: IssueSpec(
            Severity.WARNING,
            f"Fewer than {MIN_SAMPLES} usable samples: the aggregate is not robust to outliers.",
        ),
        IssueCode.SAMPLES_REJECTED: IssueSpec(
            Severity.WARNING,
            "Some samples were rejected (wrapped counter, negative delta or frozen counter) "
            "before aggregation.",
        ),
        IssueCode.TIMER_RESOLUTION_COARSE: IssueSpec(
            Severity.WARNING,
            f"A time spans fewer than {COARSE_STEPS} steps of the timer that measured it, so "
            "its quantisation alone moves it by more than 10 %; below one step it is noise. "
            "Prefer its cycle count.",
        ),
        IssueCode.TIMING_EMULATED: IssueSpec(
            Severity.INFO,
            "The run is emulated: counts are emulated instructions (not cycles) and times are "
            "estimated from them at the core clock with CPI = 1.",
        ),
        IssueCode.MEMORY_NEAR_CAPACITY: IssueSpec(
            Severity.WARNING,
            f"Flash or RAM use is above {NEAR_CAPACITY:.0%} of the target's capacity.",
        ),
        IssueCode.POWER_CAPTURE_NOT_JLS: IssueSpec(
            Severity.ERROR,
            "The power capture file is not a JLS v2 file (its first bytes are not the JLS "
            "identification): no energy figure exists for the run.",
        ),
        IssueCode.POWER_CAPTURE_TRUNCATED: IssueSpec(
            Severity.ERROR,
            "The JLS capture was not closed properly or was cut short (the length in its header "
            "is 0 or differs from the file's size, or its signals stop at different samples).",
        ),
        IssueCode.POWER_CAPTURE_FAILED: IssueSpec(
            Severity.ERROR,
            "The power monitor failed during the run (a sensor read failed, samples are "
            "missing inside the window): no energy figure exists for the run.",
        ),
        IssueCode.POWER_GATE_MISSING: IssueSpec(
            Severity.ERROR,
            "The capture has no gate input, or the gate never opened inside it: no window, no "
            "energy figure.",
        ),
        IssueCode.POWER_GATE_UNCLOSED: IssueSpec(
            Severity.ERROR,
            "The gate opened but never closed inside the capture (it ends inside the window).",
        ),
        IssueCode.POWER_GATE_AMBIGUOUS: IssueSpec(
            Severity.ERROR,
            "More than one gate pulse is consistent with N x the clean latency (or there is no "
            "clean latency to choose with): the tool does not guess which holds the inferences.",
        ),
        IssueCode.POWER_WINDOW_SHORT: IssueSpec(
            Severity.WARNING,
            "The measured power window is shorter than the planned minimum: edge errors weigh "
            "more than the plan allowed.",
        ),
        IssueCode.POWER_WINDOW_MISMATCH: IssueSpec(
            Severity.ERROR,
            f"The window differs from N x the clean latency by more than "
            f"{POWER_WINDOW_TOLERANCE:.0%} (for a host-timed window of whole program runs: is "
            f"shorter than it): the window is not the N inferences it should be.",
        ),
        IssueCode.POWER_SAMPLES_TOO_FEW: IssueSpec(
            Severity.ERROR,
            f"The window holds fewer than {MIN_POWER_WINDOW_SAMPLES} monitor samples, the "
            "minimum for an energy figure.",
        ),
        IssueCode.POWER_SATURATED: IssueSpec(
            Severity.ERROR,
            "The monitor's current range saturated inside the window: the energy is too low.",
        ),
        IssueCode.POWER_TERMINAL_MISMATCH: IssueSpec(
            Severity.ERROR,
            "The target's terminal record after the window is missing, or its inference "
            "count differs from N: energy per inference cannot be trusted.",
        ),
        IssueCode.POWER_IDLE_ABOVE_WINDOW: IssueSpec(
            Severity.WARNING,
            "The idle baseline is above the window's mean power (noise): the energy above "
            "idle is not published.",
        ),
    }
)


@dataclass(frozen=True)
class Issue:
    code: IssueCode
    message: str
    #: what the issue is about (a layer, a counter, a metric), when narrower than the run
    subject: str | None = None

    @property
    def severity(self) -> Severity:
        return self.code.severity

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "severity": self.severity.value,
            "message": self.message,
            "subject": self.subject,
        }


@dataclass(frozen=True)
class Validity:
    status: ValidityStatus
    issues: tuple[Issue, ...] = ()

    @classmethod
    def of(cls, issues: Sequence[Issue]) -> Validity:
        severities = {i.severity for i in issues}
        if Severity.ERROR in severities:
            status = ValidityStatus.INVALID
        elif Severity.WARNING in severities:
            status = ValidityStatus.DEGRADED
        else:
            status = ValidityStatus.VALID
        return cls(status, tuple(issues))

    @property
    def codes(self) -> tuple[IssueCode, ...]:
        return tuple(i.code for i in self.issues)

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "issues": [i.as_dict() for i in self.issues]}


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _sample_issues(name: str, agg: Aggregate, unit: str) -> list[Issue]:
    issues: list[Issue] = []
    if agg.n_rejected:
        reasons = ", ".join(f"{n} {r.value}" for r, n in agg.rejected.items())
        issues.append(
            Issue(
                IssueCode.SAMPLES_REJECTED,
                f"{name}: {agg.n_rejected} of {agg.n_total} samples rejected ({reasons})",
                name,
            )
        )
    if agg.value is None and agg.n_rejected:
        issues.append(
            Issue(
                IssueCode.COUNTER_OVERFLOW,
                f"{name}: every one of {agg.n_total} samples was rejected; no {unit} figure",
                name,
            )
        )
    elif agg.n_used < MIN_SAMPLES or (
        agg.method == Aggregation.TRIMMED and agg.n_used < TRIMMED_MIN_SAMPLES
    ):
        issues.append(
            Issue(
                IssueCode.SAMPLES_TOO_FEW,
                f"{name}: only {agg.n_used} usable sample(s); {agg.describe()}",
                name,
            )
        )
    return issues


def _layer_counter_issues(result: DeployResult, requested: Sequence[str]) -> list[Issue]:
    issues: list[Issue] = []
    seen: dict[str, int] = {}
    widths = result.metrics.get("counter_bits") or {}
    for layer in result.layers:
        for counter, value in layer.counters.items():
            seen[counter] = seen.get(counter, 0) + 1
            v = float(value)
            bits = widths.get(counter)
            if v < 0 or (bits is not None and v >= 2 ** (bits - 1)):
                issues.append(
                    Issue(
                        IssueCode.COUNTER_OVERFLOW,
                        f"layer {layer.name}: {counter} = {_fmt(v)} is a wrapped "
                        f"{bits or ''}{'-bit ' if bits else ''}reading",
                        f"{layer.name}/{counter}",
                    )
                )
    n_layers = len(result.layers)
    for counter, count in seen.items():
        if count < n_layers:
            issues.append(
                Issue(
                    IssueCode.COUNTER_UNAVAILABLE,
                    f"{counter} was reported for {count} of {n_layers} layers",
                    counter,
                )
            )
    reported = set(seen) | {m.name for m in result.measurements if m.value is not None}
    for name in requested:
        if name not in reported:
            issues.append(
                Issue(IssueCode.COUNTER_UNAVAILABLE, f"{name} was requested but not reported", name)
            )
    for metric in result.measurements:
        if metric.value is None:
            why = metric.unavailable_reason or "no reason given"
            issues.append(
                Issue(
                    IssueCode.COUNTER_UNAVAILABLE,
                    f"{metric.name} is unavailable: {why}",
                    metric.name,
                )
            )
    return issues


def _layer_sum_issue(
    what: str, layer_sum: float, total: float | None, unit: str, slack: float
) -> Issue | None:
    if total is None or total <= 0:
        return None
    gap = abs(layer_sum - total)
    if gap <= LAYER_SUM_TOLERANCE * total or gap <= slack:
        return None
    return Issue(
        IssueCode.PROFILE_LAYER_SUM_MISMATCH,
        f"per-layer {what} add up to {_fmt(layer_sum)} {unit} but the end-to-end figure is "
        f"{_fmt(total)} {unit} ({layer_sum / total:.0%})",
        what,
    )


def _coarse_issues(result: DeployResult, latency: Aggregate | None) -> list[Issue]:
    """Times spanning few steps of their timer, quoting the timer's real step."""
    timing = result.timing
    if timing is None:
        return []
    issues: list[Issue] = []
    step = timing.layer_resolution_ms
    times = [
        (layer.name, float(layer.time_ms)) for layer in result.layers if layer.time_ms is not None
    ]
    if step is not None and times:
        coarse = [(name, t) for name, t in times if t < COARSE_STEPS * step]
        if coarse:
            name, fastest = min(coarse, key=lambda item: item[1])
            below = sum(1 for _, t in coarse if t < step)
            issues.append(
                Issue(
                    IssueCode.TIMER_RESOLUTION_COARSE,
                    f"the per-layer timer steps by {_fmt(step)} ms: {len(coarse)} of "
                    f"{len(times)} layer(s) span fewer than {COARSE_STEPS} steps ({below} less "
                    f"than one; e.g. {name}: {format_figure(fastest, 'ms', step)})",
                    name,
                )
            )
    step = timing.resolution_ms
    value = latency.value if latency is not None else None
    if step is not None and value is not None and value < COARSE_STEPS * step:
        issues.append(
            Issue(
                IssueCode.TIMER_RESOLUTION_COARSE,
                f"the latency samples step by {_fmt(step)} ms and the latency is "
                f"{format_figure(value, 'ms', step)}: fewer than {COARSE_STEPS} steps",
                "latency",
            )
        )
    return issues


def assess(
    result: DeployResult,
    *,
    aggregation: Aggregation | str = Aggregation.MEDIAN,
    requested_counters: Sequence[str] = (),
) -> Validity:
    """Check one deploy result and return its validity with every issue found.

    ``requested_counters`` are exact counter names the caller asked for and expects to
    see reported. Time resolutions come from ``result.timing``; counter widths from the
    result's ``counter_bits`` (the wrap rule applies in each counter's own width).
    """
    method = Aggregation(aggregation)
    issues: list[Issue] = []
    provenance = str(result.metrics.get("provenance", ""))
    if provenance == Provenance.EMULATED.value:
        label = result.timing.label if result.timing is not None else ""
        issues.append(
            Issue(
                IssueCode.TIMING_EMULATED,
                "counts come from QEMU: emulated instructions, not cycles"
                + (f"; times are {label}" if label else ""),
            )
        )
    latency: Aggregate | None = None
    if result.timings:
        latency = aggregate_samples(result.timings, method)
        issues += _sample_issues("latency", latency, "ms")
    cycles_name = str(result.metrics.get("cycles_name") or "cycles")
    cycles: Aggregate | None = None
    raw_cycles = result.metrics.get("cycles")
    if raw_cycles:
        bits = result.metrics.get("cycles_counter_bits")
        cycles = aggregate_samples(raw_cycles, method, counter_bits=bits)
        issues += _sample_issues(cycles_name, cycles, cycles_name)
    issues += _layer_counter_issues(result, requested_counters)

    times = [(layer.name, layer.time_ms) for layer in result.layers if layer.time_ms is not None]
    if times:
        layer_sum = sum(float(t) for _, t in times)
        slack = len(times) * (result.timing.layer_resolution_ms or 0.0) if result.timing else 0.0
        issue = _layer_sum_issue(
            "times", layer_sum, latency.value if latency else None, "ms", slack
        )
        if issue is not None:
            issues.append(issue)
    issues += _coarse_issues(result, latency)
    layer_cycles = [
        float(layer.counters[cycles_name])
        for layer in result.layers
        if cycles_name in layer.counters
    ]
    if layer_cycles and len(layer_cycles) == len(result.layers):
        issue = _layer_sum_issue(
            cycles_name, sum(layer_cycles), cycles.value if cycles else None, cycles_name, 0.0
        )
        if issue is not None:
            issues.append(issue)
    issues += _memory_issues(result.metrics.get("binary"))
    if result.power is not None:
        issues += [i for i in result.power.issues if isinstance(i, Issue)]
    return Validity.of(issues)


def _memory_issues(binary: Any) -> list[Issue]:
    if not isinstance(binary, Mapping):
        return []
    issues = []
    for what in ("flash", "ram"):
        used, cap = binary.get(f"{what}_bytes"), binary.get(f"{what}_capacity")
        if used is None or not cap:
            continue
        if used > NEAR_CAPACITY * cap:
            issues.append(
                Issue(
                    IssueCode.MEMORY_NEAR_CAPACITY,
                    f"{what} use {used} B is {used / cap:.0%} of the {cap} B available",
                    what,
                )
            )
    return issues


__all__ = [
    "ISSUE_SPECS",
    "POWER_WINDOW_TOLERANCE",
    "Issue",
    "IssueCode",
    "IssueSpec",
    "Severity",
    "Validity",
    "ValidityStatus",
    "assess",
]
