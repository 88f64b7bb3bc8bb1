"""``jls:FILE`` on captures written here with pyjls, and the Joulescope capture path.

No Joulescope is attached to this machine: the files are what the instrument's recorder
writes (current, voltage, a GPI gate), made with a known current profile so the energy in
the gate is known analytically. ``StandInDriver`` is a named stand-in for the driver's
pub/sub API (no device can exist here); it feeds ``pyjoulescope_driver.Record`` — the real
recorder — so the live monitor's capture goes through the same file and analysis as
``jls:``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aidge_deploy.errors import PreflightError
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.jls import analyze_jls
from aidge_deploy.power.jls_monitor import JlsFileMonitor
from aidge_deploy.power.joulescope import JoulescopeMonitor, find_device, joulescope_checks
from aidge_deploy.power.protocol import WindowRequest
from aidge_deploy.power.registry import parse_power_source
from aidge_deploy.profiling.validity import IssueCode
from aidge_deploy.results import Provenance
from envparts import missing
from power_support import write_jls

try:
    import pyjls  # noqa: F401
except ImportError:
    missing("pyjls is not installed (it comes with the package's dependencies)")


def test_energy_within_a_thousandth_and_edges_found(tmp_path: Path) -> None:
    path = tmp_path / "cap.jls"
    expected = write_jls(path, gate=(0.5, 1.5), annotation={"inferences": 100})
    analysis = analyze_jls(path)
    window, identity = analysis.window, analysis.identity
    assert window.start_index == 50_000 and window.end_index == 150_000
    assert abs(window.energy_j - expected) <= 1e-3 * expected
    assert window.idle_power_w == pytest.approx(0.010 * 3.3, rel=1e-6)
    assert window.duration_s == pytest.approx(1.0)
    assert (identity.model, identity.serial, identity.calibration_date) == (
        "JS220",
        "000415",
        "2025-03-04",
    )
    assert analysis.recorded_inferences == 100
    trace = window.trace
    assert trace.window_start_s == pytest.approx(0.5) and len(trace.power_w) <= 1000


def test_gate_at_twice_the_current_rate_and_power_signal(tmp_path: Path) -> None:
    """JS220 records GPI at 2 MS/s while i/v run at 1 MS/s: the gate is read at its own
    rate and its edges mapped onto the power samples."""
    path = tmp_path / "fast_gate.jls"
    expected = write_jls(path, gate=(0.25, 1.75), gate_rate_factor=2, power_signal=True)
    window = analyze_jls(path).window
    assert abs(window.energy_j - expected) <= 1e-3 * expected
    assert window.start_index == 25_000
    assert window.gate.sample_rate_hz == 200_000


def test_monitor_capture_is_silicon_with_samples(tmp_path: Path) -> None:
    path = tmp_path / "cap.jls"
    expected = write_jls(path)
    monitor = JlsFileMonitor(parse_power_source(f"jls:{path}"))
    monitor.arm(WindowRequest(inferences=10, expected_duration_s=1.0, work_dir=tmp_path))
    capture = monitor.capture()
    assert capture.provenance is Provenance.SILICON
    assert capture.samples == 100_000 and capture.sample_rate_hz == 100_000
    assert capture.energy_j == pytest.approx(expected, rel=1e-3)
    assert capture.raw_files == (path,)


@pytest.mark.parametrize(
    ("name", "writer", "code", "match"),
    [
        ("nogate.jls", {"gate_name": ""}, IssueCode.POWER_GATE_MISSING, "no gate input"),
        ("flat.jls", {"gate": None}, IssueCode.POWER_GATE_MISSING, "never opened"),
        (
            "open.jls",
            {"seconds": 1.0, "gate": (0.5, 1.0)},
            IssueCode.POWER_GATE_UNCLOSED,
            "never closed",
        ),
    ],
)
def test_captures_without_a_window_name_their_failure(
    tmp_path: Path, name: str, writer: dict[str, Any], code: IssueCode, match: str
) -> None:
    path = tmp_path / name
    write_jls(path, **writer)
    with pytest.raises(PowerCaptureError, match=match) as info:
        analyze_jls(path)
    assert info.value.code is code and info.value.hint


def test_truncated_unclosed_and_foreign_files(tmp_path: Path) -> None:
    path = tmp_path / "cap.jls"
    write_jls(path)
    data = path.read_bytes()
    cut = tmp_path / "cut.jls"
    cut.write_bytes(data[: len(data) // 2])
    unclosed = tmp_path / "unclosed.jls"  # the header's length is written last, on close
    unclosed.write_bytes(data[:16] + bytes(8) + data[24:])
    text = tmp_path / "x.jls"
    text.write_text("hello")
    for bad, code, match in (
        (cut, IssueCode.POWER_CAPTURE_TRUNCATED, "header says"),
        (unclosed, IssueCode.POWER_CAPTURE_TRUNCATED, "never closed"),
        (text, IssueCode.POWER_CAPTURE_NOT_JLS, "not a JLS capture"),
    ):
        with pytest.raises(PowerCaptureError, match=match) as info:
            analyze_jls(bad)
        assert info.value.code is code and info.value.hint


# --------------------------------------------------------------------------- Joulescope


class StandInDriver:
    """Stand-in for ``pyjoulescope_driver.Driver`` (no Joulescope exists here).

    Implements the calls the monitor and the driver's ``Record`` make, and on
    ``play()`` publishes i, v and GPI 0 data the way the JS220 streams them
    (``sample_id`` on the 2 MHz timebase, i/v decimated by 2, GPI packed u1 at 2 MS/s).
    """

    def __init__(
        self, devices: list[str], profile: Callable[[np.ndarray], tuple[Any, Any]] | None = None
    ) -> None:
        self.devices = devices
        self.published: dict[str, object] = {}
        self.subscribers: dict[str, Callable[[str, dict[str, Any]], None]] = {}
        self.opened: list[str] = []
        self.finalized = False
        self.profile = profile

    def device_paths(self) -> list[str]:
        return list(self.devices)

    def open(self, path: str, mode: str = "defaults") -> None:
        self.opened.append(path)

    def close(self, path: str) -> None:
        self.opened.remove(path)

    def finalize(self) -> None:
        self.finalized = True

    def publish(self, topic: str, value: object, timeout: float | None = None) -> None:
        self.published[topic] = value

    def query(self, topic: str) -> str:
        return {"c/fw/version": "1.0.4", "c/hw/version": "H"}.get(topic.split("/", 3)[-1], "0")

    def subscribe(
        self, topic: str, flags: object, fn: Callable[[str, dict[str, Any]], None]
    ) -> None:
        self.subscribers[topic] = fn

    def unsubscribe(self, topic: str, fn: object) -> None:
        self.subscribers.pop(topic, None)

    def play(
        self, device: str, seconds: float, gate: tuple[float, float], amps: tuple[float, float]
    ) -> None:
        base = 2_000_000
        chunk = 20_000  # 10 ms of the 2 MHz timebase
        utc = 0
        for start in range(0, int(seconds * base), chunk):
            ids = np.arange(start, start + chunk)
            inside = (ids >= gate[0] * base) & (ids < gate[1] * base)
            iv_ids = ids[::2]
            iv_inside = inside[::2]
            current = np.where(iv_inside, amps[1], amps[0]).astype(np.float32)
            for topic, data, decim in (
                ("s/i/!data", current, 2),
                ("s/v/!data", np.full(len(iv_ids), 3.3, dtype=np.float32), 2),
                ("s/gpi/0/!data", np.packbits(inside.astype(np.uint8), bitorder="little"), 1),
            ):
                full = f"{device}/{topic}"
                if full in self.subscribers:
                    self.subscribers[full](
                        full,
                        {
                            "sample_id": start,
                            "sample_rate": base,
                            "decimate_factor": decim,
                            "utc": utc,
                            "data": data,
                        },
                    )
            utc += 10 * 2**30 // 1000


def test_joulescope_without_device_is_a_preflight_error() -> None:
    checks = joulescope_checks(None)  # the real driver: no device on this machine
    assert len(checks) == 1 and not checks[0].ok
    assert "No Joulescope found" in checks[0].detail and "USB" in (checks[0].hint or "")
    with pytest.raises(PreflightError, match="serial 123"):
        find_device([], "123")
    with pytest.raises(PreflightError, match="which one"):
        find_device(["u/js220/000001", "u/js220/000002"], None)
    assert find_device(["u/js220/000415"], "415") == "u/js220/000415"


def test_joulescope_capture_goes_through_the_jls_analysis(tmp_path: Path) -> None:
    device = "u/js220/000415"
    driver = StandInDriver([device])
    monitor = JoulescopeMonitor(parse_power_source("joulescope:000415"), factory=lambda: driver)
    monitor.open()
    assert driver.published[f"{device}/s/i/range/mode"] == "auto"  # relay closed, range auto
    monitor.arm(WindowRequest(inferences=10, expected_duration_s=0.5, work_dir=tmp_path))
    driver.play(device, seconds=1.0, gate=(0.25, 0.75), amps=(0.01, 0.03))
    capture = monitor.capture()
    monitor.close()
    assert driver.finalized and not driver.opened
    assert (tmp_path / "joulescope.jls").is_file()
    assert capture.provenance is Provenance.SILICON
    assert capture.identity.serial == "000415" and capture.identity.firmware == "1.0.4"
    assert capture.duration_s == pytest.approx(0.5, abs=1e-5)
    assert capture.energy_j == pytest.approx(0.03 * 3.3 * 0.5, rel=1e-3)
    assert capture.idle_power_w == pytest.approx(0.01 * 3.3, rel=1e-3)
