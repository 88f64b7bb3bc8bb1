"""QEMU machine lifecycle for emulated Cortex-M boards.

An emulated board is driven exactly like a real one (reference/emulation.md section 11):
QEMU starts *halted* (``-S``) with a GDB stub and its UART on a TCP socket; the host
connects the serial socket first (``wait=on`` holds the guest until then, so no output is
lost), programs the ELF over the GDB remote protocol with read-back verification (or, for a
firmware known before QEMU starts, lets QEMU load it itself with ``-kernel``), sets
SP/PC/xPSR from the vector table, lets the core run with the debugger still attached (so a
semihosting exit is announced on its link before QEMU exits) and reads the UART until an end
marker, a semihosting exit or a deadline.

Ports are picked at run time on 127.0.0.1, so several boards run in parallel. QEMU is
*always* stopped when the ``QemuMachine`` context ends, whether normally, on an error or on
Ctrl-C (SIGTERM, then SIGKILL after a grace period, then reaped); QEMU is started with a
parent-death signal (``child_guard``), so even a killed host process leaves no emulator
behind.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from serial import SerialBase

from aidge_deploy.connections.child_guard import guarded_launch
from aidge_deploy.connections.local_process import wait_process
from aidge_deploy.connections.serial_capture import (
    SerialChannel,
    close_serial,
    open_serial,
)
from aidge_deploy.cpupriority import share_priority
from aidge_deploy.errors import (
    BoardFault,
    ConfigError,
    ConnectError,
    DeployError,
    ExecutionError,
    FlashError,
    PreflightError,
)
from aidge_deploy.filememo import Signature, signature
from aidge_deploy.flash.gdb_remote import GdbRemoteClient
from aidge_deploy.flash.image import FirmwareImage
from aidge_deploy.flash.program import (
    FlashReport,
    ResetMode,
    WriteMethod,
    WrittenSegment,
    program,
    start_at_vector,
)
from aidge_deploy.pathsearch import which
from aidge_deploy.readiness import ToolCheck, apt_hint
from aidge_deploy.runcontrol import register_group

_log = logging.getLogger(__name__)

#: the system emulator of the Cortex-M boards (``QemuOptions.binary``'s default)
DEFAULT_QEMU = "qemu-system-arm"
QEMU_INSTALL_HINT = "install it: apt-get install -y --no-install-recommends qemu-system-arm"
_LOOPBACK = "127.0.0.1"
_RETRY_INTERVAL_S = 0.01
#: memory packets in flight to QEMU's GDB stub, which handles its input in order: an image's
#: write and read-back take one round trip per 16 packets (64 KB) instead of one per packet
_RSP_PIPELINE = 16
_VERSION_RE = re.compile(r"version\s+(\d+\.\d+(?:\.\d+)?)")


def find_qemu(binary: str | Path = "qemu-system-arm") -> Path:
    """Resolve the QEMU binary (a name on PATH or a path); ``PreflightError`` if missing."""
    text = str(binary)
    if os.sep in text:
        path = Path(text)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise PreflightError(
            f"QEMU binary {path} does not exist or is not executable", QEMU_INSTALL_HINT
        )
    found = which(text)
    if found is None:
        raise PreflightError(f"{text} is not installed (not found on PATH)", QEMU_INSTALL_HINT)
    return Path(found)


def qemu_check(binary: str | Path = "qemu-system-arm") -> ToolCheck:
    """The QEMU ``binary`` (``QemuOptions.binary``) on this machine, for Preflight and
    ``doctor``: its path, else why not and how to get it."""
    try:
        return ToolCheck(str(binary), True, str(find_qemu(binary)))
    except PreflightError as exc:
        if str(binary) == DEFAULT_QEMU:
            return ToolCheck(DEFAULT_QEMU, False, "not found", apt_hint(DEFAULT_QEMU))
        return ToolCheck(
            str(binary), False, exc.message, "Check --qemu-binary (QemuOptions.binary)."
        )


@functools.lru_cache(maxsize=8)
def _version_of(path: str) -> str:
    try:
        completed = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreflightError(f"cannot run {path} --version: {exc}", QEMU_INSTALL_HINT) from exc
    match = _VERSION_RE.search(completed.stdout)
    if completed.returncode != 0 or match is None:
        raise PreflightError(
            f"{path} --version did not report a QEMU version: {completed.stdout.strip()[:200]!r}",
            QEMU_INSTALL_HINT,
        )
    return match.group(1)


def qemu_version(binary: str | Path = "qemu-system-arm") -> str:
    """The QEMU version, e.g. ``"7.2.22"`` (recorded with every emulated result)."""
    return _version_of(str(find_qemu(binary)))


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((_LOOPBACK, 0))
    sock.listen(1)
    sock.set_inheritable(True)
    return sock


class QemuMachine:
    """One halted QEMU machine with a GDB stub and a TCP serial port; stops on exit."""

    def __init__(
        self,
        machine: str,
        log_dir: Path,
        *,
        qemu_binary: str | Path = "qemu-system-arm",
        icount_shift: int | None = None,
        extra_args: Sequence[str] = (),
        semihosting: bool = True,
        guest_errors_log: bool = True,
        start_timeout_s: float = 10.0,
        stop_grace_s: float = 2.0,
        keep_debugger: bool = False,
        kernel: Path | None = None,
    ) -> None:
        if icount_shift is not None and not 0 <= icount_shift <= 10:
            raise ConfigError(
                f"icount shift {icount_shift} is out of range",
                "use 0..10; shift ≈ log2(1e9 / cpu_hz) gives about one tick per instruction",
            )
        self.machine = machine
        self.log_dir = Path(log_dir)
        self.qemu_binary = qemu_binary
        self.icount_shift = icount_shift
        self.extra_args = tuple(extra_args)
        self.semihosting = semihosting
        self.guest_errors_log = guest_errors_log
        self.start_timeout_s = start_timeout_s
        self.stop_grace_s = stop_grace_s
        #: an ELF QEMU loads itself at start (``-kernel``), as a bare run does
        self.kernel = kernel
        self._process: subprocess.Popen[bytes] | None = None
        self._forget_group: Callable[[], None] | None = None
        self._serial: SerialBase | None = None
        self._gdb_port: int | None = None
        self._serial_port: int | None = None
        self._command: tuple[str, ...] = ()
        self._stderr_path: Path | None = None
        self._guest_log_path: Path | None = None
        self._exit_status: int | None = None
        self._stopped_by_host = False
        #: keep the start-up probe's RSP connection for the first ``connect_gdb()``
        self.keep_debugger = keep_debugger
        self._ready_client: GdbRemoteClient | None = None
        #: the stub has answered once: QEMU is up (later connects need no explanation)
        self._stub_answered = False

    # -- properties -----------------------------------------------------------------------

    @property
    def gdb_port(self) -> int:
        if self._gdb_port is None:
            raise ExecutionError("QEMU is not running", "start the machine first")
        return self._gdb_port

    @property
    def serial_port_number(self) -> int:
        if self._serial_port is None:
            raise ExecutionError("QEMU is not running", "start the machine first")
        return self._serial_port

    @property
    def serial_url(self) -> str:
        return f"socket://{_LOOPBACK}:{self.serial_port_number}"

    @property
    def serial(self) -> SerialBase:
        """The connected UART (serial0) of the machine."""
        if self._serial is None:
            raise ExecutionError("QEMU is not running", "start the machine first")
        return self._serial

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def command(self) -> tuple[str, ...]:
        return self._command

    @property
    def stderr_path(self) -> Path | None:
        """QEMU's own stdout+stderr (start-up errors, 'terminating on signal')."""
        return self._stderr_path

    @property
    def guest_log_path(self) -> Path | None:
        """``-d guest_errors,unimp`` output: why a register reads 0, unimplemented devices."""
        return self._guest_log_path

    @property
    def exit_status(self) -> int | None:
        """QEMU's exit status when it exited by itself (semihosting: 0 ok, 1 error)."""
        return self._exit_status

    @property
    def stopped_by_host(self) -> bool:
        """True when we had to terminate QEMU (its exit status then means nothing)."""
        return self._stopped_by_host

    def poll(self) -> int | None:
        """The exit status if QEMU has exited by itself, else ``None``."""
        if self._process is None:
            return self._exit_status
        status = self._process.poll()
        if status is not None and not self._stopped_by_host:
            self._exit_status = status
        return status

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> QemuMachine:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, *, wait_ready: bool = True) -> QemuMachine:
        """Launch QEMU halted and connect its serial port (wait=on ordering).

        With ``wait_ready`` (the default) it returns once QEMU answers on its GDB stub, or
        fails with QEMU's own message. Without, it returns as soon as QEMU is launched (its
        start-up, ~30 ms mostly in the dynamic loader, then overlaps the caller's work) and
        the first ``connect_gdb()`` waits for it instead.
        """
        qemu = find_qemu(self.qemu_binary)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._launch(qemu, wait_ready=wait_ready)
            return self
        except BaseException:
            self.stop()
            raise

    def _build_command(self, qemu: Path, gdb_fd: int, serial_fd: int) -> list[str]:
        # The listening sockets are made by us and handed over by fd: the ports are known
        # before QEMU starts, nothing can take them, and a connect succeeds at once (the
        # kernel queues it until QEMU accepts), so start-up needs no polling.
        command = [
            str(qemu),
            "-M",
            self.machine,
            "-nographic",
            "-monitor",
            "none",
            "-S",
            "-chardev",
            f"socket,id=aidge_gdb,fd={gdb_fd},server=on,wait=off,nodelay=on",
            "-gdb",
            "chardev:aidge_gdb",
            "-chardev",
            f"socket,id=aidge_uart,fd={serial_fd},server=on,wait=on,nodelay=on",
            "-serial",
            "chardev:aidge_uart",
        ]
        if self.semihosting:
            command += ["-semihosting-config", "enable=on,target=native"]
        if self.icount_shift is not None:
            command += ["-icount", f"shift={self.icount_shift},align=off,sleep=off"]
        if self._guest_log_path is not None:
            command += ["-d", "guest_errors,unimp", "-D", str(self._guest_log_path)]
        if self.kernel is not None:
            command += ["-kernel", str(self.kernel)]
        return [*command, *self.extra_args]

    def _launch(self, qemu: Path, *, wait_ready: bool) -> None:
        """Start QEMU once on two loopback sockets we bound ourselves."""
        gdb_sock, serial_sock = _listening_socket(), _listening_socket()
        try:
            gdb_port = int(gdb_sock.getsockname()[1])
            serial_port = int(serial_sock.getsockname()[1])
            self._gdb_port, self._serial_port = gdb_port, serial_port
            stem = f"qemu-{self.machine}-{serial_port}"
            self._stderr_path = self.log_dir / f"{stem}.stderr.log"
            self._guest_log_path = (
                self.log_dir / f"{stem}.guest.log" if self.guest_errors_log else None
            )
            self._command = tuple(
                self._build_command(qemu, gdb_sock.fileno(), serial_sock.fileno())
            )
            # QEMU dies with us even if we are SIGKILLed, and runs without huge pages (a short
            # run would pay the kernel for zeroing 2 MB per region it touches: child_guard)
            launch = guarded_launch(qemu)
            _log.debug("starting %s", " ".join(self._command))
            with self._stderr_path.open("wb") as stderr:
                self._process = subprocess.Popen(
                    launch.argv(self._command),
                    env=launch.env(),
                    stdin=subprocess.DEVNULL,
                    stdout=stderr,
                    stderr=subprocess.STDOUT,
                    pass_fds=(gdb_sock.fileno(), serial_sock.fileno()),
                    start_new_session=True,  # Ctrl-C reaches us, and we stop QEMU in order
                )
            share_priority(self._process.pid)
            # a cancellation of the run (another thread, a signal) stops QEMU too
            self._forget_group = register_group(self._process.pid)
        finally:
            # QEMU holds its own copies of the listening sockets now.
            gdb_sock.close()
            serial_sock.close()
        try:
            self._serial = open_serial(
                f"socket://{_LOOPBACK}:{serial_port}", timeout_s=self.start_timeout_s
            )
        except ConnectError:
            status = self._process.poll()
            output = self._stderr_tail()
            raise BoardFault(
                f"QEMU did not accept its serial connection (status {status}): {output or '(no output)'}",
                f"check the machine name ({self.machine!r}; list: qemu-system-arm -M help) "
                "and the extra arguments",
                log_path=self._stderr_path,
            ) from None
        if wait_ready:
            # The stub takes one client at a time: the probe's connection is closed again
            # (QEMU stays halted), unless the caller flashes through connect_gdb() itself
            # (``keep_debugger``): then it is that connection, and a handshake is saved.
            client = self._stub_client(self.start_timeout_s)
            if self.keep_debugger:
                self._ready_client = client
            else:
                client.close()

    def _stub_client(self, timeout_s: float, *, describe: bool = True) -> GdbRemoteClient:
        """The first RSP connection to a just-launched QEMU, handshake done (``describe``:
        see ``GdbRemoteClient.connect``).

        The handshake is answered only once QEMU is fully up and halted, so it is where a
        bad machine name or argument shows: it fails with QEMU's own message. The connect
        itself succeeds at once (we made the listening socket).
        """
        client = GdbRemoteClient(timeout=timeout_s, pipeline=_RSP_PIPELINE)
        try:
            client.connect(_LOOPBACK, self.gdb_port, describe=describe)
        except DeployError:
            if self._process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(1.0)
            raise BoardFault(
                f"QEMU did not start (status {self.poll()}): "
                f"{self._stderr_tail() or '(no output)'}",
                f"check the machine name ({self.machine!r}; list: qemu-system-arm -M help) "
                "and the extra arguments",
                log_path=self._stderr_path,
            ) from None
        self._stub_answered = True
        return client

    def connect_gdb(self, timeout_s: float = 10.0, *, describe: bool = True) -> GdbRemoteClient:
        """A connected RSP client for this machine's GDB stub (retried until it listens);
        after ``start(wait_ready=False)`` the first one waits for QEMU to be up. Without
        ``describe`` the handshake reads no target description (``GdbRemoteClient.connect``)."""
        ready, self._ready_client = self._ready_client, None
        if ready is not None:
            ready.timeout = timeout_s
            return ready
        if not self._stub_answered:
            return self._stub_client(timeout_s, describe=describe)
        deadline = time.monotonic() + timeout_s
        while True:
            client = GdbRemoteClient(timeout=timeout_s, pipeline=_RSP_PIPELINE)
            try:
                client.connect(_LOOPBACK, self.gdb_port, describe=describe)
                return client
            except ConnectError:
                if self.poll() is not None:
                    raise BoardFault(
                        f"QEMU exited before its GDB stub answered: {self._stderr_tail()}",
                        "see the QEMU log",
                        log_path=self._stderr_path,
                    ) from None
                if time.monotonic() >= deadline:
                    raise
                time.sleep(_RETRY_INTERVAL_S)

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for QEMU to exit by itself; its status or ``None``."""
        if self._process is None:
            return self._exit_status
        if wait_process(self._process, timeout_s) is None:
            return None
        return self.poll()

    def stop(self) -> int | None:
        """Stop QEMU (SIGTERM, SIGKILL after the grace period) and reap it. Idempotent."""
        process, self._process = self._process, None
        serial_port, self._serial = self._serial, None
        ready, self._ready_client = self._ready_client, None
        if ready is not None:
            ready.close()
        forget, self._forget_group = self._forget_group, None
        try:
            if process is not None:
                status = process.poll()
                if status is None:
                    self._stopped_by_host = True
                    self._terminate(process)
                else:
                    self._exit_status = status
        finally:
            if serial_port is not None:
                close_serial(serial_port)
            if forget is not None:
                forget()
        return self._exit_status

    def _terminate(self, process: subprocess.Popen[bytes]) -> None:
        try:
            process.terminate()
            if wait_process(process, self.stop_grace_s) is None:
                _log.warning("QEMU (pid %d) ignored SIGTERM; killing it", process.pid)
                process.kill()
                process.wait(10)
        except BaseException:
            # Interrupted while waiting (Ctrl-C): never leave the emulator behind.
            process.kill()
            process.wait(10)
            raise

    def _stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr_path is None or not self._stderr_path.exists():
            return ""
        return self._stderr_path.read_text(errors="replace")[-limit:].strip()


# -- a firmware flashed into a machine --------------------------------------------------------


class FirmwareSession:
    """A firmware flashed into a halted QEMU with its UART open: one run of an emulated board.

    ``start()`` launches the machine and opens its UART (``wait=on`` holds the guest until
    then, so nothing is lost); ``flash()`` programs the image over RSP with read-back
    verification and sets SP/PC/xPSR from its vector table, the core still halted;
    ``resume()`` lets it run, the debugger still attached; ``await_exit()`` takes the exit
    status a semihosting exit announces on the debugger's connection (before QEMU's own,
    slower, exit), ``settle()`` waits for QEMU to exit by itself after its output ended;
    either way the exit status is the firmware's own; ``close()`` stops everything
    (idempotent). The QEMU board target, its emulated counter passes and ``run_firmware``
    are all this one sequence. When the firmware is known before QEMU starts (``preload``),
    QEMU loads it itself (``-kernel``, as a bare run does) and ``flash()`` only points the
    core at its reset vector: writing 30 KB over RSP costs QEMU's stub a hex parse byte by
    byte, and reading it back would only check QEMU's ELF loader against the file it read.
    """

    def __init__(
        self,
        machine: str,
        log_dir: Path,
        uart_log: Path,
        *,
        qemu_binary: str | Path = "qemu-system-arm",
        icount_shift: int | None = None,
        extra_args: Sequence[str] = (),
        on_line: Callable[[str], None] | None = None,
        preload: Path | None = None,
    ) -> None:
        self.machine = QemuMachine(
            machine,
            log_dir,
            qemu_binary=qemu_binary,
            icount_shift=icount_shift,
            extra_args=extra_args,
            keep_debugger=True,  # flash() takes the start-up probe's connection
            kernel=preload,
        )
        self.uart_log = Path(uart_log)
        self._on_line = on_line
        self._channel: SerialChannel | None = None
        self._gdb: GdbRemoteClient | None = None
        #: the status a semihosting exit announced (``W<status>`` on the debugger's link)
        self._announced_status: int | None = None
        self._running = False
        #: the preloaded ELF's identity when QEMU was started on it
        self._preload_signature: Signature = None

    @property
    def channel(self) -> SerialChannel:
        """The board's UART (``start()`` opens it)."""
        if self._channel is None:
            raise ExecutionError("The emulated board is not started", "call start() first")
        return self._channel

    def start(self, *, wait_ready: bool = True) -> FirmwareSession:
        """Launch the machine and open its UART; ``wait_ready=False`` returns before QEMU is
        up (``flash()`` then waits for it: see ``QemuMachine.start``)."""
        try:
            kernel = self.machine.kernel
            if kernel is not None:  # before QEMU reads it: a later change is seen at flash()
                self._preload_signature = signature(str(kernel))
            self.machine.start(wait_ready=wait_ready)
            self._channel = SerialChannel(self.machine.serial, self.uart_log, on_line=self._on_line)
        except BaseException:
            self.close()
            raise
        return self

    def flash(
        self, image: FirmwareImage, *, verify: bool = True, timeout_s: float = 10.0
    ) -> FlashReport:
        """Program ``image`` and point the core at its reset vector; the core stays halted.

        The ELF the session was started with (``preload``), which QEMU loaded itself, is not
        written again: the core is only pointed at it. A ``FlashError`` if that file changed
        since QEMU read it (the caller starts a new session then)."""
        if self.machine.kernel is None or Path(image.path) != self.machine.kernel:
            self._gdb = self.machine.connect_gdb(timeout_s)
            return program(self._gdb, image, verify=verify, reset=ResetMode.VECTOR, detach=False)
        started = time.monotonic()
        current = signature(str(self.machine.kernel))
        if current is None or current != self._preload_signature:
            raise FlashError(
                f"{image.path} changed since QEMU loaded it",
                "it was rebuilt during the run; start the board again to load the new one",
            )
        self._gdb = self.machine.connect_gdb(timeout_s, describe=False)
        sp, entry = start_at_vector(self._gdb, image)
        return FlashReport(
            image=image.path,
            segments=tuple(
                WrittenSegment(s.address, len(s.data), WriteMethod.MEMORY) for s in image.segments
            ),
            bytes_written=0,
            verified=False,
            reset=ResetMode.VECTOR,
            initial_sp=sp,
            entry=entry,
            duration_s=time.monotonic() - started,
            preloaded=True,
        )

    def resume(self) -> None:
        """The core runs from the reset vector, the debugger still attached: QEMU's stub
        then announces a semihosting exit (``W<status>``) before QEMU itself exits, whose
        teardown (~3 ms, the kernel freeing its memory) nobody has to wait for."""
        if self._gdb is not None:
            self._gdb.resume()
            self._running = True

    def await_exit(self, wait_s: float) -> int | None:
        """After the end of the output: the firmware's exit status if it exits within
        ``wait_s`` (announced, not waited for), else ``None`` (it keeps running)."""
        if self._announced_status is not None or self._gdb is None or not self._running:
            return self._announced_status
        try:
            reply = self._gdb.wait_stop(wait_s)
        except DeployError:  # the link closed: QEMU went away without announcing it
            return None
        if reply is not None:
            self._running = False
            if reply.startswith("W"):
                with contextlib.suppress(ValueError):
                    self._announced_status = int(reply[1:].split(";")[0], 16)
        return self._announced_status

    def settle(self, wait_s: float = 2.0) -> None:
        """After the output ended with the stream (QEMU exited), let that exit complete, so
        its status is known."""
        if self._channel is not None and self._channel.at_eof:
            self.machine.wait(wait_s)

    @property
    def exit_status(self) -> int | None:
        """The firmware's semihosting exit status, ``None`` if it did not exit by itself."""
        if self._announced_status is not None:
            return self._announced_status
        return None if self.machine.stopped_by_host else self.machine.exit_status

    def close(self) -> None:
        gdb, self._gdb = self._gdb, None
        channel, self._channel = self._channel, None
        try:
            if gdb is not None:
                gdb.close()
            if channel is not None:
                channel.close()
        finally:
            self.machine.stop()

    def __enter__(self) -> FirmwareSession:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "QEMU_INSTALL_HINT",
    "FirmwareSession",
    "QemuMachine",
    "find_qemu",
    "qemu_check",
    "qemu_version",
]
