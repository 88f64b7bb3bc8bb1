"""``aidge-deploy power analyse``: a capture recorded elsewhere, analysed without running anything.

A JLS file from the Joulescope UI or a lab script holds a window of N inferences of some
board's power firmware. Its figures come from the file alone and the N it is analysed for
(``--inferences``, else the file's annotation; without either the tool refuses: it never
assumes an N of its own). The clean
latency of the board's profile run, when known (``--into BUNDLE`` or given), chooses the
window by its width. The result is a ``PowerResult`` like a run's, with its validity issues.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.errors import CaptureError, ConfigError
from aidge_deploy.metrics import Provenance
from aidge_deploy.power.checks import capture_issue, window_issues
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.jls import recorded_inferences
from aidge_deploy.power.jls_monitor import (
    UNKNOWN_N,
    UNKNOWN_N_HINT,
    JlsFileMonitor,
    capture_from_jls,
)
from aidge_deploy.power.protocol import WindowRule
from aidge_deploy.power.result import PowerPlan, PowerResult
from aidge_deploy.power.source import PowerSource, PowerSourceKind
from aidge_deploy.profiling.validity import MIN_POWER_WINDOW_SAMPLES, Issue


@dataclass(frozen=True)
class CleanLatency:
    """The per-inference latency of the board's profile run the capture belongs to."""

    seconds: float
    provenance: Provenance
    resolution_s: float | None
    source: str  # "given", "bundle <path>"


def capture_n(path: Path, given: int | None) -> tuple[int, str]:
    """N and where it comes from: given, else the file's annotation; a ``ConfigError`` (the
    refusal) when neither says, or when they disagree. A file that is not a whole JLS
    capture raises its ``PowerCaptureError`` unless N is given (its analysis then reports
    the failure as an issue)."""
    try:
        recorded = recorded_inferences(path)
    except PowerCaptureError:
        if given is None:
            raise
        recorded = None
    known = {"given: --inferences": given, "recorded in the capture": recorded}
    values = {v for v in known.values() if v is not None}
    if len(values) > 1:
        said = ", ".join(f"{k} {v}" for k, v in known.items() if v is not None)
        raise ConfigError(
            f"{path}: the inferences inside its window disagree ({said})",
            hint="Give the number the capture really holds with --inferences.",
        )
    for origin, value in known.items():
        if value is not None:
            if value < 1:
                raise ConfigError(f"--inferences must be positive, got {value}", hint="e.g. 1000")
            return value, origin
    raise ConfigError(f"{path}: {UNKNOWN_N}", hint=UNKNOWN_N_HINT)


def analyse_capture(
    path: Path,
    inferences: int | None,
    *,
    latency: CleanLatency | None = None,
    rule: WindowRule = WindowRule.MATCH,
    min_pulse_s: float | None = None,
    max_dropout_s: float | None = None,
) -> PowerResult:
    """The power figures of a JLS capture of ``inferences`` inferences (see the module)."""
    path = Path(path)
    n, origin = capture_n(path, inferences)
    plan = PowerPlan(
        inferences=n,
        repeats=1,
        inferences_per_repeat=n,
        clean_latency_s=None if latency is None else latency.seconds,
        clean_latency_provenance=None if latency is None else latency.provenance,
        clean_latency_resolution_s=None if latency is None else latency.resolution_s,
        min_window_s=0.0,
        min_samples=MIN_POWER_WINDOW_SAMPLES,
        basis=f"N = {n} inferences in the capture's window ({origin})"
        + (
            f"; window chosen by N x clean latency {latency.seconds * 1e3:.6g} ms ({latency.source})"
            if latency is not None
            else "; no clean latency: the capture must hold one window"
        ),
        inferences_from=origin,
        inferences_provenance=Provenance.STATIC,
        window_rule=rule,
    )
    capabilities = JlsFileMonitor(PowerSource(PowerSourceKind.JLS, str(path))).capabilities
    issues: list[Issue] = []
    capture = None
    reason = None
    gate = None
    try:
        capture = capture_from_jls(
            path,
            Provenance.SILICON,
            expected_s=plan.inference_duration_s,
            rule=rule,
            min_pulse_s=min_pulse_s,
            max_dropout_s=max_dropout_s,
        )
    except CaptureError as exc:
        reason = exc.message
        issues.append(capture_issue(exc))
        gate = getattr(exc, "gate", None)
    if capture is not None:
        issues += window_issues(plan, capture, None, False)
    return PowerResult(
        source=f"jls:{path}",
        capabilities=capabilities,
        plan=plan,
        capture=capture,
        unavailable_reason=reason,
        issues=tuple(issues),
        gate=gate,
        raw_files=(path,) if path.is_file() else (),
    )


__all__ = ["CleanLatency", "analyse_capture", "capture_n"]
