"""The built-in flashers: any GDB server (``gdb-remote``) and pyOCD (``pyocd``).

Both program through the same pure-Python RSP client (``gdb_remote``): ``gdb-remote`` talks
to a server someone else started (QEMU's gdbstub, an OpenOCD or J-Link GDB server), while
``pyocd`` starts ``pyocd gdbserver`` for the attached probe, flashes through it with
``vFlash*`` on the regions pyOCD reports, and stops it again.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import tempfile
import time
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


@register_flasher("pyocd")
class PyocdFlasher:
    """Program a board through its debug probe with ``pyocd gdbserver`` + the RSP client."""

    name = "pyocd"
    caps = FlasherCaps(erase=True, verify=True, reset=True, flash_addr=True)

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
            raise PreflightError("pyOCD is not installed", "pip install pyocd") from exc
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

    def _command(self, gdb_port: int, telnet_port: int) -> list[str]:
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
            str(telnet_port),
        ]
        if self.probe_uid:
            command += ["--uid", self.probe_uid]
        if self.frequency:
            command += ["--frequency", self.frequency]
        return command

    def flash(self, request: FlashRequest) -> FlashReport:
        check_request(self, request)
        self.preflight()
        image = load_image(request.image, request.load_address)
        gdb_port, telnet_port = _free_port(), _free_port()
        log_dir = self.log_dir or Path(tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"pyocd-gdbserver-{gdb_port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                self._command(gdb_port, telnet_port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            client = self._connect(process, gdb_port, request.timeout_s, log_path)
            with client:
                # "reset halt" puts the core in a known state; after programming,
                # ResetMode.MONITOR resets again so the program starts as from power-on.
                return program(
                    client,
                    image,
                    verify=request.verify,
                    erase=request.erase,
                    reset=request.reset,
                    halt_command="reset halt",
                    reset_command="reset halt",
                )
        except FlashError as exc:
            exc.log_path = exc.log_path or log_path
            raise
        finally:
            _stop(process)

    @staticmethod
    def _connect(
        process: subprocess.Popen[bytes], port: int, timeout_s: float, log_path: Path
    ) -> GdbRemoteClient:
        # Retry refused connections only: a refused connect does not count as a session.
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-1500:].strip()
                raise FlashError(
                    f"pyocd gdbserver exited with status {process.returncode}: {tail}",
                    _PYOCD_HINT,
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """pyOCD exits by itself after the detach; make sure, and reap it."""
    try:
        process.wait(5)
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


__all__ = ["GdbRemoteFlasher", "PyocdFlasher", "ResetMode"]
