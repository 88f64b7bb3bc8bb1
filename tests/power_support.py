"""Helpers of the power tests: JLS captures of known energy, and sysfs stand-in trees.

No Joulescope and no power sensor exist on this machine, so the tests build what those
would produce, laid out exactly as the real thing: JLS v2 files written with ``pyjls`` (as
``pyjoulescope_driver.Record`` writes them) and sysfs trees with the kernel's file names and
units (``Documentation/hwmon/sysfs-interface.rst``, ``Documentation/power/powercap``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_capture(
    path: Path,
    *,
    rate: int,
    current: np.ndarray,
    gate: np.ndarray | None,
    volts: float = 3.3,
    gate_rate_factor: int = 1,
    gate_name: str = "gpi[0]",
    model: str = "JS220",
    power_signal: bool = False,
    annotation: dict[str, object] | None = None,
) -> None:
    """A JLS v2 capture as the Joulescope's recorder writes it: current and voltage (and
    power) at ``rate``, the gate as packed U1 at ``rate x gate_rate_factor`` (``gate``
    holds one level per gate sample; None: no gate signal), the instrument's calibration
    date in user data and, optionally, an annotation of the window's inferences."""
    from pyjls import DataType, SignalType, Writer, time64

    n = len(current)
    voltage = np.full(n, volts, dtype=np.float32)
    with Writer(str(path)) as wr:
        wr.source_def(
            source_id=1,
            name=f"{model}-000415",
            vendor="Jetperch",
            model=model,
            version="1.2.3",
            serial_number="000415",
        )
        signals = [("current", "A", DataType.F32), ("voltage", "V", DataType.F32)]
        if power_signal:
            signals.append(("power", "W", DataType.F32))
        for signal_id, (name, units, dtype) in enumerate(signals, start=1):
            wr.signal_def(
                signal_id=signal_id,
                source_id=1,
                signal_type=SignalType.FSR,
                data_type=dtype,
                sample_rate=rate,
                name=name,
                units=units,
            )
        gate_id = len(signals) + 1
        if gate is not None:
            wr.signal_def(
                signal_id=gate_id,
                source_id=1,
                signal_type=SignalType.FSR,
                data_type=DataType.U1,
                sample_rate=rate * gate_rate_factor,
                name=gate_name,
                units="",
            )
        wr.utc(1, 0, time64.now())
        wr.user_data(1, {"calibration_date": "2025-03-04"})
        if annotation is not None:
            wr.user_data(2, annotation)
        current = np.asarray(current, dtype=np.float32)
        wr.fsr_f32(1, 0, current)
        wr.fsr_f32(2, 0, voltage)
        if power_signal:
            wr.fsr_f32(3, 0, (current * voltage).astype(np.float32))
        if gate is not None:
            bits = np.asarray(gate, dtype=np.uint8)
            wr.fsr(gate_id, 0, np.packbits(bits, bitorder="little"))


def energy_of(current: np.ndarray, lo: int, hi: int, rate: int, volts: float = 3.3) -> float:
    """The analytic energy (J) of samples ``lo .. hi`` (as the file stores them: float32)."""
    values = np.asarray(current[lo:hi], dtype=np.float32).astype(np.float64)
    return float(np.sum(values * np.float64(np.float32(volts)))) / rate


def write_jls(
    path: Path,
    *,
    rate: int = 100_000,
    seconds: float = 2.0,
    idle_a: float = 0.010,
    active_a: float = 0.025,
    volts: float = 3.3,
    gate: tuple[float, float] | None = (0.5, 1.5),
    gate_rate_factor: int = 1,
    gate_name: str = "gpi[0]",
    model: str = "JS220",
    power_signal: bool = False,
    annotation: dict[str, object] | None = None,
) -> float:
    """Write a capture: ``idle_a`` outside the gate, ``active_a`` inside; return the
    analytic energy (J) inside the gate."""
    n = int(rate * seconds)
    current = np.full(n, idle_a, dtype=np.float32)
    gate_bits = np.zeros(n * gate_rate_factor, dtype=np.uint8)
    if gate is not None:
        lo, hi = int(gate[0] * rate), int(gate[1] * rate)
        current[lo:hi] = active_a
        gate_bits[lo * gate_rate_factor : hi * gate_rate_factor] = 1
    write_capture(
        path,
        rate=rate,
        current=current,
        gate=gate_bits if gate_name else None,
        volts=volts,
        gate_rate_factor=gate_rate_factor,
        gate_name=gate_name,
        model=model,
        power_signal=power_signal,
        annotation=annotation,
    )
    if gate is None:
        return 0.0
    return (active_a * volts) * (int(gate[1] * rate) - int(gate[0] * rate)) / rate


