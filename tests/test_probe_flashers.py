"""Probe flashers (pyOCD, OpenOCD, J-Link): what can be exercised without a probe.

No debug probe exists on this machine, so these tests check the real failure paths a user
without a connected probe meets: OpenOCD really starts and reports that it found no adapter,
pyOCD's real probe scan finds none, J-Link's server is not installed. Each ends in a typed
error with a hint, and no server process is left behind.

How the GDB port is chosen is tested with the real OpenOCD on its "dummy" adapter (it opens
its GDB server on the port it picked, then refuses the session) and, for the proprietary
J-Link server, with a stand-in script named as such.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from aidge_deploy.errors import FlashError, PreflightError
from aidge_deploy.flash import flashers as flashers_module
from aidge_deploy.flash.flashers import GdbServerFlasher, OpenOcdFlasher
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


# -- GDB-server ports and logs ------------------------------------------------------------------

# OpenOCD's own "dummy" adapter and an ARM7 TAP whose examination is deferred: the real
# OpenOCD starts, opens its GDB server and refuses the session (no core was examined), which
# is as far as any GDB server gets without a probe.
_DUMMY_INTERFACE = "adapter driver dummy\nadapter speed 1000\ntransport select jtag\n"
_DUMMY_TARGET = (
    "jtag newtap x cpu -irlen 4 -expected-id 0\n"
    "target create x.cpu arm7tdmi -chain-position x.cpu -defer-examine\n"
)
_needs_openocd = needs(shutil.which("openocd") is not None, "openocd is not installed")


def _dummy_openocd(tmp_path: Path, name: str) -> OpenOcdFlasher:
    scripts = tmp_path / f"scripts-{name}"
    scripts.mkdir()
    (scripts / "dummy-interface.cfg").write_text(_DUMMY_INTERFACE)
    (scripts / "dummy-target.cfg").write_text(_DUMMY_TARGET)
    return OpenOcdFlasher(
        str(scripts / "dummy-target.cfg"),
        interface=str(scripts / "dummy-interface.cfg"),
        log_dir=tmp_path / f"run-{name}" / "logs",
    )


def _flash_error(flasher: OpenOcdFlasher, image: Path) -> FlashError:
    with pytest.raises(FlashError) as info:
        flasher.flash(FlashRequest(image=image, timeout_s=20))
    return info.value


def _no_openocd_left() -> None:
    leftover = subprocess.run(
        ["pgrep", "-P", str(os.getpid()), "openocd"], capture_output=True, text=True, check=False
    )
    assert leftover.stdout.strip() == "", "openocd outlived the flash attempt"


@needs_qemu
@_needs_openocd
def test_openocd_picks_its_own_gdb_port_and_the_client_uses_that_one(
    firmware: Callable[[str, object], Path], tmp_path: Path
) -> None:
    flasher = _dummy_openocd(tmp_path, "a")
    assert "gdb_port 0" in flasher.server_command(0)
    err = _flash_error(flasher, firmware("mps2-an386", Variant.DEMO))
    log = err.log_path
    assert log is not None and log.parent == tmp_path / "run-a" / "logs"
    assert log.name.startswith("openocd-gdbserver-") and log.stat().st_mode & 0o077 == 0
    text = log.read_text()
    listening = re.search(r"Listening on port (\d+) for gdb connections", text)
    assert listening is not None, text
    port = listening.group(1)
    assert port != "0" and f"port {port}" in err.message
    # OpenOCD saw our client (on the one port it listens on) and refused the session,
    # as it does when no core was examined; the error says so, with its log
    assert "accepting 'gdb' connection" in text and "refuse gdb connection" in text
    assert "refuse gdb connection" in err.message
    _no_openocd_left()


@needs_qemu
@_needs_openocd
def test_parallel_openocd_servers_never_share_a_port(
    firmware: Callable[[str, object], Path], tmp_path: Path
) -> None:
    image = firmware("mps2-an386", Variant.DEMO)
    flashers = [_dummy_openocd(tmp_path, str(i)) for i in range(3)]
    with ThreadPoolExecutor(len(flashers)) as pool:
        errors = list(pool.map(lambda f: _flash_error(f, image), flashers))
    ports = []
    for err in errors:
        assert err.log_path is not None
        text = err.log_path.read_text()
        found = re.search(r"Listening on port (\d+) for gdb connections", text)
        assert found is not None
        ports.append(found.group(1))
        assert "accepting 'gdb' connection" in text and f"port {found.group(1)}" in err.message
    assert len(set(ports)) == len(ports)
    _no_openocd_left()


def test_server_logs_without_a_run_folder_go_to_a_private_folder() -> None:
    flasher = get_flasher("openocd", target="target/stm32h7x.cfg")
    assert isinstance(flasher, GdbServerFlasher)
    first, second = flasher._log_path(), flasher._log_path()
    try:
        assert first != second
        for log in (first, second):
            assert log.parent.parent == Path(tempfile.gettempdir())
            assert log.parent.name.startswith("aidge-deploy-gdbserver-")
            assert log.parent.stat().st_mode & 0o777 == 0o700
            assert log.stat().st_mode & 0o077 == 0
    finally:
        for log in (first, second):
            shutil.rmtree(log.parent)


# A stand-in for SEGGER's JLinkGDBServerCLExe (proprietary, not installable here), named as
# such: it binds the -port it is given, says so the way the real server does, and takes one
# client which it drops; when the port is taken it reports that and exits.
_FAKE_JLINK = """#!{python}
import socket, sys
port = int(sys.argv[sys.argv.index("-port") + 1])
sock = socket.socket()
try:
    sock.bind(("127.0.0.1", port))
