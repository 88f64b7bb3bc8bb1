"""From samples to a gated window: edges, energy inside, idle outside, a trace to plot.

One streaming path serves every sampled monitor with a gate input: a JLS file read in
chunks (``jls.py``) and a live Joulescope capture (recorded to JLS, then read back the same
way), so the arithmetic is tested once on files whose energy is known analytically.
Sensors without a gate (hwmon, RAPL) are polled with host timestamps; ``integrate_timed``
cover them (``poller.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidge_deploy.errors import CaptureError
from aidge_deploy.power.protocol import PowerTrace

#: points kept for the report's power trace
TRACE_POINTS = 800


class GateError(CaptureError):
    """The capture has no usable gate window (never opened, already open, never closed)."""


@dataclass(frozen=True)
class WindowAnalysis:
    """The gated window of one capture."""

    start_index: int
    end_index: int  # exclusive
    sample_rate_hz: float
    energy_j: float
    idle_power_w: float | None
    extra_pulses: int
    saturated: bool
    trace: PowerTrace

    @property
    def samples(self) -> int:
        return self.end_index - self.start_index

    @property
    def duration_s(self) -> float:
        return self.samples / self.sample_rate_hz


class GatedWindowAnalyzer:
    """Feed power (W) and gate samples chunk by chunk; ``result()`` gives the window.

    The window is the first high pulse of the gate: energy is the sum of power samples
    from its rising edge (included) to its falling edge (excluded) divided by the sample
    rate (sample-and-hold). Idle power is the mean outside the window, when there is any.
    """

    def __init__(
        self,
        sample_rate_hz: float,
        total_samples: int,
        *,
        full_scale: float | None = None,
        source: str = "capture",
    ) -> None:
        if sample_rate_hz <= 0:
            raise CaptureError(
                f"{source}: sample rate {sample_rate_hz} Hz", hint="The capture is corrupt."
            )
        self.rate = float(sample_rate_hz)
        self.source = source
        self.full_scale = full_scale
        self.position = 0
        self.prev_gate: int | None = None
        self.rise: int | None = None
        self.fall: int | None = None
        self.extra_pulses = 0
        self.energy_sum = 0.0  # sum of power samples inside the window
        self.idle_sum = 0.0
        self.idle_n = 0
        self.saturated = False
        self.started_high = False
        self.bin = max(1, total_samples // TRACE_POINTS)
        self._bins: list[float] = []
        self._bin_acc = 0.0
        self._bin_n = 0

    def _trace(self, power: np.ndarray) -> None:
        start = 0
        n = len(power)
        while start < n:
            take = min(self.bin - self._bin_n, n - start)
            self._bin_acc += float(np.sum(power[start : start + take], dtype=np.float64))
            self._bin_n += take
            start += take
            if self._bin_n == self.bin:
                self._bins.append(self._bin_acc / self.bin)
                self._bin_acc, self._bin_n = 0.0, 0

    def feed(self, power: np.ndarray, gate: np.ndarray, current: np.ndarray | None = None) -> None:
        power = np.asarray(power, dtype=np.float64)
        gate = np.asarray(gate).astype(np.int8) & 1
        if len(power) != len(gate):
            raise CaptureError(
                f"{self.source}: power and gate chunks differ in length "
                f"({len(power)} vs {len(gate)} samples)",
                hint="The capture's signals do not line up: it is truncated or corrupt.",
            )
        if len(power) == 0:
            return
        if np.isnan(power).any():
            raise CaptureError(
                f"{self.source}: missing samples (NaN) around sample "
                f"{self.position + int(np.argmax(np.isnan(power)))}",
                hint="The instrument dropped data (USB overrun?); record again.",
            )
        if self.full_scale is not None and current is not None:
            self.saturated |= bool(np.any(np.abs(current) >= self.full_scale))
        base = self.position
        if self.prev_gate is None:
            self.started_high = bool(gate[0])
            prev = np.concatenate(([gate[0]], gate[:-1]))
        else:
            prev = np.concatenate(([self.prev_gate], gate[:-1]))
        rises = np.flatnonzero((gate == 1) & (prev == 0)) + base
        falls = np.flatnonzero((gate == 0) & (prev == 1)) + base
        edges = sorted([(int(r), 1) for r in rises] + [(int(f), 0) for f in falls])
        for index, level in edges:
            if level == 1:
                if self.rise is None:
                    self.rise = index
                elif self.fall is not None:
                    self.extra_pulses += 1
            elif self.rise is not None and self.fall is None:
                self.fall = index
        # the part of this chunk inside the (first) window
        end = base + len(power)
        if self.rise is None:
            lo = hi = base
        else:
            lo = min(max(base, self.rise), end)
            hi = max(lo, min(end, self.fall if self.fall is not None else end))
        inside = power[lo - base : hi - base]
        self.energy_sum += float(np.sum(inside, dtype=np.float64))
        outside = float(np.sum(power, dtype=np.float64)) - float(np.sum(inside, dtype=np.float64))
        self.idle_sum += outside
        self.idle_n += len(power) - len(inside)
        self._trace(power)
        self.prev_gate = int(gate[-1])
        self.position += len(power)

    def result(self) -> WindowAnalysis:
        src = self.source
        if self.rise is None:
            if self.started_high:
                raise GateError(
                    f"{src}: the gate was already high when the capture started",
                    hint="Start the capture before the target opens its gate (arm first), "
                    "or check the gate wiring polarity.",
                )
            raise GateError(
                f"{src}: the gate never opened ({self.position} samples, no rising edge)",
                hint="Wire the target's gate pin to the monitor's GPI input named by the "
                "capture (and its Vref to the target I/O rail), or pick the right channel.",
            )
        if self.fall is None:
            raise GateError(
                f"{src}: the gate opened at sample {self.rise} but never closed",
                hint="The capture ended inside the window: it is truncated, or the target "
                "hung; capture longer.",
            )
        bins = list(self._bins)
        if self._bin_n:
            bins.append(self._bin_acc / self._bin_n)
        step = self.bin / self.rate
        trace = PowerTrace(
            time_s=tuple(round(i * step, 9) for i in range(len(bins))),
            power_w=tuple(bins),
            window_start_s=self.rise / self.rate,
            window_end_s=self.fall / self.rate,
        )
        return WindowAnalysis(
            start_index=self.rise,
            end_index=self.fall,
            sample_rate_hz=self.rate,
            energy_j=self.energy_sum / self.rate,
            idle_power_w=self.idle_sum / self.idle_n if self.idle_n else None,
            extra_pulses=self.extra_pulses,
            saturated=self.saturated,
            trace=trace,
        )


def integrate_timed(
    times_s: Sequence[float] | np.ndarray,
    power_w: Sequence[float] | np.ndarray,
    start_s: float,
    end_s: float,
) -> float:
    """Energy (J) of irregular power samples over ``[start_s, end_s]`` (trapezoids, with
    the series linearly interpolated at the two window edges)."""
    t = np.asarray(times_s, dtype=np.float64)
    p = np.asarray(power_w, dtype=np.float64)
    if len(t) < 2 or end_s <= start_s:
        raise CaptureError(
            f"{len(t)} power reading(s) cannot cover a {end_s - start_s:.3f} s window",
            hint="Sample faster (shorter update_interval) or plan a longer window.",
        )
    inside = (t > start_s) & (t < end_s)
    grid = np.concatenate(([start_s], t[inside], [end_s]))
    values = np.interp(grid, t, p)
    return float(np.sum((values[1:] + values[:-1]) * np.diff(grid)) / 2.0)


def decimated_trace(
    times_s: Sequence[float], power_w: Sequence[float], start_s: float, end_s: float
) -> PowerTrace:
    """A report trace from irregular samples (kept as is below ``TRACE_POINTS``)."""
    t = list(times_s)
    p = list(power_w)
    step = max(1, len(t) // TRACE_POINTS)
    return PowerTrace(tuple(t[::step]), tuple(p[::step]), start_s, end_s)


__all__ = [
    "TRACE_POINTS",
    "GateError",
    "GatedWindowAnalyzer",
    "WindowAnalysis",
    "decimated_trace",
    "integrate_timed",
]
