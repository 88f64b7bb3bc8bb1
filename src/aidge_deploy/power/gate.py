"""Gate detection on a sampled gate input, as instruments do it.

A gate wire picks up glitches, bounces on its edges and drops out for a sample now and
then; taking "the first high pulse" as the window turns a 2 µs glitch into the window. So
the gate input goes through what a logic analyser or a scope's trigger does:

1. **hysteresis** on the level: a sample is high at or above 0.7 of the logic swing, low
   at or below 0.3, and in between it keeps the level it had (a U1 input is 0 or 1);
2. **a minimum pulse width**: a level held for fewer samples than ``min_pulse_s`` is a
   glitch, not an edge (bounce at an edge is a burst of such glitches: the edge is where
   the level settles). By default: the larger of ``MIN_PULSE_SAMPLES`` samples and
   ``MIN_PULSE_FRACTION`` of the planned window;
3. **dropouts bridged**: a low gap of at most ``max_dropout_s`` between two pulses is a
   dropout inside one window (by default ``MAX_DROPOUT_FRACTION`` of the planned window,
   ``MAX_DROPOUT_S`` without a plan, never less than the minimum pulse width);
4. **the window is the pulse consistent with N x clean latency** (within the validity
   tolerance; for windows of whole program runs: at least that long). No pulse, a pulse that
   never closes, none consistent, or two consistent are each a validity failure with its own
   code (``failures.py``), never a guess.

Every edge found is reported (``GateReport``): raw level changes, glitches ignored, dropouts
bridged, pulses, and which one was chosen and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aidge_deploy.errors import ConfigError
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.protocol import GatePulse, GateReport, WindowRule
from aidge_deploy.profiling.validity import POWER_WINDOW_TOLERANCE, IssueCode

#: a pulse lasts at least this many samples of the gate input
MIN_PULSE_SAMPLES = 4
#: ... and at least this fraction of the planned window
MIN_PULSE_FRACTION = 1e-4
#: dropouts up to this fraction of the planned window are bridged
MAX_DROPOUT_FRACTION = 1e-3
#: dropouts bridged when no window is planned (s)
MAX_DROPOUT_S = 1e-3
#: hysteresis thresholds, as fractions of the logic swing (0 = low, 1 = high)
LOW_THRESHOLD, HIGH_THRESHOLD = 0.3, 0.7
#: a gate input changing level more often than this is noise, not a gate
MAX_EDGES = 1_000_000
#: glitches, dropouts and pulses listed in a report (counts are always complete)
LISTED = 20


@dataclass(frozen=True)
class GateSettings:
    """The detector's two limits (s) and how they were chosen."""

    min_pulse_s: float
    max_dropout_s: float
    basis: str


def gate_settings(
    rate_hz: float,
    planned_window_s: float | None = None,
    *,
    min_pulse_s: float | None = None,
    max_dropout_s: float | None = None,
) -> GateSettings:
    """The limits for a gate sampled at ``rate_hz`` around a window planned to last
    ``planned_window_s`` (None: unknown); either limit may be given instead."""
    floor = MIN_PULSE_SAMPLES / rate_hz
    if min_pulse_s is not None:
        if not min_pulse_s > 0:
            raise ConfigError(
                f"The gate's minimum pulse width must be positive, got {min_pulse_s}",
                hint="Give it in seconds, e.g. 50e-6.",
            )
        pulse, pulse_how = float(min_pulse_s), "given"
    elif planned_window_s:
        pulse = max(floor, MIN_PULSE_FRACTION * planned_window_s)
        pulse_how = (
            f"the larger of {MIN_PULSE_SAMPLES} samples at {rate_hz:g} Hz and "
            f"{MIN_PULSE_FRACTION:g} x the planned window {planned_window_s:.6g} s"
        )
    else:
        pulse, pulse_how = floor, f"{MIN_PULSE_SAMPLES} samples at {rate_hz:g} Hz (no plan)"
    if max_dropout_s is not None:
        if not max_dropout_s >= 0:
            raise ConfigError(
                f"The gate's longest bridged dropout cannot be negative, got {max_dropout_s}",
                hint="Give it in seconds, e.g. 1e-3 (0 bridges none).",
            )
        dropout, dropout_how = float(max_dropout_s), "given"
    elif planned_window_s:
        dropout = max(pulse, MAX_DROPOUT_FRACTION * planned_window_s)
        dropout_how = f"{MAX_DROPOUT_FRACTION:g} x the planned window, at least the minimum pulse"
    else:
        dropout = max(pulse, MAX_DROPOUT_S)
        dropout_how = f"{MAX_DROPOUT_S * 1e3:g} ms (no plan), at least the minimum pulse"
    return GateSettings(
        pulse,
        dropout,
        f"minimum pulse {pulse * 1e6:.4g} µs ({pulse_how}); dropouts bridged up to "
        f"{dropout * 1e6:.4g} µs ({dropout_how}); hysteresis {LOW_THRESHOLD:g}/"
        f"{HIGH_THRESHOLD:g} of the logic swing",
    )