except OSError:
    print(f"ERROR: Failed to open listener port {{port}}", flush=True)
    sys.exit(1)
sock.listen(1)
print(f"Listening on TCP/IP port {{port}}", flush=True)
sock.settimeout(20)
client, _ = sock.accept()
client.close()
"""


def test_jlink_restarts_its_server_when_the_port_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "JLinkGDBServerCLExe"
    fake.parent.mkdir()
    fake.write_text(_FAKE_JLINK.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(1)  # another program took the port between our check and the server
    taken = squatter.getsockname()[1]
    real_unused = flashers_module._unused_port
    handed: list[int] = []

    def unused_port() -> int:
        port = taken if not handed else real_unused()
        handed.append(port)
        return port

    monkeypatch.setattr(flashers_module, "_unused_port", unused_port)
    image = tmp_path / "fw.bin"
    image.write_bytes(b"\0" * 64)
    flasher = get_flasher("jlink", device="STM32H7A3ZI", log_dir=tmp_path / "logs")
    try:
        with pytest.raises(FlashError) as info:
            flasher.flash(FlashRequest(image=image, load_address=0x08000000, timeout_s=10))
    finally:
        squatter.close()
    text = (info.value.log_path or Path()).read_text()
    assert f"Failed to open listener port {taken}" in text
    second = re.findall(r"Listening on TCP/IP port (\d+)", text)
    assert len(second) == 1 and int(second[0]) != taken
    # the client went to the restarted server's own port, never to the squatter
    assert f"port {second[0]}" in info.value.message and "GDB session failed" in info.value.message


# -- each flasher owns its options ---------------------------------------------------------------


def _probe_target(**config: object) -> Any:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.registry import get_deploy_target

    return get_deploy_target(
        "stm32h7a3", "local", DeployConfig(target="stm32h7a3", serial_port="/dev/null", **config)
    )


def test_a_flasher_is_built_from_the_board_and_its_own_typed_options(tmp_path: Path) -> None:
    from aidge_deploy.flash.flashers import JLinkFlasher

    openocd = _probe_target(
        flash_method="openocd", flash_options={"interface": "interface/cmsis-dap.cfg"}
    ).flasher(tmp_path)
    assert isinstance(openocd, OpenOcdFlasher)
    assert openocd.interface == "interface/cmsis-dap.cfg"
    assert openocd.target == "target/stm32h7x.cfg"  # from the hardware model's HAL family
    jlink = _probe_target(
        flash_method="jlink", flash_options=["speed_khz=0x800", "device=STM32H7A3ZI"]
    ).flasher(tmp_path)
    assert isinstance(jlink, JLinkFlasher)
    assert (jlink.speed_khz, jlink.device) == (2048, "STM32H7A3ZI")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"flash_method": "pyocd", "flash_options": {"interface": "SWD"}},
         "has no option 'interface' (it is an option of jlink, openocd)"),
        ({"flash_method": "jlink", "flash_options": {"speed": "4000"}},
         "did you mean 'speed_khz'?"),
        ({"flash_method": "jlink", "flash_options": {"speed_khz": "fast"}}, "is not an integer"),
        ({"flash_method": "openocd", "extra": {"openocd_target": "x.cfg"}},
         "extra['openocd_target'] is no longer read"),
        ({"flash_method": "setools"}, "unknown flash method 'setools'"),
    ],
)  # fmt: skip
def test_a_flasher_refuses_options_it_does_not_own(config: dict[str, Any], expected: str) -> None:
    from aidge_deploy.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        _probe_target(**config).check_config()
    assert expected in info.value.message


def test_flash_options_must_be_key_value() -> None:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.errors import ConfigError

    with pytest.raises(ConfigError, match="is not KEY=VALUE"):
        DeployConfig(flash_options=["interface"])


def test_each_flasher_says_what_it_needs_here() -> None:
    needs = {name: get_flasher_class(name).needs() for name in flasher_names()}
    assert needs["gdb-remote"] == []
    assert [c.name for c in needs["jlink"]] == ["JLinkGDBServerCLExe"]
    assert needs["jlink"][0].ok is (shutil.which("JLinkGDBServerCLExe") is not None)
    assert [c.name for c in needs["openocd"]] == ["openocd"]
    assert needs["pyocd"][0].ok  # a dependency of aidge-deploy
