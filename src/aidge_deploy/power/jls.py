"""``jls:FILE``: a Joulescope capture file (JLS v2, read with ``pyjls``), analysed by gate.

This is what people do with captures from the Joulescope UI or ``pyjoulescope_driver
record``: the file holds current and voltage (or power) and the GPI inputs. The file is
checked first (a JLS v2 header, closed properly, not cut), then read in two passes: the
gate input (``gpi[0]`` unless the file has only another one) through the gate detector
(``gate.py``) to find the window, then the power inside it and the idle baseline outside
every pulse. The live ``joulescope`` monitor records to a JLS file and reads it back
through this same path. A capture may record how many inferences its window holds (user
data ``{"inferences": N}``). Pitfalls of the format (relative sample ids, packed U1,
ValueError) are in power.md §2.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import ConfigError, PreflightError
from aidge_deploy.power.analysis import WindowAnalysis, WindowIntegrator
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.gate import GateScanner, WindowRule, find_window, gate_settings
from aidge_deploy.power.protocol import MonitorIdentity
from aidge_deploy.profiling.validity import IssueCode

#: samples read per chunk (a 1 MS/s capture is read a second at a time)
CHUNK = 1 << 20
#: the JLS v2 file identification (jetperch/jls ``include/jls/format.h``)
JLS_IDENTIFICATION = bytes(
    [0x6A, 0x6C, 0x73, 0x66, 0x6D, 0x74, 0x0D, 0x0A, 0x20, 0x0A, 0x20, 0x1A, 0x20, 0x20, 0xB2, 0x1C]
)
#: ``jls_file_header_s``: identification, length (0 until closed), version, CRC32
_HEADER = struct.Struct("<16sQII")
#: the user-data key (a JSON object) that records the inferences inside a capture's window
INFERENCES_KEY = "inferences"
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

    @property
    def factors(self) -> tuple[int, ...]:
        """The signals whose product is power: (power,) or (current, voltage)."""
        if self.power is not None:
            return (self.power,)
        if self.current is None or self.voltage is None:
            raise ValueError("a capture without power needs current and voltage")
        return (self.current, self.voltage)


def _signals(reader: Any, path: Path, gate_name: str | None) -> JlsSignals:
    by_name: dict[str, Any] = {}
    for signal_id, sig in reader.signals.items():
        if signal_id == 0:
            continue
        by_name.setdefault(sig.name, sig)
    names = ", ".join(sorted(by_name)) or "none"
    gates = sorted(
        (int(m.group(1)), name) for name in by_name if (m := _GPI.match(name)) is not None
    )
    if gate_name is None:
        if not gates:
            raise PowerCaptureError(
                IssueCode.POWER_GATE_MISSING,
                f"{path}: no gate input in the capture (signals: {names})",
                hint="Record the GPI input wired to the target's gate pin too "
                "(pyjoulescope_driver record --signals i,v,0), then analyse again.",
            )
        gate_name = gates[0][1]
    elif gate_name not in by_name:
        raise PowerCaptureError(
            IssueCode.POWER_GATE_MISSING,
            f"{path}: no signal {gate_name!r} (signals: {names})",
            hint="Name a gpi[N] signal the capture has.",
        )

    def sid(name: str) -> int | None:
        sig = by_name.get(name)
        return None if sig is None else int(sig.signal_id)

    power, current, voltage = sid("power"), sid("current"), sid("voltage")
    if power is None and (current is None or voltage is None):
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_FAILED,
            f"{path}: neither power nor current and voltage in the capture (signals: {names})",
            hint="Record current and voltage (or power) with the gate input.",
        )
    gate_sig = by_name[gate_name]
    return JlsSignals(
        power, current, voltage, int(gate_sig.signal_id), gate_name, int(gate_sig.source_id)
    )


def check_jls_header(path: Path) -> None:
    """A JLS v2 file, closed properly and whole: its header (``jls_file_header_s`` of the
    format) starts with the identification bytes and holds the file's length, written last
    on close (0 when the recording was never closed)."""
    if not path.is_file():
        raise ConfigError(
            f"JLS capture {path} does not exist" + (" (it is a folder)" if path.is_dir() else ""),
            hint="Give the path of a .jls file recorded with the gate input.",
        )
    with path.open("rb") as fh:
        head = fh.read(_HEADER.size)
    size = path.stat().st_size
    if len(head) < _HEADER.size or head[: len(JLS_IDENTIFICATION)] != JLS_IDENTIFICATION:
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_NOT_JLS,
            f"{path} is not a JLS capture ({size} bytes that do not start with the JLS v2 "
            "identification)",
            hint="Give a .jls file as the Joulescope UI or `pyjoulescope_driver record` "
            "write it (JLS v2).",
        )
    _, length, _, _ = _HEADER.unpack(head)
    if length == 0:
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_TRUNCATED,
            f"{path} is truncated: the recording was never closed (the header's length is 0, "
            f"the file holds {size} bytes)",
            hint="Stop the recording properly (the Joulescope UI's stop, or closing the "
            "recorder) and analyse the complete file.",
        )
    if length != size:
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_TRUNCATED,
            f"{path} is truncated: its header says {length} bytes, the file holds {size}",
            hint="The file was cut short (an interrupted copy or download): use the complete file.",
        )


def _check_lengths(reader: Any, ids: list[int], path: Path) -> None:
    durations = {
        reader.signals[i].name: int(reader.signals[i].length) / int(reader.signals[i].sample_rate)
        for i in ids
    }
    # signals written together end within a chunk of one another; one that stops far
    # earlier than another (or holds nothing) was cut
    longest = max(durations.values())
    if min(durations.values()) <= 0 or min(durations.values()) < longest * 0.99 - 0.1:
        shown = ", ".join(f"{k} {v:.6g} s" for k, v in durations.items())
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_TRUNCATED,
            f"{path}: the capture looks truncated (each signal's length: {shown})",
            hint="The file was not closed properly (recording interrupted or copy cut "
            "short); record again or use the complete file.",
        )


@dataclass(frozen=True)
class _UserData:
    details: dict[str, str]
    calibration: str | None
    inferences: tuple[int, ...]


def _user_data(reader: Any) -> _UserData:
    details: dict[str, str] = {}
    calibration: list[str] = []
    inferences: list[int] = []

    def on_user_data(chunk_meta: int, data: Any) -> bool:
        if isinstance(data, dict):
            if data.get("calibration_date"):
                calibration.append(str(data["calibration_date"]))
            for key in ("device_sample_id", "hw_version", "fpga_version"):
                if key in data:
                    details[key] = str(data[key])
            value = data.get(INFERENCES_KEY)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                inferences.append(value)
        return False

    reader.user_data(on_user_data)
    return _UserData(details, calibration[-1] if calibration else None, tuple(inferences))


def identity_of(reader: Any, source_id: int, path: Path, data: _UserData) -> MonitorIdentity:
    source = reader.sources.get(source_id)
    details = {"file": str(path), **data.details}
    if source is None:
        return MonitorIdentity(name=path.name, calibration_date=data.calibration, details=details)
    return MonitorIdentity(
        name=str(source.name),
        model=str(source.model) or None,
        serial=str(source.serial_number) or None,
        firmware=str(source.version) or None,
        calibration_date=data.calibration,
        details=details,
    )


@dataclass(frozen=True)
class JlsAnalysis:
    """A capture's window, the instrument that recorded it, and the N it says it holds."""

    window: WindowAnalysis
    identity: MonitorIdentity
    #: inferences inside the window by the file's own annotation (user data
    #: ``{"inferences": N}``), None when it has none
    recorded_inferences: int | None


