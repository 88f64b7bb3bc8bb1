"""Is a run's result trustworthy? ``assess`` finds the issues of one ``DeployResult``.

The vocabulary (issue codes, severities, the ``valid|degraded|invalid`` verdict) is
``profiling.validity``'s, shared with the power analysis that raises its own issues; this
is the judgement of a whole result, above the results it reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aidge_deploy.config import Aggregation
from aidge_deploy.metrics import COARSE_STEPS, Provenance, format_figure
from aidge_deploy.profiling.aggregate import (
    TRIMMED_MIN_SAMPLES,
    Aggregate,
    aggregate_samples,
)
from aidge_deploy.profiling.validity import (
    LAYER_SUM_TOLERANCE,
    MIN_SAMPLES,
    NEAR_CAPACITY,
    Issue,
    IssueCode,
    Validity,
)
from aidge_deploy.results import DeployResult


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


__all__ = ["assess"]
