"""``hwmon`` and ``rapl`` on sysfs trees laid out as the kernel lays them out.

This machine has no power sensor: the trees are **stand-ins** written by the tests with the
kernel's file names and units (an INA226 behind the ina2xx driver, a Jetson-style INA3221,
a RAPL package whose ``energy_uj`` is a FIFO serving the clock's value at each read,
wrapping at ``max_energy_range_uj``).
They are read both locally and through the real SSH test board (``ssh_board``: a real sshd
on loopback), the way a run on a Linux board reads the board's sensors.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import CaptureError
from aidge_deploy.power.hwmon import HwmonMonitor, find_hwmon
from aidge_deploy.power.monitors import sysfs_checks
from aidge_deploy.power.poller import PolledMonitor
from aidge_deploy.power.protocol import WindowRequest
from aidge_deploy.power.rapl import RaplMonitor
from aidge_deploy.power.registry import parse_power_source
from aidge_deploy.power.sysfs import LocalSysfs, SshSysfs, make_reader
from aidge_deploy.results import Provenance
from power_support import CounterWriter, ina226_tree, ina3221_tree, rapl_tree

JETSON = {"VDD_IN": (5000, 400), "VDD_CPU_GPU_CV": (1000, 300)}


@pytest.fixture
def tree() -> Iterator[Path]:
    """A stand-in sysfs root the SSH board's user can read (not under pytest's 0700 tmp)."""
    root = Path(tempfile.mkdtemp(prefix="adk-sysfs-", dir="/tmp"))
    root.chmod(0o755)
    ina226_tree(root)
    ina3221_tree(root, JETSON)
    for d in root.rglob("*"):
        d.chmod(0o755 if d.is_dir() else 0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _window(monitor: PolledMonitor, tmp_path: Path, seconds: float = 0.4) -> Any:
    """What CapturePower does around a host-timed run of ``seconds``."""
    monitor.open()
    try:
        monitor.arm(WindowRequest(10, seconds, tmp_path))
        started = time.monotonic()
        time.sleep(seconds)
        ended = time.monotonic()
        monitor.set_host_window(started, ended)
        return monitor.capture(), ended - started
    finally:
        monitor.close()


def test_hwmon_chips_found_as_the_kernel_lays_them_out(tree: Path) -> None:
    chips = {c.name: c for c in find_hwmon(LocalSysfs(tree), None)}
    assert chips["ina226"].kind == "power" and chips["ina226"].update_interval_ms == 10
    ina3221 = chips["ina3221"]
    assert ina3221.kind == "vi"  # no power file: mV x mA per channel
    assert [r.label for r in ina3221.rails] == ["VDD_IN", "VDD_CPU_GPU_CV"]  # NC, sum skipped
    (rail,) = find_hwmon(LocalSysfs(tree), "VDD_IN")[0].rails
    assert rail.files[0].endswith("in1_input")
    with pytest.raises(CaptureError, match="No hwmon power sensor named 'nope'"):
        find_hwmon(LocalSysfs(tree), "nope")


def test_ina226_constant_power_locally(tree: Path, tmp_path: Path) -> None:
    monitor = HwmonMonitor(parse_power_source("hwmon:ina226"), lambda: LocalSysfs(tree))
    capture, seconds = _window(monitor, tmp_path)
    assert capture.provenance is Provenance.HOST
    assert capture.energy_j == pytest.approx(1.25 * seconds, rel=1e-6)
    assert capture.idle_power_w == pytest.approx(1.25)
    assert capture.samples >= 5 and capture.sample_rate_hz > 20


def test_ina3221_input_rail_is_not_summed_with_its_sub_rails(tree: Path, tmp_path: Path) -> None:
    """Jetson layout: VDD_IN is the module's input and VDD_CPU_GPU_CV a rail inside it; the
    chip's power is the input rail alone (adding the sub-rail counted it twice, +15 % here),
    and the capture says which rail was used."""
    chip = HwmonMonitor(parse_power_source("hwmon:ina3221"), lambda: LocalSysfs(tree))
    capture, seconds = _window(chip, tmp_path, 0.3)
    assert capture.energy_j == pytest.approx(2.0 * seconds, rel=1e-6)
    selection = capture.identity.details["selection"]
    assert "input rail VDD_IN of ina3221" in selection and "VDD_CPU_GPU_CV" in selection
    sub = HwmonMonitor(parse_power_source("hwmon:VDD_CPU_GPU_CV"), lambda: LocalSysfs(tree))
    capture, seconds = _window(sub, tmp_path, 0.3)
    assert capture.energy_j == pytest.approx(0.3 * seconds, rel=1e-6)
    assert "(named)" in capture.identity.details["selection"]
    # rails that are siblings (no input rail among them, as an AGX Xavier's GPU/CPU/SOC)
    # are summed, and said to be
    siblings = tmp_path / "xavier"
    ina3221_tree(siblings, {"GPU": (1000, 500), "CPU": (1000, 700)})
    summed = HwmonMonitor(parse_power_source("hwmon:ina3221"), lambda: LocalSysfs(siblings))
    capture, seconds = _window(summed, tmp_path, 0.3)
    assert capture.energy_j == pytest.approx((0.5 + 0.7) * seconds, rel=1e-6)
    assert "sum of rails GPU, CPU" in capture.identity.details["selection"]


def _assert_counter_energy(
    monitor: RaplMonitor, capture: Any, seconds: float, watts: float
) -> None:
    """The energy of the window within what the reads' timing allows, and no wrap missed.

    The stand-in counter is the clock's value at the moment it is read, and a reading is
    stamped at the middle of its read: each edge is off by at most half the slowest read,
    so the energy by at most ``watts`` x the slowest read (plus 1 µJ of counter rounding).
    A missed wrap costs 1 J, a wrap counted twice adds 1 J.
    """
    slowest = monitor.slowest_read_s
    assert float(capture.identity.details["slowest_read_ms"]) == pytest.approx(
        slowest * 1e3, abs=1e-3
    )
    assert abs(capture.energy_j - watts * seconds) <= watts * slowest + 2e-6
    # outside the window: energy over time of the idle stretches (>= 0.4 s in all)
    assert capture.idle_power_w is not None
    assert abs(capture.idle_power_w - watts) <= watts * 2 * slowest / 0.4 + 1e-5


def test_rapl_counter_wraps_locally(tmp_path: Path) -> None:
    counter = rapl_tree(tmp_path / "sys", energy_uj=900_000, max_range_uj=1_000_000)
    monitor = RaplMonitor(parse_power_source("rapl"), lambda: LocalSysfs(tmp_path / "sys"))
    with CounterWriter(counter, watts=2.0, max_range=1_000_000):
        capture, seconds = _window(monitor, tmp_path, 1.2)
    # 2 W wraps the 1 J counter twice a second: at least two wraps inside the window
    assert int(capture.identity.details["wraps"]) >= 2
    _assert_counter_energy(monitor, capture, seconds, 2.0)


def test_rapl_absent_and_unreadable(tmp_path: Path) -> None:
    monitor = RaplMonitor(parse_power_source("rapl"), lambda: LocalSysfs(tmp_path))
    with pytest.raises(CaptureError, match="No RAPL package zone"):
        monitor.open()


def test_a_sensor_file_without_a_number_is_a_capture_error(tree: Path, tmp_path: Path) -> None:
    rapl_tree(tmp_path, energy_uj=0, max_range_uj=1_000).write_text("\n")
    rapl = RaplMonitor(parse_power_source("rapl"), lambda: LocalSysfs(tmp_path))
    with pytest.raises(CaptureError, match=r"intel-rapl:0/energy_uj .* read '', not an integer"):
        rapl.open()
    power = next(tree.rglob("power1_input"))
    power.write_text("-EIO\n")
    hwmon = HwmonMonitor(parse_power_source("hwmon:ina226"), lambda: LocalSysfs(tree))
    with pytest.raises(CaptureError, match=r"power1_input .* read '-EIO', not an integer"):
        hwmon.open()


def _ssh_config(board: Any, root: Path, power: str) -> DeployConfig:
    return DeployConfig(
        target="raspberrypi",
        backend="ssh",
        ssh_host=board.host,
        ssh_port=board.port,
        ssh_user=board.user,
        ssh_key_path=board.key_path,
        ssh_known_hosts_path=board.known_hosts_path,
        power=power,
        power_sysfs_root=root,
    )


@pytest.mark.ssh
def test_hwmon_through_the_ssh_board(ssh_board: Any, tree: Path, tmp_path: Path) -> None:
    config = _ssh_config(ssh_board, tree, "hwmon:ina226")
    checks = sysfs_checks(parse_power_source("hwmon:ina226"), config, ssh=True)
    assert checks and all(c.ok for c in checks), checks
    assert f"{ssh_board.host}" in checks[0].detail
    missing = sysfs_checks(parse_power_source("hwmon:INA999"), config, ssh=True)
    assert not missing[0].ok and "INA999" in missing[0].detail
    reader = make_reader(config, ssh=True)
    assert isinstance(reader, SshSysfs)
    reader.close()
    monitor = HwmonMonitor(
        parse_power_source("hwmon:ina226"), lambda: make_reader(config, ssh=True)
    )
    capture, seconds = _window(monitor, tmp_path, 0.5)
    assert capture.provenance is Provenance.SILICON  # read on the board
    assert capture.energy_j == pytest.approx(1.25 * seconds, rel=1e-6)
    vi = HwmonMonitor(parse_power_source("hwmon:VDD_IN"), lambda: make_reader(config, ssh=True))
    capture, seconds = _window(vi, tmp_path, 0.5)
    assert capture.energy_j == pytest.approx(2.0 * seconds, rel=1e-6)


@pytest.mark.ssh
def test_rapl_wrap_through_the_ssh_board(ssh_board: Any, tree: Path, tmp_path: Path) -> None:
    counter = rapl_tree(tree, energy_uj=900_000, max_range_uj=1_000_000)
    for d in tree.rglob("*"):
        d.chmod(0o755 if d.is_dir() else 0o644)
    config = _ssh_config(ssh_board, tree, "rapl")
    monitor = RaplMonitor(parse_power_source("rapl"), lambda: make_reader(config, ssh=True))
    with CounterWriter(counter, watts=2.0, max_range=1_000_000):
        capture, seconds = _window(monitor, tmp_path, 1.2)
    assert int(capture.identity.details["wraps"]) >= 2
    _assert_counter_energy(monitor, capture, seconds, 2.0)  # each read is an SSH round trip


@pytest.mark.ssh
@pytest.mark.slow
def test_ssh_board_power_run_reads_the_boards_sensor(
    ssh_board: Any, tree: Path, export_factory: Any, tmp_path: Path
) -> None:
    """A whole deploy on the SSH test board with --power hwmon: the program runs N times on
    the board inside a host-timed window while the board's (stand-in) INA226 is polled."""
    import aidge_deploy

    artifact = export_factory("benchmark", target="raspberrypi", nb_iterations=5)
    config = _ssh_config(ssh_board, tree, "hwmon:ina226")
    config.power_window_s = 1.0
    result = aidge_deploy.deploy(artifact, config, work_dir=tmp_path / "run")
    power = result.power
    assert power is not None and power.capture is not None, power
    assert power.provenance is Provenance.SILICON and power.capabilities.gate.value == "host"
    assert power.plan.inferences == power.plan.repeats * 7  # 2 warm-up + 5 timed per run
    # runs go on until the planned window is filled, however fast each turned out
    assert power.capture.duration_s >= power.plan.target_window_s >= 1.0
    avg = result.metric("power_average")
    assert avg is not None and avg.value == pytest.approx(1250.0, rel=1e-6)  # mW, constant
    idle = result.metric("power_idle")
    assert idle is not None and idle.value == pytest.approx(1250.0, rel=1e-6)
    energy = result.metric("energy_per_inference")
    assert energy is not None and energy.value is not None and energy.value > 0
    assert energy.provenance is Provenance.SILICON
    # 1.25 W x the clean latency: the program's start-ups in the window are not billed
    assert energy.value == pytest.approx(1.25 * power.plan.clean_latency_s * 1e6, rel=1e-6)
    # a healthy run on the board carries no power warning (its window holds start-ups)
    assert [i.code for i in power.issues] == [], ([i.message for i in power.issues], power.plan)


def test_a_planned_window_holds_its_samples_when_reads_come_late() -> None:
    """The sampler reads on a fixed grid, but a read can come late (a busy machine): at the
    window's end it then falls outside. A window planned for exactly 50 samples held 49
    (``test_host_rapl_window`` in a full-suite run); the plan keeps a margin of samples."""
    from aidge_deploy.pipeline.stages.power import MIN_WINDOW_SAMPLES, planned_window_s

    rate = 50.0  # the monitor's nominal rate (its poll period: 20 ms)
    period = 1.0 / rate

    def samples_inside(window_s: float) -> int:
        # the window starts just after a read, and the last read due inside it comes late
        # by 0.6 of a period; counted as ``PolledMonitor.window_capture`` counts them
        times = [(k + 0.9) * period for k in range(-15, 100)]
        due = max(i for i, t in enumerate(times) if t <= window_s)
        times[due] += 0.6 * period
        return sum(1 for t in times if 0.0 <= t <= window_s)

    assert samples_inside(MIN_WINDOW_SAMPLES / rate) < MIN_WINDOW_SAMPLES  # the old plan
    assert samples_inside(planned_window_s(0.5, rate)) >= MIN_WINDOW_SAMPLES
