"""``jls:FILE`` as a monitor: a capture recorded elsewhere, analysed against what it recorded.

Nothing is run for it: the file *is* the window. The number of inferences its window holds
comes from the user (``--power-inferences N``) or from the file's own annotation; without
either the run is refused before anything is built ("cannot tell how many inferences this
capture holds"). A file is silicon only when it is a capture of this board's run, so a
``jls:`` against an emulated board or the host is refused too, with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.errors import CaptureError, ConfigError, InternalError
from aidge_deploy.metrics import Provenance
from aidge_deploy.power.jls import INSTALL_HINT, analyze_jls, recorded_inferences
from aidge_deploy.power.protocol import (
    GateKind,
    MonitorCapabilities,
    PowerCapture,
    PowerMonitor,
    WindowRequest,
    WindowRule,
)
from aidge_deploy.power.source import PowerSource
from aidge_deploy.readiness import ToolCheck

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.targetspec import TargetCaps

UNKNOWN_N = "cannot tell how many inferences this capture holds"
UNKNOWN_N_HINT = (
    "Give the number the capture's window holds (--power-inferences N; the firmware's "
    'terminal record says it), or record it in the file (user data {"inferences": N}).'
)


def capture_from_jls(
    path: Path,
    provenance: Provenance,
    *,
    expected_s: float | None = None,
    rule: WindowRule = WindowRule.MATCH,
    min_pulse_s: float | None = None,
    max_dropout_s: float | None = None,
) -> PowerCapture:
    """The gated window of a JLS capture as a ``PowerCapture`` (shared with ``joulescope``
    and ``power analyse``)."""
    analysis = analyze_jls(
        path,
        expected_s=expected_s,
        rule=rule,
        min_pulse_s=min_pulse_s,
        max_dropout_s=max_dropout_s,
    )
    window = analysis.window
    notes: list[str] = []
    gate = window.gate
    if gate.glitch_count or gate.dropout_count:
        notes.append(
            f"gate: {gate.glitch_count} glitch(es) ignored, {gate.dropout_count} dropout(s) bridged"
        )
    if gate.pulse_count > 1:
        notes.append(f"{gate.pulse_count - 1} other gate pulse(s) in the capture, not the window")
    if expected_s and rule is WindowRule.AT_LEAST and window.duration_s > expected_s * 1.1:
        notes.append(
            f"the window lasts {window.duration_s / expected_s:.3g} x N x clean latency: the "
            "energy per inference includes everything it held"
        )
    return PowerCapture(
        energy_j=window.energy_j,
        duration_s=window.duration_s,
        duration_resolution_s=1.0 / window.sample_rate_hz,
        samples=window.samples,
        sample_rate_hz=window.sample_rate_hz,
        identity=analysis.identity,
        provenance=provenance,
        idle_power_w=window.idle_power_w,
        saturated=window.saturated,
        trace=window.trace,
        basis="sum of power samples between the gate edges ÷ sample rate",
        notes=tuple(notes),
        gate=gate,
        recorded_inferences=analysis.recorded_inferences,
        raw_files=(path,),
    )


class JlsFileMonitor(PowerMonitor):
    def __init__(self, source: PowerSource) -> None:
        super().__init__(source)
        self.path = Path(source.argument or "")
        self._request: WindowRequest | None = None

    @property
    def capabilities(self) -> MonitorCapabilities:
        return MonitorCapabilities(
            channels=("current", "voltage", "power"),
            sample_rate_hz=None,
            gate=GateKind.SIGNAL,
            gate_input="gpi[0]",
            sees_idle=True,
            provenance=Provenance.SILICON,
            scope=f"capture file {self.path.name}",
            needs_window_run=False,
            recorded_elsewhere=True,
        )

    def recorded_inferences(self, given: int | None) -> int:
        return capture_inferences(self.path, given)

    def arm(self, request: WindowRequest) -> None:
        """Nothing to start: the file was recorded elsewhere; keep what to choose it by."""
        self._request = request

    def capture(self) -> PowerCapture:
        request = self._request
        if request is None:
            raise InternalError("the jls monitor was not armed")
        return capture_from_jls(
            self.path,
            Provenance.SILICON,
            expected_s=request.expected_duration_s,
            rule=request.window_rule,
            min_pulse_s=request.gate_min_pulse_s,
            max_dropout_s=request.gate_max_dropout_s,
        )


def capture_inferences(path: Path, given: int | None) -> int:
    """N for a capture: the one given, else the file's annotation; a ``ConfigError`` when
    neither says, or when they disagree."""
    recorded = recorded_inferences(path)
    if given is not None and recorded is not None and given != recorded:
        raise ConfigError(
            f"{path} records {recorded} inferences in its window, but {given} were given",
            hint="Give the number the capture really holds, or leave it out to use the file's own.",
        )
    n = given if given is not None else recorded
    if n is None:
        raise ConfigError(f"{path}: {UNKNOWN_N}", hint=UNKNOWN_N_HINT)
    return n


def jls_checks(
    source: PowerSource, config: DeployConfig, target_cls: Any, caps: TargetCaps
) -> list[ToolCheck]:
    """Preflight of ``jls:FILE``: pyjls, a silicon target, a whole JLS file, and its N."""
    import importlib.util

    from aidge_deploy.errors import DeployError

    if importlib.util.find_spec("pyjls") is None:
        return [ToolCheck("pyjls", False, "not installed", INSTALL_HINT)]
    provenance = getattr(target_cls, "timing_provenance", None)
    if provenance is not Provenance.SILICON:
        what = "an emulated board" if caps.emulated else "the host"
        return [
            ToolCheck(
                str(source),
                False,
                f"a capture file is silicon only when it records this board's run, and "
                f"{config.target} is {what} ({getattr(provenance, 'value', provenance)} "
                "timings): there is no supply of it to measure",
                "Use jls: with a physical board, `aidge-deploy power analyse` for a capture "
                "recorded elsewhere, or --power emulated / rapl / hwmon here.",
            )
        ]
    path = Path(source.argument or "")
    try:
        n = capture_inferences(path, config.power_inferences)
    except CaptureError as exc:  # not JLS, truncated: their own codes
        code = getattr(exc, "code", None)
        return [ToolCheck(f"capture {path}", False, f"{code}: {exc.message}", exc.hint)]
    except DeployError as exc:
        return [ToolCheck(f"capture {path}", False, exc.message, exc.hint)]
    return [ToolCheck(f"capture {path}", True, f"JLS, {n} inferences in its window")]


__all__ = [
    "UNKNOWN_N",
    "JlsFileMonitor",
    "capture_from_jls",
    "capture_inferences",
    "jls_checks",
]
