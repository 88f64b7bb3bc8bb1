"""What a run's times are: the timer behind them, how fine it is, and how they were derived.

Every time figure carries the step of the timer that produced it (``metrics.Metric``). The
step depends on the program that printed the figure, i.e. on the output protocol:

* the Cortex-M benchmark (``aidge-uart-benchmark/v1``, ``aidge-uart-validation/v1``) reads
  ``HAL_GetTick()`` (a 1 ms tick) around ``max(10, nb_iterations)`` forwards and prints the
  ticks divided by that count, so one latency sample moves in steps of ``1 ms / N`` (0.1 ms
  for 10 forwards); a layer is timed by the same tick around *each* call, so a per-layer
  time is a mean of whole-tick readings: its step is the tick, 1 ms;
* host and Linux-board programs (``aidge-stdout-benchmark/v1``) print
  ``std::chrono::steady_clock`` intervals to 6 decimals of a millisecond (1 ns);
* MLPerf Tiny prints two microsecond timestamps around N inferences.

Each protocol declares its timer (``OutputProtocol.timer``, one of those below for the
built-in ones): a plug-in's protocol says what its program's clock is the same way.

The nominal step is checked against the samples themselves (the greatest common step of
the printed values): a firmware whose tick is not what the protocol says is reported with
the step it really has. Emulated boards replace all of this by instructions ÷ core clock
(``boards.baremetal.qemu``): their timer is the instruction counter.

A leaf module besides ``metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aidge_deploy.metrics import Provenance

__all__ = [
    "MLPERF_LAP_US",
    "STEADY_CLOCK",
    "UART_TICK",
    "ProtocolTimer",
    "RunTimes",
    "TimingInfo",
    "detect_step",
    "estimate_label",
    "protocol_timing",
]


@dataclass(frozen=True)
class ProtocolTimer:
    """The clock behind one output protocol's time readings."""

    #: what reads the time, for people
    source: str
    #: one step of the raw timer, ms
    tick_ms: float
    #: decimals the program prints a latency sample with (the grid the samples live on)
    printed_decimals: int
    #: whether a latency sample is the timer's reading divided by the number of forwards
    #: timed together (the Cortex-M benchmark times max(10, nb_iterations) forwards)
    averages_forwards: bool = False
    #: step of a per-layer reading, ms (None: the protocol prints no per-layer times)
    layer_tick_ms: float | None = None


#: the Cortex-M benchmark firmware's timer (each protocol declares its own: ``timer``)
UART_TICK = ProtocolTimer(
    "HAL_GetTick() (1 ms SysTick tick)", 1.0, 3, averages_forwards=True, layer_tick_ms=1.0
)
#: the host and Linux boards' benchmark programs' timer
STEADY_CLOCK = ProtocolTimer(
    "std::chrono::steady_clock, printed to 1 ns", 1e-6, 6, layer_tick_ms=1e-6
)
#: the MLPerf Tiny firmware's timestamps
MLPERF_LAP_US = ProtocolTimer("m-lap-us timestamps (1 µs)", 1e-3, 3)


@dataclass(frozen=True)
class TimingInfo:
    """How the times of one run were obtained: provenance, steps, source, label."""

    provenance: Provenance
    #: step of one latency sample, ms (None: the run has no latency samples)
    resolution_ms: float | None
    #: step of one per-layer time, ms (None: no per-layer times)
    layer_resolution_ms: float | None
    #: how the times were obtained (the timer, the conversion)
    source: str
    #: the phrase shown next to every time of the run ("estimated at 25 MHz, CPI = 1")
    label: str
    #: the core clock an estimate divides by, Hz
    clock_hz: float | None = None
    #: the sample step was detected from the samples (it differs from the protocol's)
    detected: bool = False
    #: the count these times are derived from (an emulated board's times are its
    #: instruction count ÷ core clock: the same quantity, never charted twice)
    derived_from: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "provenance": self.provenance.value,
            "resolution_ms": self.resolution_ms,
            "layer_resolution_ms": self.layer_resolution_ms,
            "source": self.source,
            "label": self.label,
            "clock_hz": self.clock_hz,
            "detected": self.detected,
            "derived_from": self.derived_from,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimingInfo:
        return cls(
            provenance=Provenance(data["provenance"]),
            resolution_ms=data.get("resolution_ms"),
            layer_resolution_ms=data.get("layer_resolution_ms"),
            source=str(data.get("source") or ""),
            label=str(data.get("label") or ""),
            clock_hz=data.get("clock_hz"),
            detected=bool(data.get("detected", False)),
            derived_from=data.get("derived_from"),
        )


@dataclass(frozen=True)
class RunTimes:
    """A run's times as reported: per-inference samples and per-layer times, ms."""

    info: TimingInfo | None
    timings_ms: tuple[float, ...] | None
    layer_times_ms: Mapping[str, float] | None
    #: factor from the program's raw time readings to the reported times (an emulated
    #: board's virtual clock -> the estimate at its core clock); 1 on real targets
    scale: float = 1.0


def estimate_label(clock_hz: float) -> str:
    """How an emulated time is labelled wherever it appears."""
    return f"estimated at {clock_hz / 1e6:g} MHz, CPI = 1"


def detect_step(samples: Sequence[float], decimals: int) -> float | None:
    """The greatest step all ``samples`` are multiples of, on their printed grid.

    ``0.600 0.500 0.600`` (3 decimals) -> 0.1. None when fewer than two distinct non-zero
    values exist (one value says nothing about the step it was taken with).
    """
    scale = 10**decimals
    grid = {round(abs(float(s)) * scale) for s in samples}
    grid.discard(0)
    if len(grid) < 2:
        return None
    step = 0
    for value in grid:
        step = math.gcd(step, value)
    return step / scale


def forwards_per_sample(app_config: Mapping[str, Any] | None) -> int:
    """Forwards the Cortex-M benchmark times together: ``max(10, nb_iterations)``."""
    iterations = int((app_config or {}).get("nb_iterations", 0) or 0)
    return max(10, iterations)


def protocol_timing(
    timer: ProtocolTimer | None,
    provenance: Provenance,
    samples: Sequence[float] | None,
    app_config: Mapping[str, Any] | None,
    *,
    has_layer_times: bool = False,
) -> TimingInfo | None:
    """The timing of a run whose times are the program's own readings (not converted), by
    the timer of its output protocol (``OutputProtocol.timer``).

    None when the protocol prints no times. The sample step is the protocol's nominal one
    unless the samples show a finer grid (then the detected step, ``detected=True``).
    """
    if timer is None:
        return None
    nominal = timer.tick_ms
    source = timer.source
    if timer.averages_forwards:
        n = forwards_per_sample(app_config)
        nominal = timer.tick_ms / n
        source += f", read around {n} forwards: one sample steps by {nominal:g} ms"
    step = nominal
    detected = False
    if samples:
        found = detect_step(samples, timer.printed_decimals)
        if found is not None and found < nominal * (1 - 1e-9):
            step, detected = found, True
            source += f" (the samples step by {found:g} ms)"
    label = provenance.label
    return TimingInfo(
        provenance=provenance,
        resolution_ms=step if samples else None,
        layer_resolution_ms=timer.layer_tick_ms if has_layer_times else None,
        source=source,
        label=label,
        detected=detected,
    )
