"""A board of an existing kind is one record: a lab's plug-in declares two boards as
``TargetSpec`` records (no class), and they are listed, checked, documented and run.

The plug-in is a wheel built in the test (``pluginwheel``: a zip with its ``.dist-info``, as in
``test_plugin_distribution``) and installed by pip into a folder of its own, put on
``PYTHONPATH`` of the commands run. Its records: ``lab-an386``, QEMU's mps2-an386 under the
lab's name (its hardware model ``mps2-an386``: an export for that board deploys to it), and
``lab-pi``, a Raspberry Pi reached over SSH. The emulated one runs a real deploy on QEMU;
the SSH one is checked in Preflight (a run without the board's address is refused, in the
words of its kind's implementation).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pluginwheel import cli, flat, installed_env

NAME, VERSION = "labboards", "1.0"
SOURCES = {
    "labboards/__init__.py": '''
"""A lab's boards for aidge-deploy: records only, no class."""
from aidge_deploy.targetspec import TargetKind, TargetSpec

#: QEMU's mps2-an386 under the lab's name: its hardware model, its machine, its BSP
LAB_AN386 = TargetSpec(
    "lab-an386", TargetKind.EMULATED_MCU, ("local",), hardware_model="mps2-an386"
)
#: the lab's Raspberry Pi, over SSH (in Docker too)
LAB_PI = TargetSpec(
    "lab-pi",
    TargetKind.LINUX_BOARD,
    ("ssh", "ssh_docker"),
    hardware_model="raspberrypi",
    description="the lab's Pi: SSH build + run (a record)",
)
''',
}
ENTRY_POINTS = """\
[aidge_deploy.boards]
lab-an386 = labboards:LAB_AN386
lab-pi = labboards:LAB_PI
"""


def test_the_plugin_declares_records_only() -> None:
    """What the acceptance asks: no class, no decorator, no entry point of targets."""
    source = SOURCES["labboards/__init__.py"]
    assert "class " not in source and "register" not in source
    assert "[aidge_deploy.targets]" not in ENTRY_POINTS


@pytest.fixture(scope="module")
def lab_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a command that sees the installed plug-in."""
    root = tmp_path_factory.mktemp("labboards")
    return installed_env(root, NAME, VERSION, SOURCES, ENTRY_POINTS)


def test_the_records_are_listed_by_targets_with_their_hardware_models(
    lab_env: dict[str, str],
) -> None:
    done = cli(lab_env, "targets")
    assert done.returncode == 0, done.stderr
    out = flat(done.stdout)
    # the emulated record: mps2-an386's hardware facts and QEMU machine, under its name
    assert "lab-an386 api, local emulated mcu: EmulatedM4 (cortex-m4)" in out
    assert "QEMU (cached ELF by -kernel, else RSP flash), icount 6" in out
    # the SSH record: the Raspberry Pi's hardware model, its own description
    assert "lab-pi api, ssh, ssh_docker linux: CPU" in out
    assert "the lab's Pi: SSH build + run (a record)" in out
    assert "failed to load" not in out


def test_the_records_are_checked_by_doctor(lab_env: dict[str, str]) -> None:
    done = cli(lab_env, "doctor")
    assert done.returncode in (0, 1), done.stderr
    out = flat(done.stdout)
    # each is checked as the boards of its kind are (the emulated one shares their row)
    assert "✓ lab-an386, mps2-an386" in out
    assert "✓ lab-pi /ssh ready" in out and "✓ lab-pi /ssh_docker ready" in out
    assert "Plug-ins that failed to load" not in out


def test_the_records_are_in_the_generated_docs(lab_env: dict[str, str], tmp_path: Path) -> None:
    done = cli(lab_env, "docs", "--write", str(tmp_path))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "targets.md").read_text()
    assert (
        "| lab-an386 | local | emulated mcu | EmulatedM4 (cortex-m4) | 25 MHz | sram 4 MiB, "
        "flash 4 MiB | make | QEMU (cached ELF by -kernel, else RSP flash), icount 6 |"
    ) in page
    assert "| lab-pi | ssh | linux | CPU | - | mem 8 GiB | cmake | the lab's Pi" in page


@pytest.mark.slow
def test_the_emulated_record_runs_an_export_of_its_hardware_model_on_qemu(
    lab_env: dict[str, str], export_factory: Callable[..., Any]
) -> None:
    """An export generated for mps2-an386 deploys to lab-an386: built with the board's BSP,
    flashed into QEMU, its figures those of an emulated board, under the lab's name."""
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=3)
    done = cli(lab_env, "run", str(artifact.path), "--target", "lab-an386", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["target"] == "lab-an386" and result["backend"] == "local"
    assert result["latency"]["n"] == 3
    # the board's figures: estimated at mps2-an386's 25 MHz core clock, as that board's
    assert result["timing"]["provenance"] == "estimated"
    assert result["timing"]["clock_hz"] == 25_000_000


def test_the_ssh_record_is_checked_in_preflight(
    lab_env: dict[str, str], export_factory: Callable[..., Any]
) -> None:
    """An export for the Raspberry Pi, sent to lab-pi without the board's address: refused
    before anything runs, by the SSH implementation its kind is deployed with."""
    artifact = export_factory("benchmark", target="raspberrypi", nb_iterations=2)
    done = cli(lab_env, "run", str(artifact.path), "--target", "lab-pi", "--backend", "ssh")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "--ssh-host" in flat(done.stderr)


def test_without_the_plugin_the_records_are_unknown(export_factory: Callable[..., Any]) -> None:
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=3)
    env = {**os.environ, "COLUMNS": "200"}
    done = cli(env, "run", str(artifact.path), "--target", "lab-an386")
    assert done.returncode == 2
    assert "lab-an386" in flat(done.stderr)
