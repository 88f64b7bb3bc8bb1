"""The one small protocol every power monitor implements, and what a capture returns.

A monitor is opened (device found, configured), armed just before the target's gated
window runs, asked for the capture once the window is over, and closed. It declares its
capabilities up front (channels, sample rate, gate input, whether it sees the idle part of
the trace) so planning and validity can reason about it without knowing which one it is.
Modelled on labgrid's drivers: the pipeline talks to the protocol, never to a device.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Self

from aidge_deploy.metrics import Provenance
from aidge_deploy.power.source import PowerSource
from aidge_deploy.targetspec import WindowRule


class GateKind(StrEnum):
    """How a monitor knows where the measured window starts and ends."""

    SIGNAL = "signal"  # a digital input wired to the target's gate pin (sample-accurate)
    BOUNDARY = "boundary"  # the emulator sees the firmware reach the gate functions
    HOST = "host"  # the host times the run (process start/end): sensors without a gate input


@dataclass(frozen=True)
class MonitorCapabilities:
    """What a monitor can see: planning and validity read this, never the monitor type."""

    channels: tuple[str, ...]  # "current", "voltage", "power", "energy"
    sample_rate_hz: float | None  # None: the monitor is a model, not a sampler
    gate: GateKind
    gate_input: str | None  # "gpi[0]", "aidge_power_gate_open/close", None
    sees_idle: bool  # the trace holds the target idle before/after the window
    provenance: Provenance
    #: what the figures cover: "board supply", "chip package", "rail VDD_IN", "CPU model"...
    scope: str = ""
    #: False for a model that needs no run at all (reference current x latency), and for
    #: a capture recorded elsewhere
    needs_window_run: bool = True
    #: the window is a capture recorded elsewhere (``jls:``): its N comes from the user or
    #: the file, never from the tool's own plan
    recorded_elsewhere: bool = False


@dataclass(frozen=True)
class MonitorIdentity:
    """Which instrument or model produced the figures (serials, versions, calibration)."""

    name: str
    model: str | None = None
    serial: str | None = None
    firmware: str | None = None
    calibration_date: str | None = None
    details: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "model": self.model,
            "serial": self.serial,
            "firmware": self.firmware,
            "calibration_date": self.calibration_date,
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class PowerTrace:
    """A power-versus-time series for the report (decimated), with the gate window on it."""

    time_s: tuple[float, ...]
    power_w: tuple[float, ...]
    window_start_s: float | None
    window_end_s: float | None


@dataclass(frozen=True)
class GatePulse:
    """A stretch of the gate signal: where it starts and how long it lasts (s)."""

    start_s: float
    width_s: float


@dataclass(frozen=True)
class GateReport:
    """Every edge a gate detector found on a sampled gate input, and what it made of them.

    Lists hold at most ``listed`` entries each (the first ones); the counts are complete.
    """

    gate_input: str
    sample_rate_hz: float
    #: a level held shorter than this is a glitch, not an edge (s)
    min_pulse_s: float
    #: a low gap up to this long inside a pulse is a dropout, bridged (s)
    max_dropout_s: float
    #: how the two limits were chosen (planned window, sample rate, or given)
    settings_basis: str
    #: level changes seen on the input (after the hysteresis thresholds)
    edges: int
    glitch_count: int
    glitches: tuple[GatePulse, ...]
    dropout_count: int
    dropouts: tuple[GatePulse, ...]
    #: the pulses left once glitches are ignored and dropouts bridged
    pulse_count: int
    pulses: tuple[GatePulse, ...]
    #: index into ``pulses`` of the window (None: no window was chosen)
    chosen: int | None
    #: N x clean latency (s), the width the window is chosen by (None: unknown)
    expected_s: float | None
    selection: str
    #: where a pulse opened and never closed before the capture's end (s)
    unclosed_at_s: float | None = None
    started_high: bool = False


@dataclass(frozen=True)
class PowerCapture:
    """What a monitor measured (or a model estimated) over the gated window."""

    energy_j: float
    duration_s: float
    #: the step of the window's clock (s): 1/sample rate, one instruction, the poll period
    duration_resolution_s: float
    samples: int  # samples inside the window (0 for a model)
    sample_rate_hz: float | None
    identity: MonitorIdentity
    provenance: Provenance
    idle_power_w: float | None = None
    saturated: bool = False
    gate_seen: bool = True
    trace: PowerTrace | None = None
    #: per-layer energy of one inference (J), where the monitor attributes energy to layers
    layer_energy_j: Mapping[str, float] = field(default_factory=dict)
    #: inferences the monitor itself saw inside the window (emulated: forward entries)
    inferences_seen: int | None = None
    #: relative uncertainty of a model's output: the true value lies within [v/f, v*f]
    uncertainty_factor: float | None = None
    basis: str = ""
    notes: tuple[str, ...] = ()
    #: the gate detector's findings, for monitors with a sampled gate input (JLS, Joulescope)
    gate: GateReport | None = None
    #: inferences inside the window by the capture's own record (a JLS annotation)
    recorded_inferences: int | None = None
    #: files holding the raw data every figure of the capture is computed from
    raw_files: tuple[Path, ...] = ()


@dataclass(frozen=True)
class WindowRequest:
    """What a monitor is told when armed: the planned window and where to keep its files."""

    inferences: int
    expected_duration_s: float | None
    work_dir: Path
    firmware: Path | None = None
    #: resolution (s) of the expected duration (N x the clean latency's timer step)
    resolution_s: float = 1e-9
    #: the layers the profile reported, in order (monitors that attribute energy to layers)
    layer_names: tuple[str, ...] = ()
    #: how a sampled gate's window is chosen against ``expected_duration_s``
    window_rule: WindowRule = WindowRule.MATCH
    #: False when the target may run more than ``inferences`` (repeated program runs
    #: filling the window): a recording then does not claim N as its own
    inferences_fixed: bool = True
    #: the gate detector's limits (s), when the user gives them (else from the plan)
    gate_min_pulse_s: float | None = None
    gate_max_dropout_s: float | None = None


class PowerMonitor(ABC):
    """open -> arm -> (the target runs its gated window) -> capture -> close."""

    def __init__(self, source: PowerSource) -> None:
        self.source = source

    @property
    @abstractmethod
    def capabilities(self) -> MonitorCapabilities: ...

    def open(self) -> None:  # noqa: B027 (optional hook)
        """Find and configure the device (raise ``PreflightError`` if it is not there)."""

    @abstractmethod
    def arm(self, request: WindowRequest) -> None:
        """Start capturing: the target's window follows."""

    @abstractmethod
    def capture(self) -> PowerCapture:
        """Stop capturing and return the measured window (``CaptureError`` if none)."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release the device (idempotent)."""

    def set_host_window(self, started_s: float, ended_s: float) -> None:  # noqa: B027
        """Where the window was on the host's monotonic clock (host-gated monitors use it)."""

    def samples_since(self, started_s: float) -> int | None:
        """Samples taken since ``started_s`` on the host's monotonic clock, while armed: a
        host-timed window goes on until it holds enough. None: the monitor cannot say."""
        return None

    def emulator_args(self) -> tuple[str, ...]:
        """Extra emulator arguments the capture needs (the emulated PMU plugin), if any."""
        return ()

    def recorded_inferences(self, given: int | None) -> int:
        """N of a capture recorded elsewhere (``recorded_elsewhere``): ``given``, else the
        capture's own record; ``ConfigError`` when neither says."""
        from aidge_deploy.errors import InternalError

        raise InternalError(f"{self.source} runs its own window: it records no N of its own")

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "GateKind",
    "GatePulse",
    "GateReport",
    "MonitorCapabilities",
    "MonitorIdentity",
    "PowerCapture",
    "PowerMonitor",
    "PowerTrace",
    "WindowRequest",
    "WindowRule",
]
