"""From samples to a window's figures: energy inside, idle outside, a trace to plot.

One streaming path serves every sampled monitor with a gate input: a JLS file read in
chunks (``jls.py``) and a live Joulescope capture (recorded to JLS, then read back the same
way), so the arithmetic is tested once on files whose energy is known analytically. The
window itself comes from the gate detector (``gate.py``). Sensors without a gate (hwmon,
RAPL) are polled with host timestamps; ``integrate_timed`` covers them (``poller.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidge_deploy.errors import CaptureError
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.protocol import GateReport, PowerTrace
from aidge_deploy.profiling.validity import IssueCode

#: points kept for the report's power trace
TRACE_POINTS = 800


@dataclass(frozen=True)
class WindowAnalysis:
    """The gated window of one capture."""

    start_index: int
    end_index: int  # exclusive
    sample_rate_hz: float
    energy_j: float
    idle_power_w: float | None
    saturated: bool
    trace: PowerTrace
    gate: GateReport

    @property
    def samples(self) -> int:
        return self.end_index - self.start_index

    @property
    def duration_s(self) -> float:
        return self.samples / self.sample_rate_hz


class WindowIntegrator:
    """Feed power (W) chunk by chunk once the window is known; ``result()`` integrates it.

    Energy is the sum of the power samples from the window's rising edge (included) to its
    falling edge (excluded) divided by the sample rate (sample-and-hold): bridged dropouts
    are inside it. Idle power is the mean over samples outside every gate pulse.
    """

    def __init__(
        self,
        sample_rate_hz: float,
        total_samples: int,
        window: tuple[int, int],
        busy: Sequence[tuple[int, int]],
        *,
        full_scale: float | None = None,
        source: str = "capture",
    ) -> None:
        if sample_rate_hz <= 0:
            raise PowerCaptureError(
                IssueCode.POWER_CAPTURE_FAILED,
                f"{source}: sample rate {sample_rate_hz} Hz",
                hint="The capture is corrupt.",
            )
        self.rate = float(sample_rate_hz)
        self.window = window
        self.busy = tuple(busy)
        self.source = source
        self.full_scale = full_scale
        self.position = 0
        self.energy_sum = 0.0
        self.idle_sum = 0.0
        self.idle_n = 0
        self.saturated = False
        self.bin = max(1, total_samples // TRACE_POINTS)
        self._bins: list[float] = []
        self._bin_acc = 0.0
        self._bin_n = 0

    def _trace(self, power: np.ndarray) -> None:
        start = 0
        n = len(power)
        while start < n:
            take = min(self.bin - self._bin_n, n - start)
            self._bin_acc += float(np.nansum(power[start : start + take], dtype=np.float64))
            self._bin_n += take
            start += take
            if self._bin_n == self.bin:
                self._bins.append(self._bin_acc / self.bin)
                self._bin_acc, self._bin_n = 0.0, 0

    def _mask(self, intervals: Sequence[tuple[int, int]], base: int, n: int) -> np.ndarray:
        mask = np.zeros(n, dtype=bool)
        for lo, hi in intervals:
            a, b = max(lo, base) - base, min(hi, base + n) - base
            if a < b:
                mask[a:b] = True
        return mask

    def feed(self, power: np.ndarray, current: np.ndarray | None = None) -> None:
        power = np.asarray(power, dtype=np.float64)
        n = len(power)
        if n == 0:
            return
        base = self.position
        inside = self._mask([self.window], base, n)
        if inside.any():
            values = power[inside]
            if np.isnan(values).any():
                raise PowerCaptureError(
                    IssueCode.POWER_CAPTURE_FAILED,
                    f"{self.source}: missing samples (NaN) inside the window, from sample "
                    f"{base + int(np.argmax(inside & np.isnan(power)))}",
                    hint="The instrument dropped data (USB overrun?); record again.",
                )
            self.energy_sum += float(np.sum(values, dtype=np.float64))
            if self.full_scale is not None and current is not None:
                self.saturated |= bool(np.any(np.abs(current[inside]) >= self.full_scale))
        idle = ~self._mask(self.busy, base, n) & ~np.isnan(power)
        self.idle_sum += float(np.sum(power[idle], dtype=np.float64))
        self.idle_n += int(np.count_nonzero(idle))
        self._trace(power)
        self.position += n

    def result(self, gate: GateReport) -> WindowAnalysis:
        bins = list(self._bins)
        if self._bin_n:
            bins.append(self._bin_acc / self._bin_n)
        step = self.bin / self.rate
        start, end = self.window
        trace = PowerTrace(
            time_s=tuple(round(i * step, 9) for i in range(len(bins))),
            power_w=tuple(bins),
            window_start_s=start / self.rate,
            window_end_s=end / self.rate,
        )
        return WindowAnalysis(
            start_index=start,
            end_index=end,
            sample_rate_hz=self.rate,
            energy_j=self.energy_sum / self.rate,
            idle_power_w=self.idle_sum / self.idle_n if self.idle_n else None,
            saturated=self.saturated,
            trace=trace,
            gate=gate,
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
    "WindowAnalysis",
    "WindowIntegrator",
    "decimated_trace",
    "integrate_timed",
]
