"""``reference``: the hardware model's reference current x supply voltage x latency.

What ``aidge_export_arm_cortexm.metrics.power.estimate_power_metrics`` does, done honestly:
the figure is **estimated** (a datasheet-style current, not this run), and a board whose
hardware model has no reference current is refused in Preflight, before anything is
built, instead of a run whose figures are all "unavailable" (never 0 mW). No window is
run: the energy is the plan's N x clean latency at the reference power.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aidge_deploy.errors import CaptureError, InternalError
from aidge_deploy.metrics import Provenance
from aidge_deploy.power.protocol import (
    GateKind,
    MonitorCapabilities,
    MonitorIdentity,
    PowerCapture,
    PowerMonitor,
    WindowRequest,
)
from aidge_deploy.power.source import PowerSource
from aidge_deploy.readiness import ToolCheck

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig

NO_REFERENCE = "no reference values for this board"


def reference_power_w(hardware_target: Any) -> tuple[float, float, float] | None:
    """(power W, current A, voltage V) from the hardware model, or None when it has none."""
    current_ma = getattr(hardware_target, "board_reference_current_ma", None)
    voltage = getattr(hardware_target, "default_supply_voltage_v", None)
    if current_ma is None or voltage is None:
        return None
    return float(current_ma) * float(voltage) * 1e-3, float(current_ma) * 1e-3, float(voltage)


def reference_checks(config: DeployConfig, target_cls: Any) -> list[ToolCheck]:
    """Preflight: the target's hardware model has a reference current and voltage (a run
    whose every power figure would be "unavailable" is refused before building)."""
    values = reference_power_w(target_cls(config).hardware_target)
    if values is None:
        return [
            ToolCheck(
                "reference",
                False,
                f"{NO_REFERENCE} ({config.target}: its hardware model has no reference "
                "current or supply voltage)",
                "Measure it (--power joulescope, jls:FILE, hwmon, rapl) or, on an emulated "
                "board, estimate it with --power emulated.",
            )
        ]
    power, current, voltage = values
    return [
        ToolCheck(
            "reference",
            True,
            f"hardware model reference {current * 1e3:g} mA at {voltage:g} V ({power * 1e3:g} mW)",
        )
    ]


class ReferenceMonitor(PowerMonitor):
    def __init__(self, source: PowerSource, target_name: str, hardware_target: Any) -> None:
        super().__init__(source)
        self.target_name = target_name
        self.values = reference_power_w(hardware_target)
        self._request: WindowRequest | None = None

    @property
    def capabilities(self) -> MonitorCapabilities:
        return MonitorCapabilities(
            channels=("power",),
            sample_rate_hz=None,
            gate=GateKind.BOUNDARY,
            gate_input=None,
            sees_idle=False,
            provenance=Provenance.ESTIMATED,
            scope="board reference current of the hardware model",
            needs_window_run=False,
        )

    def arm(self, request: WindowRequest) -> None:
        self._request = request

    def capture(self) -> PowerCapture:
        if self.values is None:
            raise CaptureError(NO_REFERENCE, hint="Use a measuring monitor (--power joulescope).")
        if self._request is None or self._request.expected_duration_s is None:
            raise InternalError("the reference monitor was not armed")
        power, current, voltage = self.values
        duration = self._request.expected_duration_s
        return PowerCapture(
            energy_j=power * duration,
            duration_s=duration,
            duration_resolution_s=self._request.resolution_s,
            samples=0,
            sample_rate_hz=None,
            identity=MonitorIdentity(
                name=f"hardware model {self.target_name}",
                details={"reference_current_a": f"{current:g}", "supply_v": f"{voltage:g}"},
            ),
            provenance=Provenance.ESTIMATED,
            basis=f"reference current {current * 1e3:g} mA x {voltage:g} V x N x clean latency "
            "(the hardware model's figure, not this run)",
        )


__all__ = ["NO_REFERENCE", "ReferenceMonitor", "reference_checks", "reference_power_w"]
