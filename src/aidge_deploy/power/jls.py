"""``jls:FILE``: a Joulescope capture file (JLS v2, read with ``pyjls``), analysed by gate.

This is what people do with captures from the Joulescope UI or ``pyjoulescope_driver
record``: the file holds current and voltage (or power) and the GPI inputs; the window is
the first pulse on the gate input (``gpi[0]`` unless the file has only another one), the
energy is integrated inside it and the idle baseline measured outside it. The live
``joulescope`` monitor records to a JLS file and reads it back through this same path.
Pitfalls of the format (relative sample ids, packed U1, ValueError) are in power.md §2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import CaptureError, PreflightError
from aidge_deploy.power.analysis import GatedWindowAnalyzer, WindowAnalysis
from aidge_deploy.power.protocol import MonitorIdentity

#: samples read per chunk (a 1 MS/s capture is read a second at a time)
CHUNK = 1 << 20
#: current full scale of each instrument (A): a reading at or above it is saturated
FULL_SCALE_A = {"JS220": 10.0, "JS110": 3.0}
_GPI = re.compile(r"^gpi\[(\d+)\]$")

INSTALL_HINT = "pip install 'aidge-deploy[joulescope]' (pyjls and pyjoulescope_driver)"


def import_pyjls() -> Any:
    """``pyjls``, or a ``PreflightError`` that says how to install it."""
    try:
        import pyjls
    except ImportError as exc:
        raise PreflightError(
            f"Reading JLS captures needs pyjls, which is not installed ({exc})",
            hint=INSTALL_HINT,
        ) from exc
    return pyjls


@dataclass(frozen=True)
class JlsSignals:
    """The signal ids of one capture: power (or current and voltage) and the gate."""

    power: int | None
    current: int | None
    voltage: int | None
    gate: int
    gate_name: str
    source_id: int


def _signals(reader: Any, path: Path, gate_name: str | None) -> JlsSignals:
    by_name: dict[str, Any] = {}
    for signal_id, sig in reader.signals.items():
        if signal_id == 0:
            continue
        by_name.setdefault(sig.name, sig)
    gates = sorted(
        (int(m.group(1)), name) for name in by_name if (m := _GPI.match(name)) is not None
    )
    if gate_name is None:
        if not gates:
            raise CaptureError(
                f"{path}: no gate input in the capture (signals: {', '.join(sorted(by_name))})",
                hint="Record the GPI input wired to the target's gate pin too "
                "(pyjoulescope_driver record --signals i,v,0), then analyse again.",
            )
        gate_name = gates[0][1]
    elif gate_name not in by_name:
        raise CaptureError(
            f"{path}: no signal {gate_name!r} (signals: {', '.join(sorted(by_name))})",
            hint="Name a gpi[N] signal the capture has.",
        )

    def sid(name: str) -> int | None:
        sig = by_name.get(name)
        return None if sig is None else int(sig.signal_id)

    power, current, voltage = sid("power"), sid("current"), sid("voltage")
    if power is None and (current is None or voltage is None):
        raise CaptureError(
            f"{path}: neither power nor current and voltage in the capture",
            hint="Record current and voltage (or power) with the gate input.",
        )
    gate_sig = by_name[gate_name]
    return JlsSignals(
        power, current, voltage, int(gate_sig.signal_id), gate_name, int(gate_sig.source_id)
    )


def _check_lengths(reader: Any, ids: list[int], path: Path) -> None:
    lengths = {reader.signals[i].name: int(reader.signals[i].length) for i in ids}
    rates = {int(reader.signals[i].sample_rate) for i in ids}
    if min(lengths.values()) == 0 or (len(rates) == 1 and len(set(lengths.values())) > 1):
        shown = ", ".join(f"{k} {v}" for k, v in lengths.items())
        raise CaptureError(
            f"{path}: the capture looks truncated (samples per signal: {shown})",
            hint="The file was not closed properly (recording interrupted or copy cut "
            "short); record again or use the complete file.",
        )


def identity_of(reader: Any, source_id: int, path: Path) -> MonitorIdentity:
    source = reader.sources.get(source_id)
    details: dict[str, str] = {"file": str(path)}
    calibration: str | None = None

    def on_user_data(chunk_meta: int, data: Any) -> bool:
        nonlocal calibration
        if isinstance(data, dict):
            value = data.get("calibration_date")
            if value:
                calibration = str(value)
            for key in ("device_sample_id", "hw_version", "fpga_version"):
                if key in data:
                    details[key] = str(data[key])
        return False

    reader.user_data(on_user_data)
    if source is None:
        return MonitorIdentity(name=path.name, calibration_date=calibration, details=details)
    return MonitorIdentity(
        name=str(source.name),
        model=str(source.model) or None,
        serial=str(source.serial_number) or None,
        firmware=str(source.version) or None,
        calibration_date=calibration,
        details=details,
    )


def analyze_jls(path: Path, gate_name: str | None = None) -> tuple[WindowAnalysis, MonitorIdentity]:
    """Find the gated window of a JLS capture and integrate its energy."""
    pyjls = import_pyjls()
    if not path.is_file():
        raise CaptureError(
            f"JLS capture {path} does not exist",
            hint="Give the path of a .jls file recorded with the gate input.",
        )
    try:
        reader = pyjls.Reader(str(path))
    except (ValueError, RuntimeError, OSError) as exc:
        raise CaptureError(
            f"{path} cannot be read as a JLS capture: {exc}",
            hint="The file is not a JLS v2 capture, or it is damaged.",
        ) from exc
    try:
        sigs = _signals(reader, path, gate_name)
        data_ids = [i for i in (sigs.power, sigs.current, sigs.voltage) if i is not None]
        _check_lengths(reader, [*data_ids, sigs.gate], path)
        base_id = sigs.power if sigs.power is not None else sigs.current
        rate = int(reader.signals[base_id].sample_rate)
        gate_rate = int(reader.signals[sigs.gate].sample_rate)
        if gate_rate % rate and rate % gate_rate:
            raise CaptureError(
                f"{path}: gate at {gate_rate} Hz and power at {rate} Hz are not integer multiples",
                hint="Record the gate and current at rates that divide one another.",
            )
        # reader indices are relative to each signal's first sample (sample_id_offset):
        # align every signal on the latest first sample, in seconds of device time
        ids = [*data_ids, sigs.gate]
        first_s = max(
            int(reader.signals[i].sample_id_offset) / int(reader.signals[i].sample_rate)
            for i in ids
        )
        start_of = {
            i: round(first_s * int(reader.signals[i].sample_rate))
            - int(reader.signals[i].sample_id_offset)
            for i in ids
        }
        length = min(int(reader.signals[i].length) - start_of[i] for i in data_ids)
        gate_avail = int(reader.signals[sigs.gate].length) - start_of[sigs.gate]
        length = min(length, gate_avail * rate // gate_rate)
        identity = identity_of(reader, sigs.source_id, path)
        full_scale = FULL_SCALE_A.get(identity.model or "")
        analyzer = GatedWindowAnalyzer(
            rate, length, full_scale=full_scale, source=f"{path.name} ({sigs.gate_name})"
        )
        for chunk in range(0, length, CHUNK):
            n = min(CHUNK, length - chunk)
            current = None

            def read(sid: int, chunk: int = chunk, n: int = n) -> np.ndarray:
                return np.asarray(reader.fsr(sid, start_of[sid] + chunk, n), dtype=np.float64)

            if sigs.power is not None:
                power = read(sigs.power)
                if sigs.current is not None:
                    current = read(sigs.current)
            elif sigs.current is not None and sigs.voltage is not None:
                current = read(sigs.current)
                power = current * read(sigs.voltage)
            gate = _gate_chunk(reader, sigs.gate, start_of[sigs.gate], chunk, n, rate, gate_rate)
            analyzer.feed(power, gate, current)
        return analyzer.result(), identity
    except ValueError as exc:
        raise CaptureError(
            f"{path}: reading the capture failed: {exc}",
            hint="The file is truncated or damaged; record again.",
        ) from exc
    finally:
        reader.close()


def _gate_chunk(
    reader: Any, sid: int, origin: int, start: int, n: int, rate: int, gate_rate: int
) -> np.ndarray:
    """Gate levels at the power samples ``start .. start+n`` (U1 comes back packed);
    ``origin`` is the gate's reader index of power sample 0."""
    if gate_rate >= rate:
        factor = gate_rate // rate
        g_start, g_n = origin + start * factor, n * factor
        packed = reader.fsr(sid, g_start, g_n)
        bits = np.unpackbits(np.asarray(packed, dtype=np.uint8), bitorder="little")[:g_n]
        return bits[::factor]
    factor = rate // gate_rate
    g_start = start // factor
    g_end = -(-(start + n) // factor)
    packed = reader.fsr(sid, origin + g_start, g_end - g_start)
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8), bitorder="little")[: g_end - g_start]
    expanded = np.repeat(bits, factor)
    offset = start - g_start * factor
    return expanded[offset : offset + n]


__all__ = ["CHUNK", "INSTALL_HINT", "JlsSignals", "analyze_jls", "import_pyjls"]