class GateScanner:
    """A gate input's levels fed chunk by chunk: where its logic level changes."""

    def __init__(self, rate_hz: float, gate_input: str, source: str) -> None:
        self.rate = float(rate_hz)
        self.gate_input = gate_input
        self.source = source
        self.position = 0
        self.initial: int | None = None
        self.level: int | None = None
        self.edges = 0
        self._changes: list[np.ndarray] = []

    def feed(self, values: np.ndarray) -> None:
        x = np.asarray(values, dtype=np.float32)
        n = len(x)
        if n == 0:
            return
        logic = np.full(n, -1, dtype=np.int8)
        logic[x >= HIGH_THRESHOLD] = 1
        logic[x <= LOW_THRESHOLD] = 0
        known = logic >= 0
        if self.level is None:
            self.initial = int(logic[int(np.argmax(known))]) if known.any() else 0
            self.level = self.initial
        # between the thresholds (or NaN) a sample keeps the level it had: hysteresis
        last_known = np.where(known, np.arange(n), -1)
        np.maximum.accumulate(last_known, out=last_known)
        filled = np.where(last_known >= 0, logic[np.maximum(last_known, 0)], self.level)
        before = np.concatenate(([self.level], filled[:-1]))
        changes = np.flatnonzero(filled != before) + self.position
        self.edges += len(changes)
        if self.edges > MAX_EDGES:
            raise PowerCaptureError(
                IssueCode.POWER_GATE_AMBIGUOUS,
                f"{self.source}: the gate input {self.gate_input} changes level more than "
                f"{MAX_EDGES:,} times: that is noise, not a gate",
                hint="Check the gate wiring (and the Joulescope's Vref on the target's I/O "
                "rail), or name the right input.",
            )
        if len(changes):
            self._changes.append(changes)
        self.level = int(filled[-1])
        self.position += n

    def changes(self) -> np.ndarray:
        if not self._changes:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(self._changes).astype(np.int64)


def _listed(items: list[tuple[int, int]], rate: float) -> tuple[GatePulse, ...]:
    return tuple(GatePulse(start / rate, width / rate) for start, width in items[:LISTED])


def _widths(items: list[tuple[int, int]], rate: float) -> str:
    shown = ", ".join(f"{w / rate:.6g} s at {s / rate:.6g} s" for s, w in items[:5])
    return shown + (f" and {len(items) - 5} more" if len(items) > 5 else "")


@dataclass(frozen=True)
class GateWindow:
    """The chosen window in samples of the gate input, with the whole report."""

    start: int
    end: int  # exclusive
    report: GateReport
    #: every pulse (started-high and unclosed ones included), in gate samples: the
    #: target was not idle there
    busy: tuple[tuple[int, int], ...]


