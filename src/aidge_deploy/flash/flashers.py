"""The built-in flashers: any GDB server (``gdb-remote``), pyOCD, OpenOCD and J-Link.

All program through the same pure-Python RSP client (``gdb_remote``): ``gdb-remote`` talks
to a server someone else started (QEMU's gdbstub, a running OpenOCD or J-Link GDB server);
``pyocd``, ``openocd`` and ``jlink`` start their probe's GDB server, flash through it with
``vFlash*`` on the regions it reports, verify, and stop it again.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path

from aidge_deploy.errors import ConnectError, FlashError, PreflightError
from aidge_deploy.flash.gdb_remote import GdbRemoteClient
from aidge_deploy.flash.image import load_image
from aidge_deploy.flash.program import FlashReport, ResetMode, flash_image, program
from aidge_deploy.flash.registry import FlasherCaps, FlashRequest, check_request, register_flasher

_log = logging.getLogger(__name__)

_PYOCD_HINT = (
    "connect the board's debug probe (ST-Link, CMSIS-DAP, J-Link) and check `pyocd list`; "
    "on Linux install pyOCD's udev rules so the probe is accessible without root"
)


@register_flasher("gdb-remote")
class GdbRemoteFlasher:
    """Program through a GDB server that is already running at ``host:port``.

    ``halt_command`` (e.g. ``reset halt`` for OpenOCD) runs before writing;
    ``reset_command`` is what ``ResetMode.MONITOR`` sends (QEMU: ``system_reset``;
    OpenOCD/pyOCD: ``reset halt``; J-Link: ``reset``).
    """

    name = "gdb-remote"
    caps = FlasherCaps(erase=True, verify=True, reset=True, flash_addr=True)

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 3333,
        *,
        halt_command: str | None = None,
        reset_command: str = "system_reset",
    ) -> None:
        self.host = host
        self.port = port
        self.halt_command = halt_command
        self.reset_command = reset_command

    def preflight(self) -> None:
        # No trial connection: pyOCD and others end their session when the first client
        # leaves, so checking would consume the session the flash needs.
        if not 0 < self.port < 65536:
            raise PreflightError(f"GDB server port {self.port} is invalid", "use 1..65535")
        try:
            socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise PreflightError(
                f"cannot resolve the GDB server host {self.host!r}: {exc}",
                "check the host name of the machine running the GDB server",
            ) from exc

    def flash(self, request: FlashRequest) -> FlashReport:
        check_request(self, request)
        return flash_image(
            self.host,
            self.port,
            load_image(request.image, request.load_address),
            verify=request.verify,
            erase=request.erase,
            reset=request.reset,
            halt_command=self.halt_command,
            reset_command=self.reset_command,
            timeout=request.timeout_s,
        )


class GdbServerFlasher(ABC):
    """A flasher that starts a probe's GDB server, programs through it and stops it.

    Subclasses say how to start their server (``server_command``) and which monitor
    commands halt and reset the core on it; the programming itself is the shared RSP
    client (``vFlash*`` on the flash regions the server reports, then read-back).
    """

    name: str
    caps = FlasherCaps(erase=True, verify=True, reset=True, flash_addr=True)
    server_label: str
    install_hint: str
    probe_hint: str
    halt_command: str | None = "reset halt"
    reset_command: str = "reset halt"
    #: the server quits by itself once the debugger detaches (else it is terminated)
    exits_after_detach: bool = True

    log_dir: Path | None = None

    @abstractmethod
    def server_command(self, gdb_port: int) -> list[str]:
        """argv that starts the GDB server on ``gdb_port``."""

    @abstractmethod
    def preflight(self) -> None:
        """Raise ``PreflightError`` when the server or the probe is missing."""

    def flash(self, request: FlashRequest) -> FlashReport:
        check_request(self, request)
        self.preflight()
        image = load_image(request.image, request.load_address)
        gdb_port = _free_port()
        log_dir = self.log_dir or Path(tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{self.name}-gdbserver-{gdb_port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                self.server_command(gdb_port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            client = self._connect(process, gdb_port, request.timeout_s, log_path)
            with client:
                # halting puts the core in a known state; after programming,
                # ResetMode.MONITOR resets again so the program starts as from power-on.
                return program(
                    client,
                    image,
                    verify=request.verify,
                    erase=request.erase,
                    reset=request.reset,
                    halt_command=self.halt_command,
                    reset_command=self.reset_command,
                )
        except FlashError as exc:
            exc.log_path = exc.log_path or log_path
            raise
        finally:
            _stop(process, wait_s=5.0 if self.exits_after_detach else 0.0)

    def _connect(
        self, process: subprocess.Popen[bytes], port: int, timeout_s: float, log_path: Path
    ) -> GdbRemoteClient:
        # Retry refused connections only: a refused connect does not count as a session.
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-1500:].strip()
                raise FlashError(
                    f"{self.server_label} exited with status {process.returncode}: {tail}",
                    self.probe_hint,
                    log_path=log_path,
                )
            client = GdbRemoteClient(timeout=timeout_s)
            try:
                client.connect("127.0.0.1", port)
                return client
            except ConnectError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)


def _require_program(program_name: str, install_hint: str) -> str:
    path = shutil.which(program_name)
    if path is None:
        raise PreflightError(f"{program_name} is not installed", install_hint)
    return path


@register_flasher("pyocd")
class PyocdFlasher(GdbServerFlasher):
    """Program a board through its debug probe with ``pyocd gdbserver`` + the RSP client."""

    name = "pyocd"
    server_label = "pyocd gdbserver"
    install_hint = "pip install pyocd"
    probe_hint = _PYOCD_HINT

    def __init__(
        self,
        target: str,
        *,
        probe_uid: str | None = None,
        frequency: str | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.target = target
        self.probe_uid = probe_uid
        self.frequency = frequency
        self.log_dir = log_dir

    def preflight(self) -> None:
        try:
            from pyocd.probe.aggregator import DebugProbeAggregator
        except ImportError as exc:
            raise PreflightError("pyOCD is not installed", self.install_hint) from exc
        probes = DebugProbeAggregator.get_all_connected_probes(unique_id=self.probe_uid)
        if not probes:
            which = f" with unique id {self.probe_uid!r}" if self.probe_uid else ""
            raise PreflightError(f"no debug probe{which} is connected", _PYOCD_HINT)
        if len(probes) > 1 and self.probe_uid is None:
            ids = ", ".join(str(probe.unique_id) for probe in probes)
            raise PreflightError(
                f"{len(probes)} debug probes are connected ({ids})",
                "choose one with probe_uid (serial_number in the deploy config)",
            )

    def server_command(self, gdb_port: int) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "pyocd",
            "gdbserver",
            "--no-config",
            "--no-wait",
            "--target",
            self.target,
            "--port",
            str(gdb_port),
            "--telnet-port",
            str(_free_port()),
        ]
        if self.probe_uid:
            command += ["--uid", self.probe_uid]
        if self.frequency:
            command += ["--frequency", self.frequency]
        return command


@register_flasher("openocd")
class OpenOcdFlasher(GdbServerFlasher):
    """Program through OpenOCD's GDB server (ST-Link, CMSIS-DAP, FTDI JTAG, ...).

    ``interface`` and ``target`` are OpenOCD configuration scripts (``interface/stlink.cfg``,
    ``target/stm32h7x.cfg``); ``probe_serial`` selects one probe among several.
    """

    name = "openocd"
    server_label = "openocd"
    install_hint = "apt-get install --no-install-recommends openocd"
    probe_hint = (
        "connect the probe, check the interface/target scripts, and on Linux install OpenOCD's "
        "udev rules (60-openocd.rules) so the probe is accessible without root"
    )
    exits_after_detach = False

    def __init__(
        self,
        target: str,
        *,
        interface: str = "interface/stlink.cfg",
        probe_serial: str | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.target = target
        self.interface = interface
        self.probe_serial = probe_serial
        self.log_dir = log_dir

    def preflight(self) -> None:
        _require_program("openocd", self.install_hint)

    def server_command(self, gdb_port: int) -> list[str]:
        command = [_require_program("openocd", self.install_hint), "-f", self.interface]
        if self.probe_serial:
            command += ["-c", f"adapter serial {self.probe_serial}"]
        return [
            *command,
            "-f",
            self.target,
            "-c",
            f"gdb_port {gdb_port}",
            "-c",
            "tcl_port disabled",
            "-c",
            "telnet_port disabled",
        ]


@register_flasher("jlink")
class JLinkFlasher(GdbServerFlasher):
    """Program through SEGGER's J-Link GDB server (``JLinkGDBServerCLExe``).

    ``device`` is J-Link's name of the part (``STM32H7A3ZI``); ``probe_serial`` selects the
    probe by its USB serial number.
    """

    name = "jlink"
    server_label = "JLinkGDBServerCLExe"
    install_hint = "install SEGGER J-Link Software (JLinkGDBServerCLExe on PATH)"
    probe_hint = "connect the J-Link, check the device name, and accept SEGGER's licence once"
    halt_command = "halt"
    reset_command = "reset"

    def __init__(
        self,
        device: str,
        *,
        probe_serial: str | None = None,
        interface: str = "SWD",
        speed_khz: int = 4000,
        log_dir: Path | None = None,
    ) -> None:
        self.device = device
        self.probe_serial = probe_serial
        self.interface = interface
        self.speed_khz = speed_khz
        self.log_dir = log_dir

    def preflight(self) -> None:
        _require_program("JLinkGDBServerCLExe", self.install_hint)

    def server_command(self, gdb_port: int) -> list[str]:
        command = [
            _require_program("JLinkGDBServerCLExe", self.install_hint),
            "-device",
            self.device,
            "-if",
            self.interface,
            "-speed",
            str(self.speed_khz),
            "-port",
            str(gdb_port),
            "-nogui",
            "-singlerun",
            "-silent",
        ]
        if self.probe_serial:
            command += ["-select", f"USB={self.probe_serial}"]
        return command


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes], wait_s: float = 5.0) -> None:
    """Give a single-run server ``wait_s`` to exit after the detach, then stop it; reap it."""
    try:
        process.wait(wait_s)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    except BaseException:
        process.kill()
        process.wait(5)
        raise


__all__ = [
    "GdbRemoteFlasher",
    "GdbServerFlasher",
    "JLinkFlasher",
    "OpenOcdFlasher",
    "PyocdFlasher",
    "ResetMode",
]
