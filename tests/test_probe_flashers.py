"""Probe flashers (pyOCD, OpenOCD, J-Link): what can be exercised without a probe.

No debug probe exists on this machine, so these tests check the real failure paths a user
without a connected probe meets: OpenOCD really starts and reports that it found no adapter,
pyOCD's real probe scan finds none, J-Link's server is not installed. Each ends in a typed
error with a hint, and no server process is left behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from aidge_deploy.errors import FlashError, PreflightError
from aidge_deploy.flash.registry import FlashRequest, flasher_names, get_flasher, get_flasher_class
from envparts import needs, not_applicable
from testfw import Variant, needs_qemu


def test_all_probe_flashers_are_registered_with_capabilities() -> None:
    assert {"gdb-remote", "pyocd", "openocd", "jlink"} <= set(flasher_names())
    for name in ("pyocd", "openocd", "jlink"):
        caps = get_flasher_class(name).caps
        assert caps.verify and caps.reset and caps.erase


@needs_qemu
@needs(shutil.which("openocd") is not None, "openocd is not installed")
def test_openocd_without_a_probe_is_a_flash_error_with_its_log(
    firmware: Callable[[str, object], Path], tmp_path: Path
) -> None:
    flasher = get_flasher("openocd", target="target/stm32h7x.cfg", log_dir=tmp_path)
    with pytest.raises(FlashError) as info:
        flasher.flash(FlashRequest(image=firmware("mps2-an386", Variant.DEMO), timeout_s=20))
    err = info.value
    assert "openocd exited" in err.message and err.hint and "udev" in err.hint
    assert err.log_path is not None and err.log_path.is_file()
    leftover = subprocess.run(
        ["pgrep", "-P", str(os.getpid()), "openocd"], capture_output=True, text=True, check=False
    )
    assert leftover.stdout.strip() == "", "openocd outlived the flash attempt"


def test_jlink_without_its_server_is_a_preflight_error(tmp_path: Path) -> None:
    if shutil.which("JLinkGDBServerCLExe"):
        not_applicable("SEGGER J-Link software is installed here")
    flasher = get_flasher("jlink", device="STM32H7A3ZI", log_dir=tmp_path)
    with pytest.raises(PreflightError) as info:
        flasher.preflight()
    assert "JLinkGDBServerCLExe" in info.value.message and info.value.hint


def test_pyocd_without_a_probe_is_a_preflight_error(tmp_path: Path) -> None:
    flasher = get_flasher("pyocd", target="stm32h743xx", log_dir=tmp_path)
    with pytest.raises(PreflightError) as info:
        flasher.preflight()
    assert "probe" in info.value.message and info.value.hint
