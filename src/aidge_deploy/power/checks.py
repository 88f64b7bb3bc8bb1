"""Validity of a power run: the window against the plan, the samples, the terminal record.

The codes live in the one registry (``profiling.validity.IssueCode``, ``power.*``); this
module only decides which apply, as hpx does: the gate against N x clean latency, the
samples against the plan, the target's own count of inferences against N.
"""

from __future__ import annotations

from aidge_deploy.power.protocol import PowerCapture
from aidge_deploy.power.result import PowerPlan, TerminalRecord
from aidge_deploy.profiling.validity import POWER_WINDOW_TOLERANCE, Issue, IssueCode


def window_issues(
    plan: PowerPlan, capture: PowerCapture, terminal: TerminalRecord | None, terminal_expected: bool
) -> list[Issue]:
    issues: list[Issue] = []
    expected = plan.expected_duration_s
    got = capture.duration_s
    if not capture.gate_seen:
        issues.append(Issue(IssueCode.POWER_GATE_MISSING, "the monitor never saw the gate"))
    if got < plan.min_window_s * (1 - POWER_WINDOW_TOLERANCE):
        issues.append(
            Issue(
                IssueCode.POWER_WINDOW_SHORT,
                f"window {got:.6g} s, planned at least {plan.min_window_s:.6g} s",
            )
        )
    if plan.repeat_duration_s is None:
        if expected > 0 and abs(got - expected) > POWER_WINDOW_TOLERANCE * expected:
            issues.append(
                Issue(
                    IssueCode.POWER_WINDOW_MISMATCH,
                    f"window {got:.6g} s vs N x clean latency {expected:.6g} s "
                    f"({(got - expected) / expected:+.1%})",
                )
            )
    else:
        # a host-timed window of whole program runs holds their start-ups too: it is longer
        # than N x clean latency by design, and only a window too short to hold the N
        # inferences is wrong (its wall time against the profile run's is noise, not error)
        inferring = plan.inference_duration_s
        if inferring > 0 and got < (1 - POWER_WINDOW_TOLERANCE) * inferring:
            issues.append(
                Issue(
                    IssueCode.POWER_WINDOW_MISMATCH,
                    f"window {got:.6g} s is too short for N x clean latency {inferring:.6g} s "
                    f"({(got - inferring) / inferring:+.1%})",
                )
            )
    if capture.sample_rate_hz and capture.samples < plan.min_samples:
        issues.append(
            Issue(
                IssueCode.POWER_SAMPLE_RATE_LOW,
                f"{capture.samples} samples at {capture.sample_rate_hz:.6g} Hz in the window, "
                f"planned at least {plan.min_samples}",
            )
        )
    if capture.saturated:
        issues.append(
            Issue(IssueCode.POWER_SATURATED, "the current range saturated inside the window")
        )
    seen = capture.inferences_seen
    if seen is not None and seen != plan.inferences:
        issues.append(
            Issue(
                IssueCode.POWER_TERMINAL_MISMATCH,
                f"the monitor saw {seen} inferences in the window, N = {plan.inferences}",
            )
        )
    if terminal_expected:
        if terminal is None:
            issues.append(
                Issue(IssueCode.POWER_TERMINAL_MISMATCH, "no terminal record after the window")
            )
        elif terminal.inferences is not None and terminal.inferences != plan.inferences:
            issues.append(
                Issue(
                    IssueCode.POWER_TERMINAL_MISMATCH,
                    f"the target reports {terminal.inferences} inferences, N = {plan.inferences}",
                )
            )
    return issues


__all__ = ["window_issues"]