def write(root: Path, rel: str, value: object) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def ina226_tree(root: Path, power_uw: int = 1_250_000) -> None:
    """hwmon0 = ina226 (ina2xx driver: shunt/bus voltage, current, power, update_interval)."""
    d = "class/hwmon/hwmon0"
    write(root, f"{d}/name", "ina226")
    write(root, f"{d}/in0_input", 2)  # shunt mV
    write(root, f"{d}/in1_input", 5000)  # bus mV
    write(root, f"{d}/curr1_input", power_uw // 5000)  # mA
    write(root, f"{d}/power1_input", power_uw)  # µW
    write(root, f"{d}/shunt_resistor", 10000)
    write(root, f"{d}/update_interval", 10)  # ms


def ina3221_tree(root: Path, rails: dict[str, tuple[int, int]], nc: int = 3) -> None:
    """hwmon1 = ina3221 (Jetson): in[123]_label, in[123]_input mV, curr[123]_input mA,
    shunt voltages in in[456], sums in7/curr4; channel ``nc`` unconnected."""
    d = "class/hwmon/hwmon1"
    write(root, f"{d}/name", "ina3221")
    for n, (label, (mv, ma)) in enumerate(rails.items(), start=1):
        write(root, f"{d}/in{n}_label", label)
        write(root, f"{d}/in{n}_input", mv)
        write(root, f"{d}/curr{n}_input", ma)
        write(root, f"{d}/in{n + 3}_input", 100)
        write(root, f"{d}/shunt{n}_resistor", 5000)
    write(root, f"{d}/in{nc}_label", "NC")
    write(root, f"{d}/in{nc}_input", 0)
    write(root, f"{d}/curr{nc}_input", 0)
    write(root, f"{d}/in7_input", 20000)
    write(root, f"{d}/curr4_input", 999)
    write(root, f"{d}/update_interval", 20)


def rapl_tree(root: Path, energy_uj: int, max_range_uj: int) -> Path:
    """class/powercap/intel-rapl:0 (package-0) with a core subzone; returns energy_uj."""
    d = "class/powercap/intel-rapl:0"
    write(root, f"{d}/name", "package-0")
    write(root, f"{d}/max_energy_range_uj", max_range_uj)
    write(root, f"{d}/energy_uj", energy_uj)
    write(root, f"{d}/constraint_0_name", "long_term")
    write(root, f"{d}/intel-rapl:0:0/name", "core")
    write(root, f"{d}/intel-rapl:0:0/energy_uj", 0)
    write(root, "class/powercap/intel-rapl:0:0/name", "core")  # the kernel links subzones here too
    return root / d / "energy_uj"


class CounterWriter:
    """A stand-in energy counter (µJ) advancing at ``watts`` and wrapping at ``max_range``,
    as the RAPL/INA228 hardware does: the file is replaced by a FIFO, and every read gets
    the value of the clock at that moment (a writer thread serves each reader as it opens
    the file). So the value a reader sees is taken between the start and the end of its
    read, as with the kernel's counter, however late the threads run on a loaded machine.
    """

    def __init__(
        self, path: Path, watts: float, max_range: int, fail_after_reads: int | None = None
    ) -> None:
        import os
        import threading
        import time

        self.path, self.watts, self.max_range = path, watts, max_range
        #: from this read on, the counter answers as a failing driver does (``-EIO``)
        self.fail_after_reads = fail_after_reads
        self.reads = 0
        self._stop = threading.Event()
        self._start_uj = int(path.read_text())
        path.unlink()
        os.mkfifo(path, 0o644)
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def value_uj(self) -> int:
        import time

        return self._start_uj + int(self.watts * 1e6 * (time.monotonic() - self._t0))

    def _run(self) -> None:
        import os

        fresh = self.path.with_name(self.path.name + ".next")
        while not self._stop.is_set():
            fd = os.open(self.path, os.O_WRONLY)  # blocks until a reader opens the file
            try:
                # a new FIFO takes the name before this reader gets its value: the next
                # read (which starts once this one has its line, maybe before this end
                # closes) opens the new FIFO and waits for a value of its own
                os.mkfifo(fresh, 0o644)
                os.replace(fresh, self.path)
                if not self._stop.is_set():
                    self.reads += 1
                    failing = (
                        self.fail_after_reads is not None and self.reads > self.fail_after_reads
                    )
                    value = "-EIO" if failing else str(self.value_uj() % self.max_range)
                    os.write(fd, f"{value}\n".encode())
            except BrokenPipeError:  # the reader went away first
                pass
            finally:
                os.close(fd)

    def __enter__(self) -> CounterWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        import os

        self._stop.set()
        # unblock the writer waiting for a reader
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self._thread.join(timeout=10.0)
        os.close(fd)
        assert not self._thread.is_alive(), "the stand-in counter writer did not stop"
