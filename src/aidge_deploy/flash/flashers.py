"""The built-in flashers: any GDB server (``gdb-remote``), pyOCD, OpenOCD and J-Link.

All program through the same pure-Python RSP client (``gdb_remote``): ``gdb-remote`` talks
to a server someone else started (QEMU's gdbstub, a running OpenOCD or J-Link GDB server);
``pyocd``, ``openocd`` and ``jlink`` start their probe's GDB server, flash through it with
``vFlash*`` on the regions it reports, verify, and stop it again.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from abc import abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from aidge_deploy.backendoptions import doc
from aidge_deploy.cpupriority import share_priority
from aidge_deploy.errors import ConnectError, FlashError, PreflightError
from aidge_deploy.flash.gdb_remote import GdbRemoteClient
from aidge_deploy.flash.image import load_image
from aidge_deploy.flash.program import FlashReport, ResetMode, flash_image, program
from aidge_deploy.flash.registry import (
    BoardLink,
    Flasher,
    FlasherCaps,
    FlashRequest,
    check_request,
)
from aidge_deploy.readiness import ToolCheck, module_check, program_check
from aidge_deploy.runcontrol import register_group

_log = logging.getLogger(__name__)

_PYOCD_HINT = (
    "connect the board's debug probe (ST-Link, CMSIS-DAP, J-Link) and check `pyocd list`; "
    "on Linux install pyOCD's udev rules so the probe is accessible without root"
)


class GdbRemoteFlasher(Flasher):
    """Program through a GDB server that is already running at ``host:port``.

    ``halt_command`` (e.g. ``reset halt`` for OpenOCD) runs before writing;
    ``reset_command`` is what ``ResetMode.MONITOR`` sends (QEMU: ``system_reset``;
    OpenOCD/pyOCD: ``reset halt``; J-Link: ``reset``).
    """

    name = "gdb-remote"
    caps = FlasherCaps(erase=True, verify=True, reset=True, flash_addr=True)

    @dataclass(frozen=True)
    class Options:
        host: str = field(default="127.0.0.1", metadata=doc("host of the running GDB server"))
        port: int = field(default=3333, metadata=doc("its GDB port"))
        halt_command: str | None = field(
            default=None, metadata=doc("monitor command that halts the core before writing")
        )
        reset_command: str = field(
            default="system_reset", metadata=doc("monitor command that resets after writing")
        )

    @classmethod
    def for_board(cls, board: BoardLink, options: GdbRemoteFlasher.Options) -> GdbRemoteFlasher:
        return cls(
            options.host,
            options.port,
            halt_command=options.halt_command,
            reset_command=options.reset_command,
        )

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


class _PortTaken(Exception):
    """The server could not bind the port it was given (someone took it first)."""


class GdbServerFlasher(Flasher):
    """A flasher that starts a probe's GDB server, programs through it and stops it.

    Subclasses say how to start their server (``server_command``) and which monitor
    commands halt and reset the core on it; the programming itself is the shared RSP
    client (``vFlash*`` on the flash regions the server reports, then read-back).

    The GDB port is never chosen by binding a socket and closing it again (another process
    may take it in between, and the client would then talk to *that* server). A server that
    can bind port 0 (``picks_own_port``) is started with 0 and the client connects to the
    port it reports listening on; one that cannot is given a free port and restarted on
    another when it reports the port taken. Either way the client connects only after the
    server's own log says it listens, and only to that port. The server's log goes to the
    run's log folder (``log_dir``), else to a private temporary folder.
    """

    caps = FlasherCaps(erase=True, verify=True, reset=True, flash_addr=True)
    server_label: ClassVar[str]
    install_hint: ClassVar[str]
    probe_hint: str
    halt_command: str | None = "reset halt"
    reset_command: str = "reset halt"
    #: the server quits by itself once the debugger detaches (else it is terminated)
    exits_after_detach: bool = True
    #: the server binds port 0 and reports the port it got (no port is chosen for it)
    picks_own_port: bool = True
    #: the server's log line saying it listens; group 1 is the port
    listening_pattern: re.Pattern[str]
    #: the server's log line saying its port was taken (restart on another one)
    port_taken_pattern: re.Pattern[str] | None = None
    #: how many ports to try when the server cannot pick its own
    port_attempts: int = 3

    log_dir: Path | None = None

    @abstractmethod
    def server_command(self, gdb_port: int) -> list[str]:
        """argv that starts the GDB server on ``gdb_port`` (0: a port it picks itself)."""

    @abstractmethod
    def preflight(self) -> None:
        """Raise ``PreflightError`` when the server or the probe is missing."""

    def _log_path(self) -> Path:
        """A new log file nobody else can predict or own: ``mkstemp`` in the run's log
        folder, or in a private ``mkdtemp`` folder when the flasher has none."""
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            folder = self.log_dir
        else:
            folder = Path(tempfile.mkdtemp(prefix="aidge-deploy-gdbserver-"))
        handle, name = tempfile.mkstemp(prefix=f"{self.name}-gdbserver-", suffix=".log", dir=folder)
        os.close(handle)
        return Path(name)

    def flash(self, request: FlashRequest) -> FlashReport:
        check_request(self, request)
        self.preflight()
        image = load_image(request.image, request.load_address)
        log_path = self._log_path()
        attempts = 1 if self.picks_own_port else self.port_attempts
        for attempt in range(1, attempts + 1):
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    self.server_command(0 if self.picks_own_port else _unused_port()),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # stopped by us, whole, on an interruption
                )
            share_priority(process.pid)
            forget_group = register_group(process.pid)  # a cancelled run stops it too
            try:
                try:
                    port = self._listening_port(process, log_path, request.timeout_s)
                except _PortTaken:
                    if attempt == attempts:
                        raise FlashError(
                            f"{self.server_label} found its GDB port taken {attempts} times",
                            "another program is opening local ports quickly; retry, or stop it",
                            log_path=log_path,
                        ) from None
                    _log.info("%s: its GDB port was taken; restarting it", self.server_label)
                    continue
                with self._connect(port, request.timeout_s, log_path) as client:
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
                try:
                    _stop(process, wait_s=5.0 if self.exits_after_detach else 0.0)
                finally:
                    forget_group()
        raise FlashError(f"{self.server_label} did not start", self.probe_hint, log_path=log_path)

    def _listening_port(
        self, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float
    ) -> int:
        """Wait for the server's log to say which port it listens on."""
        deadline = time.monotonic() + timeout_s
        while True:
            exited = process.poll() is not None
            text = log_path.read_text(errors="replace")
            found = self.listening_pattern.search(text)
            if found is not None:
                return int(found.group(1))
            if exited:
                taken = self.port_taken_pattern
                if taken is not None and taken.search(text):
                    raise _PortTaken
                raise FlashError(
                    f"{self.server_label} exited with status {process.returncode}: "
                    f"{text[-1500:].strip()}",
                    self.probe_hint,
                    log_path=log_path,
                )
            if time.monotonic() >= deadline:
                raise FlashError(
                    f"{self.server_label} did not report a listening GDB port within "
                    f"{timeout_s:g} s",
                    self.probe_hint,
                    log_path=log_path,
                )
            time.sleep(0.05)

    def _connect(self, port: int, timeout_s: float, log_path: Path) -> GdbRemoteClient:
        client = GdbRemoteClient(timeout=timeout_s)
        try:
            client.connect("127.0.0.1", port)
        except ConnectError as exc:
            tail = log_path.read_text(errors="replace")[-1500:].strip()
            raise FlashError(
                f"{self.server_label} listens on port {port} but the GDB session failed: "
                f"{exc.message}; its log ends: {tail}",
                self.probe_hint,
                log_path=log_path,
            ) from exc
        return client