def find_window(
    scanner: GateScanner,
    settings: GateSettings,
    *,
    expected_s: float | None,
    rule: WindowRule = WindowRule.MATCH,
    tolerance: float = POWER_WINDOW_TOLERANCE,
) -> GateWindow:
    """Debounce, bridge, and choose the window (``PowerCaptureError`` with its code if none)."""
    rate, total = scanner.rate, scanner.position
    min_pulse = max(1, math.ceil(settings.min_pulse_s * rate - 1e-9))
    max_gap = math.floor(settings.max_dropout_s * rate + 1e-9)
    bounds = np.concatenate(([0], scanner.changes(), [total]))
    starts, lengths = bounds[:-1].tolist(), np.diff(bounds).tolist()
    initial = scanner.initial or 0
    levels = [(initial + i) % 2 for i in range(len(starts))]
    glitches: list[tuple[int, int]] = []
    stable = levels[0]
    if len(starts) > 1 and lengths[0] < min_pulse:  # a glitch at the very start
        glitches.append((starts[0], lengths[0]))
        stable = levels[1]
    start_level = stable
    edges: list[tuple[int, int]] = []
    for i in range(1, len(starts)):
        if levels[i] == stable:
            continue
        if lengths[i] >= min_pulse:
            edges.append((starts[i], levels[i]))
            stable = levels[i]
        else:
            glitches.append((starts[i], lengths[i]))
    # pulses from the debounced edges (an end of None: still open when the capture ended),
    # then a short low gap between two pulses bridged as a dropout
    opens: list[int] = [0] if start_level == 1 else []
    closes: list[int | None] = [None] if start_level == 1 else []
    dropouts: list[tuple[int, int]] = []
    for index, level in edges:
        last_close = closes[-1] if closes else None
        if level == 1 and last_close is not None and index - last_close <= max_gap:
            dropouts.append((last_close, index - last_close))
            closes[-1] = None
        elif level == 1:
            opens.append(index)
            closes.append(None)
        elif closes:
            closes[-1] = index
    started_high = start_level == 1
    unclosed = opens[-1] if closes and closes[-1] is None else None
    closed = [
        (begin, end - begin)
        for k, (begin, end) in enumerate(zip(opens, closes, strict=True))
        if end is not None and not (k == 0 and started_high)
    ]
    expected = None if not expected_s else expected_s * rate
    if expected is None:
        candidates = list(range(len(closed)))
        wanted = "any pulse (no clean latency to choose by)"
    elif rule is WindowRule.MATCH:
        candidates = [
            k for k, (_, w) in enumerate(closed) if abs(w - expected) <= tolerance * expected
        ]
        wanted = f"N x clean latency = {expected_s:.6g} s ±{tolerance:.0%}"
    else:
        candidates = [k for k, (_, w) in enumerate(closed) if w >= (1 - tolerance) * expected]
        wanted = f"at least N x clean latency = {expected_s:.6g} s (-{tolerance:.0%})"
    chosen = candidates[0] if len(candidates) == 1 else None
    report = GateReport(
        gate_input=scanner.gate_input,
        sample_rate_hz=rate,
        min_pulse_s=settings.min_pulse_s,
        max_dropout_s=settings.max_dropout_s,
        settings_basis=settings.basis,
        edges=scanner.edges,
        glitch_count=len(glitches),
        glitches=_listed(glitches, rate),
        dropout_count=len(dropouts),
        dropouts=_listed(dropouts, rate),
        pulse_count=len(closed),
        pulses=_listed(closed, rate),
        chosen=chosen,
        expected_s=expected_s or None,
        selection=f"the one pulse lasting {wanted}" if chosen is not None else "none",
        unclosed_at_s=None if unclosed is None else unclosed / rate,
        started_high=started_high,
    )
    src = f"{scanner.source} ({scanner.gate_input})"
    found = (
        f"{scanner.edges} level changes, {len(glitches)} glitch(es) shorter than "
        f"{settings.min_pulse_s * 1e6:.4g} µs ignored, {len(dropouts)} dropout(s) bridged"
    )
    if chosen is not None:
        start, width = closed[chosen]
        busy = tuple(
            (begin, total if end is None else end) for begin, end in zip(opens, closes, strict=True)
        )
        return GateWindow(start, start + width, report, busy)
    if len(candidates) > 1:
        shown = _widths([closed[k] for k in candidates], rate)
        raise _failure(
            IssueCode.POWER_GATE_AMBIGUOUS,
            f"{src}: {len(candidates)} gate pulses could be the window ({wanted}): {shown}",
            "The tool does not guess which pulse holds the inferences: record one window per "
            "capture"
            + (
                ", or give the clean latency so the window is chosen by its width."
                if expected is None
                else "."
            ),
            report,
        )
    if closed:
        raise _failure(
            IssueCode.POWER_WINDOW_MISMATCH,
            f"{src}: no gate pulse lasts {wanted}; pulses: {_widths(closed, rate)} ({found})",
            "The capture does not hold the N inferences it is analysed for: check N "
            "(--inferences / --power-inferences) and that the capture is of this run.",
            report,
        )
    if unclosed is not None and not (started_high and unclosed == 0):
        raise _failure(
            IssueCode.POWER_GATE_UNCLOSED,
            f"{src}: the gate opened at {unclosed / rate:.6g} s and never closed before the "
            f"capture ended at {total / rate:.6g} s ({found})",
            "The capture ended inside the window: record longer (past the terminal record), "
            "or the target hung inside it.",
            report,
        )
    if started_high:
        raise _failure(
            IssueCode.POWER_GATE_MISSING,
            f"{src}: the gate was already high when the capture started"
            + (" and never fell" if unclosed == 0 else "")
            + f" ({found})",
            "Start the capture before the target opens its gate (arm first), or check the "
            "gate wiring's polarity.",
            report,
        )
    raise _failure(
        IssueCode.POWER_GATE_MISSING,
        f"{src}: the gate never opened ({total} samples, {found})",
        "Wire the target's gate pin to the monitor's GPI input the capture records (and its "
        "Vref to the target's I/O rail), and run the firmware's power variant.",
        report,
    )


def _failure(code: IssueCode, message: str, hint: str, report: GateReport) -> PowerCaptureError:
    return PowerCaptureError(code, message, hint, gate=report)


__all__ = [
    "HIGH_THRESHOLD",
    "LOW_THRESHOLD",
    "MAX_DROPOUT_FRACTION",
    "MAX_DROPOUT_S",
    "MIN_PULSE_FRACTION",
    "MIN_PULSE_SAMPLES",
    "GateScanner",
    "GateSettings",
    "GateWindow",
    "WindowRule",
    "find_window",
    "gate_settings",
]
