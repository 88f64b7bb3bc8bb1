"""``joulescope[:SERIAL]``: a JS220/JS110 through ``pyjoulescope_driver``, gated on GPI 0.

Open finds the instrument (by serial when given) and sets the current range to auto —
which also closes the JS220's target relay, so a board powered through the Joulescope is
on before anything is flashed (EnsureBoardPowered). Arm records current, voltage and the
gate input ``gpi[0]`` with the driver's own JLS recorder (``pyjoulescope_driver.Record``)
into the run's log folder; capture closes the recording and reads it back with the same
analysis as ``jls:FILE`` (``jls_monitor.capture_from_jls``), so the arithmetic is the one
tested on files of known energy. Topic names: power.md §1.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aidge_deploy.errors import CaptureError, InternalError, PreflightError
from aidge_deploy.metrics import Provenance
from aidge_deploy.power.jls import INFERENCES_KEY, INSTALL_HINT
from aidge_deploy.power.jls_monitor import capture_from_jls
from aidge_deploy.power.protocol import (
    GateKind,
    MonitorCapabilities,
    MonitorIdentity,
    PowerCapture,
    PowerMonitor,
    WindowRequest,
    WindowRule,
)
from aidge_deploy.power.source import PowerSource
from aidge_deploy.readiness import ToolCheck

#: host output rate: 100 kS/s keeps a 10 s window at 24 MB while edges stay within 10 µs
SAMPLE_RATE_HZ = 100_000
SIGNALS = ["current", "voltage", "gpi[0]"]
ATTACH_HINT = (
    "Connect the Joulescope over USB (and its udev rules on Linux), wire the target's gate "
    "pin to GPI 0 and Vref to the target's I/O rail — or analyse a capture recorded "
    "elsewhere with --power jls:FILE."
)

DriverFactory = Callable[[], Any]


def _driver_module() -> Any:
    try:
        import pyjoulescope_driver
    except ImportError as exc:
        raise PreflightError(
            f"--power joulescope needs pyjoulescope_driver, which is not installed ({exc})",
            hint=INSTALL_HINT,
        ) from exc
    return pyjoulescope_driver


def _serial_of(device_path: str) -> str:
    return device_path.rstrip("/").split("/")[-1]


def _model_of(device_path: str) -> str:
    parts = device_path.strip("/").split("/")
    return parts[1].upper() if len(parts) >= 3 else parts[0].upper()


def find_device(paths: list[str], serial: str | None) -> str:
    """The device path of the instrument to use, or a ``PreflightError`` saying why not."""
    if not paths:
        raise PreflightError(
            "No Joulescope found" + (f" with serial {serial}" if serial else ""),
            hint=ATTACH_HINT,
        )
    if serial is not None:
        matches = [p for p in paths if _serial_of(p).lstrip("0") == serial.lstrip("0")]
        if not matches:
            raise PreflightError(
                f"No Joulescope with serial {serial} (found: "
                f"{', '.join(_serial_of(p) for p in paths)})",
                hint="Use one of the serials found, or plug the instrument in.",
            )
        return matches[0]
    if len(paths) > 1:
        raise PreflightError(
            f"{len(paths)} Joulescopes found ({', '.join(paths)}): which one?",
            hint=f"Name it: --power joulescope:{_serial_of(paths[0])}.",
        )
    return paths[0]


def list_devices(factory: DriverFactory | None = None) -> list[str]:
    """Device paths of the Joulescopes attached to this machine."""
    driver = (factory or _driver_module().Driver)()
    try:
        return [str(p) for p in driver.device_paths()]
    finally:
        driver.finalize()


def joulescope_checks(serial: str | None, factory: DriverFactory | None = None) -> list[ToolCheck]:
    """Preflight/doctor: the driver is installed and the instrument is attached."""
    try:
        paths = list_devices(factory)
    except PreflightError as exc:
        return [ToolCheck("pyjoulescope_driver", False, exc.message, exc.hint)]
    try:
        path = find_device(paths, serial)
    except PreflightError as exc:
        return [ToolCheck("joulescope", False, exc.message, exc.hint)]
    return [ToolCheck("joulescope", True, path)]


class JoulescopeMonitor(PowerMonitor):
    def __init__(self, source: PowerSource, factory: DriverFactory | None = None) -> None:
        super().__init__(source)
        self.factory = factory
        self._driver: Any = None
        self._path: str | None = None
        self._record: Any = None
        self._file: Path | None = None
        self._request: WindowRequest | None = None
        self._identity = MonitorIdentity(name="joulescope")

    @property
    def capabilities(self) -> MonitorCapabilities:
        return MonitorCapabilities(
            channels=("current", "voltage", "power"),
            sample_rate_hz=float(SAMPLE_RATE_HZ),
            gate=GateKind.SIGNAL,
            gate_input="gpi[0]",
            sees_idle=True,
            provenance=Provenance.SILICON,
            scope="target supply through the Joulescope",
        )

    def _query(self, topic: str) -> str | None:
        try:
            return str(self._driver.query(f"{self._path}/{topic}"))
        except Exception:  # an older firmware lacks a topic: identity stays partial
            return None

    def open(self) -> None:
        module = None if self.factory is not None else _driver_module()
        self._driver = (self.factory or module.Driver)()  # type: ignore[union-attr]
        try:
            self._path = find_device(
                [str(p) for p in self._driver.device_paths()], self.source.argument
            )
            self._driver.open(self._path, "defaults")
            model = _model_of(self._path)
            if model == "JS110":
                self._driver.publish(f"{self._path}/s/i/range/select", "auto")
            else:  # JS220: the firmware default is off (reads 0, relay open)
                self._driver.publish(f"{self._path}/s/i/range/mode", "auto")
            self._driver.publish(f"{self._path}/h/fs", SAMPLE_RATE_HZ)
            self._identity = MonitorIdentity(
                name=f"{model}-{_serial_of(self._path)}",
                model=model,
                serial=_serial_of(self._path),
                firmware=self._query("c/fw/version"),
                calibration_date=None,
                details={
                    k: v
                    for k, v in (
                        ("hw_version", self._query("c/hw/version")),
                        ("fpga_version", self._query("s/fpga/version")),
                    )
                    if v
                },
            )
        except BaseException:
            self.close()
            raise

    def arm(self, request: WindowRequest) -> None:
        if self._driver is None or self._path is None:
            raise InternalError("the Joulescope is not open")
        from pyjoulescope_driver import Record

        request.work_dir.mkdir(parents=True, exist_ok=True)
        self._file = request.work_dir / "joulescope.jls"
        self._request = request
        # the file says how many inferences its window holds when that is fixed before the
        # window runs (a power firmware); repeated program runs may run more than planned
        count_key = INFERENCES_KEY if request.inferences_fixed else "planned_inferences"
        self._record = Record(self._driver, self._path, SIGNALS)
        self._record.open(
            str(self._file),
            user_data=[
                (
                    1,
                    {
                        "aidge_deploy": "power window",
                        count_key: request.inferences,
                        "armed_utc": datetime.now(UTC).isoformat(),
                        **self._identity.details,
                    },
                )
            ],
        )

    def capture(self) -> PowerCapture:
        if self._record is None or self._file is None:
            raise InternalError("the Joulescope was not armed")
        record, self._record = self._record, None
        try:
            record.close()
        except RuntimeError as exc:  # pyjls latched a write error (disk full...)
            raise CaptureError(
                f"Recording to {self._file} failed: {exc}",
                hint="Free disk space in the run folder and measure again.",
            ) from exc
        request = self._request
        capture = capture_from_jls(
            self._file,
            Provenance.SILICON,
            expected_s=None if request is None else request.expected_duration_s,
            rule=WindowRule.MATCH if request is None else request.window_rule,
            min_pulse_s=None if request is None else request.gate_min_pulse_s,
            max_dropout_s=None if request is None else request.gate_max_dropout_s,
        )
        return replace(capture, identity=self._identity)

    def close(self) -> None:
        if self._record is not None:
            with contextlib.suppress(Exception):
                self._record.close()
            self._record = None
        if self._driver is not None:
            if self._path is not None:
                with contextlib.suppress(Exception):
                    self._driver.close(self._path)
            with contextlib.suppress(Exception):
                self._driver.finalize()
            self._driver = None


__all__ = ["JoulescopeMonitor", "find_device", "joulescope_checks", "list_devices"]