def _require_program(program_name: str, install_hint: str) -> str:
    path = shutil.which(program_name)
    if path is None:
        raise PreflightError(f"{program_name} is not installed", install_hint)
    return path


class PyocdFlasher(GdbServerFlasher):
    """Program a board through its debug probe with ``pyocd gdbserver`` + the RSP client."""

    name = "pyocd"
    server_label = "pyocd gdbserver"
    install_hint = "pip install pyocd"
    probe_hint = _PYOCD_HINT
    listening_pattern = re.compile(r"GDB server listening on port (\d+)")

    @dataclass(frozen=True)
    class Options:
        frequency: str | None = field(
            default=None, metadata=doc("SWD/JTAG clock (pyOCD's --frequency, e.g. 4M)")
        )

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

    @classmethod
    def needs(cls) -> list[ToolCheck]:
        return [module_check("pyocd", cls.install_hint)]

    @classmethod
    def for_board(cls, board: BoardLink, options: PyocdFlasher.Options) -> PyocdFlasher:
        return cls(
            board.part or board.target,
            probe_uid=board.probe_uid,
            frequency=options.frequency,
            log_dir=board.log_dir,
        )

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
            "0",
        ]
        if self.probe_uid:
            command += ["--uid", self.probe_uid]
        if self.frequency:
            command += ["--frequency", self.frequency]
        return command


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
    # OpenOCD >= 0.11 binds "gdb_port 0" and logs the port it got
    listening_pattern = re.compile(r"Listening on port (\d+) for gdb connections")

    @dataclass(frozen=True)
    class Options:
        target_script: str | None = field(
            default=None,
            metadata=doc("OpenOCD target script (default target/<HAL family>x.cfg)"),
        )
        interface: str = field(
            default="interface/stlink.cfg", metadata=doc("OpenOCD interface script")
        )

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

    @classmethod
    def needs(cls) -> list[ToolCheck]:
        return [program_check("openocd", cls.install_hint)]

    @classmethod
    def for_board(cls, board: BoardLink, options: OpenOcdFlasher.Options) -> OpenOcdFlasher:
        # OpenOCD names its target scripts after the family (hal_board stm32h7 -> stm32h7x)
        script = options.target_script or f"target/{board.family or board.target}x.cfg"
        return cls(
            script,
            interface=options.interface,
            probe_serial=board.probe_uid,
            log_dir=board.log_dir,
        )

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
    # J-Link's server takes its ports on the command line and has no "any port" value
    picks_own_port = False
    listening_pattern = re.compile(r"Listening on TCP/IP port (\d+)")
    port_taken_pattern = re.compile(
        r"(?i)(port\b.*\b(in use|not available|failed to (open|bind))|"
        r"failed to (open|bind)\b.*\bport)"
    )

    @dataclass(frozen=True)
    class Options:
        device: str | None = field(
            default=None,
            metadata=doc("J-Link's name of the part (default --pyocd-target, else TARGET)"),
        )
        interface: str = field(default="SWD", metadata=doc("SWD or JTAG"))
        speed_khz: int = field(default=4000, metadata=doc("interface clock, kHz"))

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

    @classmethod
    def needs(cls) -> list[ToolCheck]:
        return [program_check("JLinkGDBServerCLExe", cls.install_hint)]

    @classmethod
    def for_board(cls, board: BoardLink, options: JLinkFlasher.Options) -> JLinkFlasher:
        return cls(
            options.device or board.part or board.target.upper(),
            probe_serial=board.probe_uid,
            interface=options.interface,
            speed_khz=options.speed_khz,
            log_dir=board.log_dir,
        )

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
            # its SWO and terminal ports default to 2332/2333: two runs would collide there
            "-swoport",
            str(_unused_port()),
            "-telnetport",
            str(_unused_port()),
            "-nogui",
            "-singlerun",
            "-silent",
        ]
        if self.probe_serial:
            command += ["-select", f"USB={self.probe_serial}"]
        return command


def _unused_port() -> int:
    """A port free right now, for a server that cannot pick its own: it may be taken before
    the server binds it, which the server reports (``port_taken_pattern``) and we retry."""
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
