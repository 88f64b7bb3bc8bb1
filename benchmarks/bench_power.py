"""The overhead of a power run beyond its measured window, as a ratio.

A power run costs more than its window: planning, building and flashing the power variant,
arming the monitor (and its idle baseline), reading the capture back, analysing it. This
prints ``(wall time of the five power stages) / (wall time of the measured window)`` for:

* the host with an hwmon monitor reading a stand-in INA226 sysfs tree (no sensor exists on
  this machine): the window is the program run N times, timed by the host;
* the emulated mps2-an386 with the ``emulated`` monitor: the window is the QEMU run of the
  power firmware between its gate edges (its virtual duration is an estimate; the wall time
  it takes to emulate is what the overhead is measured against).

Run: ``python benchmarks/bench_power.py [repeats]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import aidge_deploy
from common import make_export, median_of, report
from power_support import ina226_tree

POWER_STAGES = (
    "PlanPowerRun",
    "BuildPowerFirmware",
    "FlashPowerFirmware",
    "CapturePower",
    "CollectPowerTerminal",
)


def overhead(result: aidge_deploy.DeployResult) -> tuple[float, float]:
    """(power stages wall time, window wall time) of one run, in seconds."""
    durations = result.stage_durations_ms
    stages = sum(durations.get(name, 0.0) for name in POWER_STAGES) / 1e3
    power = result.power
    assert power is not None and power.capture is not None, "the power run produced no capture"
    window = power.window_wall_s
    assert window is not None and window > 0
    return stages, window


def main(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        rows: list[tuple[str, float]] = []
        ratios: list[tuple[str, float, float]] = []
        sysfs = tmp / "sys"
        ina226_tree(sysfs)
        host = make_export(tmp, target="host", nb_iterations=20)
        host_cfg = dict(power="hwmon:ina226", power_sysfs_root=sysfs, power_window_s=2.0)
        aidge_deploy.deploy(host, aidge_deploy.DeployConfig(**host_cfg))  # build once
        qemu = make_export(tmp, target="mps2-an386", nb_iterations=5)
        qemu_cfg = dict(power="emulated", power_window_s=0.05)
        aidge_deploy.deploy(qemu, aidge_deploy.DeployConfig(**qemu_cfg))
        for name, artifact, cfg in (
            ("host + hwmon (2 s window)", host, host_cfg),
            ("mps2-an386 + emulated", qemu, qemu_cfg),
        ):
            stages, windows = [], []
            for _ in range(repeats):
                s, w = overhead(aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig(**cfg)))
                stages.append(s)
                windows.append(w)
            s, w = median_of(stages), median_of(windows)
            rows += [(f"{name}: window", w), (f"{name}: power stages", s)]
            ratios.append((f"{name}", s / w, 1.5 if name.startswith("host") else 10.0))
        report(f"power run overhead beyond the measured window, median of {repeats}", rows, ratios)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
