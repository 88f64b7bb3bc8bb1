"""``jls:FILE`` as a monitor: the capture is read from the file once the run is over."""

from __future__ import annotations

from pathlib import Path

from aidge_deploy.power.jls import analyze_jls
from aidge_deploy.power.protocol import (
    GateKind,
    MonitorCapabilities,
    PowerCapture,
    PowerMonitor,
    WindowRequest,
)
from aidge_deploy.power.source import PowerSource
from aidge_deploy.results import Provenance


def capture_from_jls(path: Path, provenance: Provenance) -> PowerCapture:
    """The gated window of a JLS capture as a ``PowerCapture`` (shared with ``joulescope``)."""
    window, identity = analyze_jls(path)
    notes: tuple[str, ...] = ()
    if window.extra_pulses:
        notes = (f"{window.extra_pulses} more gate pulse(s) after the first were ignored",)
    return PowerCapture(
        energy_j=window.energy_j,
        duration_s=window.duration_s,
        duration_resolution_s=1.0 / window.sample_rate_hz,
        samples=window.samples,
        sample_rate_hz=window.sample_rate_hz,
        identity=identity,
        provenance=provenance,
        idle_power_w=window.idle_power_w,
        saturated=window.saturated,
        trace=window.trace,
        basis="sum of power samples between the gate edges ÷ sample rate",
        notes=notes,
    )


class JlsFileMonitor(PowerMonitor):
    def __init__(self, source: PowerSource) -> None:
        super().__init__(source)
        self.path = Path(source.argument or "")

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
        )

    def arm(self, request: WindowRequest) -> None:
        """Nothing to arm: the file was recorded elsewhere."""

    def capture(self) -> PowerCapture:
        return capture_from_jls(self.path, Provenance.SILICON)


__all__ = ["JlsFileMonitor", "capture_from_jls"]
