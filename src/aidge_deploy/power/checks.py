"""Validity of a power run: the window against the plan, the samples, the terminal record.

The codes live in the one registry (``profiling.validity.IssueCode``, ``power.*``); this
module only decides which apply, as hpx does: the gate against N x clean latency, the
samples against the stated minimum, the target's own count of inferences against N, the
idle baseline against the window. A capture that gave no window at all is its own failure
(``failures.issue_for``).
"""

from __future__ import annotations

from aidge_deploy.errors import CaptureError
from aidge_deploy.power.failures import issue_code_of
from aidge_deploy.power.protocol import PowerCapture, WindowRule
from aidge_deploy.power.result import (
    IDLE_ABOVE_WINDOW,
    PowerPlan,
    TerminalRecord,
    idle_above_window,
)
from aidge_deploy.profiling.validity import (
    MIN_POWER_WINDOW_SAMPLES,
    POWER_WINDOW_TOLERANCE,
    Issue,
    IssueCode,
)


def capture_issue(exc: CaptureError) -> Issue:
    """The validity issue of a capture that gave no window (its own code and message)."""
    return Issue(issue_code_of(exc), exc.message)


def window_issues(
    plan: PowerPlan, capture: PowerCapture, terminal: TerminalRecord | None, terminal_expected: bool
) -> list[Issue]:
    issues: list[Issue] = []
    got = capture.duration_s
    if not capture.gate_seen:
        issues.append(Issue(IssueCode.POWER_GATE_MISSING, "the monitor never saw the gate"))
    if plan.clean_latency_s is not None and got < plan.min_window_s * (1 - POWER_WINDOW_TOLERANCE):
        issues.append(
            Issue(
                IssueCode.POWER_WINDOW_SHORT,
                f"window {got:.6g} s, planned at least {plan.min_window_s:.6g} s",
            )
        )
    issues += _against_latency(plan, got)
    if capture.sample_rate_hz and capture.samples < MIN_POWER_WINDOW_SAMPLES:
        issues.append(
            Issue(
                IssueCode.POWER_SAMPLES_TOO_FEW,
                f"{capture.samples} samples at {capture.sample_rate_hz:.6g} Hz in the window, "
                f"the minimum is {MIN_POWER_WINDOW_SAMPLES}",
            )
        )
    if capture.saturated:
        issues.append(
            Issue(IssueCode.POWER_SATURATED, "the current range saturated inside the window")
        )
    if capture.idle_power_w is not None and idle_above_window(capture):
        issues.append(
            Issue(
                IssueCode.POWER_IDLE_ABOVE_WINDOW,
                f"{IDLE_ABOVE_WINDOW}: idle {capture.idle_power_w * 1e3:.6g} mW, window "
                f"{capture.energy_j / got * 1e3:.6g} mW",
            )
        )
    seen = capture.inferences_seen
    if seen is not None and seen != plan.inferences:
        issues.append(
            Issue(
                IssueCode.POWER_TERMINAL_MISMATCH,
                f"the monitor saw {seen} inferences in the window, N = {plan.inferences}",
            )
        )
    recorded = capture.recorded_inferences
    if recorded is not None and recorded != plan.inferences:
        issues.append(
            Issue(
                IssueCode.POWER_TERMINAL_MISMATCH,
                f"the capture records {recorded} inferences in its window, N = {plan.inferences}",
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


def _against_latency(plan: PowerPlan, got: float) -> list[Issue]:
    expected = plan.expected_duration_s
    inferring = plan.inference_duration_s
    if plan.repeat_duration_s is None and plan.window_rule is WindowRule.MATCH:
        if expected and abs(got - expected) > POWER_WINDOW_TOLERANCE * expected:
            return [
                Issue(
                    IssueCode.POWER_WINDOW_MISMATCH,
                    f"window {got:.6g} s vs N x clean latency {expected:.6g} s "
                    f"({(got - expected) / expected:+.1%})",
                )
            ]
        return []
    # a window of whole program runs holds their start-ups too: it is longer than N x
    # clean latency by design, and only a window too short to hold the N inferences is
    # wrong (a host-timed one's wall time against the profile run's is noise, not error)
    if inferring and got < (1 - POWER_WINDOW_TOLERANCE) * inferring:
        return [
            Issue(
                IssueCode.POWER_WINDOW_MISMATCH,
                f"window {got:.6g} s is too short for N x clean latency {inferring:.6g} s "
                f"({(got - inferring) / inferring:+.1%})",
            )
        ]
    return []


__all__ = ["capture_issue", "window_issues"]