def recorded_inferences(path: Path) -> int | None:
    """The N a capture's annotation records (None: it records none), without analysing it;
    ``PowerCaptureError`` if the file is not a whole JLS file or its annotations disagree."""
    pyjls = import_pyjls()
    check_jls_header(path)
    reader = _open(pyjls, path)
    try:
        return _one_n(_user_data(reader).inferences, path)
    finally:
        reader.close()


def _one_n(values: tuple[int, ...], path: Path) -> int | None:
    if len(set(values)) > 1:
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_FAILED,
            f"{path}: the capture's annotations disagree on its inferences "
            f"({', '.join(str(v) for v in sorted(set(values)))})",
            hint="Give the number of inferences the window holds (--inferences).",
        )
    return values[0] if values else None


def _open(pyjls: Any, path: Path) -> Any:
    try:
        return pyjls.Reader(str(path))
    except (ValueError, RuntimeError, OSError) as exc:
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_FAILED,
            f"{path} cannot be read as a JLS capture: {exc}",
            hint="The file is damaged: record again or use another copy.",
        ) from exc


def analyze_jls(
    path: Path,
    *,
    expected_s: float | None = None,
    rule: WindowRule = WindowRule.MATCH,
    min_pulse_s: float | None = None,
    max_dropout_s: float | None = None,
    gate_name: str | None = None,
) -> JlsAnalysis:
    """Find the gated window of a JLS capture and integrate its energy.

    ``expected_s`` is N x clean latency: the window is the gate pulse of that width
    (``rule``); without it the capture must hold one pulse. Every failure is a
    ``PowerCaptureError`` naming its ``power.*`` code.
    """
    pyjls = import_pyjls()
    check_jls_header(path)
    reader = _open(pyjls, path)
    try:
        sigs = _signals(reader, path, gate_name)
        data_ids = [i for i in (sigs.power, sigs.current, sigs.voltage) if i is not None]
        _check_lengths(reader, [*data_ids, sigs.gate], path)
        rate = int(reader.signals[sigs.factors[0]].sample_rate)
        gate_rate = int(reader.signals[sigs.gate].sample_rate)
        if rate <= 0 or gate_rate <= 0:
            raise PowerCaptureError(
                IssueCode.POWER_CAPTURE_FAILED,
                f"{path}: sample rates {rate} Hz (power) and {gate_rate} Hz (gate)",
                hint="The capture is damaged.",
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
        gate_length = min(gate_avail, length * gate_rate // rate)
        length = min(length, gate_length * rate // gate_rate)
        data = _user_data(reader)
        identity = identity_of(reader, sigs.source_id, path, data)
        source = path.name
        # pass 1: the gate alone (1 bit a sample) gives the window
        scanner = GateScanner(gate_rate, sigs.gate_name, source)
        for chunk in range(0, gate_length, CHUNK):
            n = min(CHUNK, gate_length - chunk)
            packed = reader.fsr(sigs.gate, start_of[sigs.gate] + chunk, n)
            scanner.feed(np.unpackbits(np.asarray(packed, dtype=np.uint8), bitorder="little")[:n])
        settings = gate_settings(
            gate_rate, expected_s, min_pulse_s=min_pulse_s, max_dropout_s=max_dropout_s
        )
        found = find_window(scanner, settings, expected_s=expected_s, rule=rule)

        def to_power(index: int) -> int:
            return min(length, round(index * rate / gate_rate))

        window = (to_power(found.start), to_power(found.end))
        busy = [(to_power(a), to_power(b)) for a, b in found.busy]
        # pass 2: power inside the window, idle outside every pulse, the trace
        integrator = WindowIntegrator(
            rate,
            length,
            window,
            busy,
            full_scale=FULL_SCALE_A.get(identity.model or ""),
            source=f"{source} ({sigs.gate_name})",
        )
        for chunk in range(0, length, CHUNK):
            n = min(CHUNK, length - chunk)

            def read(sid: int, chunk: int = chunk, n: int = n) -> np.ndarray:
                return np.asarray(reader.fsr(sid, start_of[sid] + chunk, n), dtype=np.float64)

            current = read(sigs.current) if sigs.current is not None else None
            # power, or current x voltage (the current read once, also for saturation)
            factors = [
                current if f == sigs.current and current is not None else read(f)
                for f in sigs.factors
            ]
            power = factors[0] if len(factors) == 1 else factors[0] * factors[1]
            integrator.feed(power, current)
        return JlsAnalysis(integrator.result(found.report), identity, _one_n(data.inferences, path))
    except ValueError as exc:
        raise PowerCaptureError(
            IssueCode.POWER_CAPTURE_FAILED,
            f"{path}: reading the capture failed: {exc}",
            hint="The file is damaged; record again.",
        ) from exc
    finally:
        reader.close()


__all__ = [
    "CHUNK",
    "INFERENCES_KEY",
    "INSTALL_HINT",
    "JlsAnalysis",
    "JlsSignals",
    "analyze_jls",
    "check_jls_header",
    "import_pyjls",
    "recorded_inferences",
]
