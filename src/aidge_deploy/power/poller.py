"""Host-timed monitors: poll a sensor in a thread around the run, cut the window by time.

hwmon sensors and RAPL counters have no gate input, so the window is the one the host saw:
from the moment the target's run started to the moment it ended (``set_host_window``). The
poller samples from ``arm`` (a short idle stretch first, for the baseline) until a short
idle stretch after the window; a sensor is either an instantaneous power (integrated) or a
cumulative energy counter (differenced, wraps already undone by the sensor code).
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aidge_deploy.errors import CaptureError, InternalError
from aidge_deploy.power.analysis import decimated_trace, integrate_timed
from aidge_deploy.power.protocol import (
    GateKind,
    MonitorCapabilities,
    MonitorIdentity,
    PowerCapture,
    PowerMonitor,
    WindowRequest,
)
from aidge_deploy.power.source import PowerSource

if TYPE_CHECKING:
    from aidge_deploy.power.sysfs import SysfsReader

#: idle stretch sampled before and after the window (baseline)
IDLE_S = 0.3
#: poll period bounds (s)
MIN_PERIOD_S, MAX_PERIOD_S, DEFAULT_PERIOD_S = 0.005, 0.2, 0.02
#: reads timed at open, and the poll period kept above their slowest by this factor
PROBE_READS, READ_MARGIN = 3, 1.5
#: the raw readings of a window, kept beside the run's logs (and in the bundle)
SAMPLES_FILE = "power-samples.csv"


class PolledMonitor(PowerMonitor):
    """A sensor read every ``period_s`` in a thread while armed."""

    #: True: ``read_value`` returns a cumulative energy (J); False: a power (W)
    cumulative: bool = False

    def __init__(self, source: PowerSource, reader_factory: Callable[[], SysfsReader]) -> None:
        super().__init__(source)
        self.reader_factory = reader_factory
        self.reader: SysfsReader | None = None
        self.period_s = DEFAULT_PERIOD_S
        self._times: list[float] = []
        self._values: list[float] = []
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._window: tuple[float, float] | None = None
        self._work_dir: Path | None = None
        #: longest time one reading took (s): the timestamp of a reading is the middle of
        #: its read, so a window edge is placed within half of it
        self.slowest_read_s = 0.0

    # -- what a sensor provides -------------------------------------------------------------

    @abstractmethod
    def resolve(self, reader: SysfsReader) -> None:
        """Find the sensor files (``CaptureError`` when there is none) and set ``period_s``."""

    @abstractmethod
    def read_value(self, reader: SysfsReader) -> float:
        """One reading: W, or J since an arbitrary origin when ``cumulative``."""

    @abstractmethod
    def identity(self) -> MonitorIdentity: ...

    scope: str = ""

    @property
    def capabilities(self) -> MonitorCapabilities:
        reader = self.reader
        return MonitorCapabilities(
            channels=("energy",) if self.cumulative else ("power",),
            sample_rate_hz=1.0 / self.period_s,
            gate=GateKind.HOST,
            gate_input=None,
            sees_idle=True,
            provenance=reader.provenance if reader is not None else self._provenance_guess(),
            scope=self.scope,
        )

    def _provenance_guess(self):  # type: ignore[no-untyped-def]
        from aidge_deploy.metrics import Provenance

        return Provenance.HOST

    # -- protocol -------------------------------------------------------------------------

    def open(self) -> None:
        self.reader = self.reader_factory()
        try:
            self.resolve(self.reader)
            # readable now, not only in the thread; and how fast: a sensor read over SSH
            # is a round trip, slower than the chip updates. The poll period (and so the
            # sample rate N is planned on) is what the reads allow, not the chip's rate.
            slowest = 0.0
            for _ in range(PROBE_READS):
                before = time.monotonic()
                self.read_value(self.reader)
                slowest = max(slowest, time.monotonic() - before)
            self.period_s = max(self.period_s, READ_MARGIN * slowest)
        except BaseException:
            self.close()
            raise

    def _loop(self) -> None:
        reader = self.reader
        if reader is None:
            return
        next_at = time.monotonic()
        while not self._stop.is_set():
            before = time.monotonic()
            try:
                value = self.read_value(reader)
            except BaseException as exc:  # reported by capture(); the thread just ends
                self._error = exc
                return
            after = time.monotonic()
            # the sensor was read somewhere inside [before, after] (a sysfs read, or an SSH
            # round trip): its midpoint is off by at most half the read's duration
            self._times.append((before + after) / 2)
            self._values.append(value)
            self.slowest_read_s = max(self.slowest_read_s, after - before)
            next_at += self.period_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def arm(self, request: WindowRequest) -> None:
        if self.reader is None:
            raise InternalError(f"{self.source} is not open")
        self._times, self._values, self._error = [], [], None
        self._work_dir = request.work_dir
        self.slowest_read_s = 0.0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"poll-{self.source}", daemon=True)
        self._thread.start()
        time.sleep(IDLE_S)

    def set_host_window(self, started_s: float, ended_s: float) -> None:
        self._window = (started_s, ended_s)

    def samples_since(self, started_s: float) -> int:
        times = list(self._times)  # the poll thread appends meanwhile
        return sum(1 for t in times if t >= started_s)

    def _stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15.0)
            self._thread = None

    def capture(self) -> PowerCapture:
        if self._window is None:
            self._stop_thread()
            raise InternalError(f"{self.source}: no host window was set")
        start, end = self._window
        remaining = end + IDLE_S - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        self._stop_thread()
        if self._error is not None:
            raise CaptureError(
                f"{self.source}: reading the sensor failed during the run: {self._error}",
                hint="The sensor went away or lost its permissions mid-run.",
            ) from self._error
        capture = self.window_capture(self._times, self._values, start, end)
        if self._work_dir is None:
            return capture
        path = self.write_samples(self._work_dir / SAMPLES_FILE, start, end)
        return replace(capture, raw_files=(*capture.raw_files, path))

    def write_samples(self, path: Path, start: float, end: float) -> Path:
        """The window's raw readings as CSV: every figure of the capture is computed from
        them (``window_capture``), so a bundle holding this file reproduces them."""
        kind = "energy_j" if self.cumulative else "power_w"
        what = (
            "cumulative energy counter (J since an arbitrary origin, wraps undone)"
            if self.cumulative
            else "instantaneous power (W)"
        )
        lines = [
            f"# aidge-deploy power samples of {self.source} ({self.scope})",
            "# time_s: host monotonic clock (s), stamped at the middle of each read",
            f"# {kind}: {what}",
            f"# window_start_s={start!r} window_end_s={end!r} kind={kind}",
            f"time_s,{kind}",
            *(f"{t!r},{v!r}" for t, v in zip(self._times, self._values, strict=True)),
        ]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def window_capture(
        self, times: list[float], values: list[float], start: float, end: float
    ) -> PowerCapture:
        """Energy of ``[start, end]`` from the polled series (pure: tested directly)."""
        if len(times) < 2 or times[0] > start or times[-1] < end:
            raise CaptureError(
                f"{self.source}: the readings ({len(times)}) do not cover the window",
                hint="The sensor answered too slowly; plan a longer window (--power-window).",
            )
        t = np.asarray(times)
        v = np.asarray(values)
        if self.cumulative:
            energy = float(np.interp(end, t, v) - np.interp(start, t, v))
            mids = (t[1:] + t[:-1]) / 2
            power = np.diff(v) / np.diff(t)
            outside = (t[1:] <= start) | (t[:-1] >= end)
            # energy over time outside the window (a mean of rates would weigh short and
            # long poll intervals alike)
            idle = (
                float(np.sum(np.diff(v)[outside]) / np.sum(np.diff(t)[outside]))
                if outside.any()
                else None
            )
            trace = decimated_trace(
                (mids - t[0]).tolist(), power.tolist(), start - t[0], end - t[0]
            )
        else:
            energy = integrate_timed(t, v, start, end)
            outside = (t < start) | (t > end)
            idle = float(np.mean(v[outside])) if outside.any() else None
            trace = decimated_trace((t - t[0]).tolist(), v.tolist(), start - t[0], end - t[0])
        inside = int(np.count_nonzero((t >= start) & (t <= end)))
        rate = (len(t) - 1) / (t[-1] - t[0]) if t[-1] > t[0] else 1.0 / self.period_s
        reader = self.reader
        return PowerCapture(
            energy_j=energy,
            duration_s=end - start,
            duration_resolution_s=self.period_s,
            samples=inside,
            sample_rate_hz=rate,
            identity=self._identity_with_reads(),
            provenance=self.capabilities.provenance,
            idle_power_w=idle,
            trace=trace,
            basis=(
                "energy counter read at the host-timed window edges (interpolated)"
                if self.cumulative
                else "power readings integrated over the host-timed window (trapezoids)"
            )
            + (f", read on {reader.where}" if reader is not None else ""),
        )

    def _identity_with_reads(self) -> MonitorIdentity:
        identity = self.identity()
        slowest = {"slowest_read_ms": f"{self.slowest_read_s * 1e3:.3f}"}
        return replace(identity, details={**identity.details, **slowest})

    def close(self) -> None:
        self._stop_thread()
        if self.reader is not None:
            self.reader.close()
            self.reader = None


__all__ = ["IDLE_S", "SAMPLES_FILE", "PolledMonitor"]
