"""A one-call run of a firmware on a QEMU board, for the tests of the QEMU machine.

``run_firmware`` starts QEMU halted, flashes the ELF over RSP, runs it and captures its
UART, returning everything the tests check in one ``QemuRun``. The deploy targets drive the
same ``FirmwareSession`` stage by stage (``boards/baremetal/qemu``); this helper lives here
because only the tests run a firmware in one call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.connections.qemu import FirmwareSession, qemu_version
from aidge_deploy.connections.serial_capture import CaptureOutcome
from aidge_deploy.flash.image import load_elf
from aidge_deploy.flash.program import FlashReport
from aidge_deploy.protocols.base import Channel


@dataclass(frozen=True)
class QemuRun:
    """The result of ``run_firmware``."""

    machine: str
    outcome: CaptureOutcome
    text: str
    raw: bytes
    matched_marker: str | None
    reason: str
    #: QEMU's own exit status when it exited by itself (semihosting 0 ok / 1 error), else None
    exit_status: int | None
    stopped_by_host: bool
    flash: FlashReport
    #: what the interactive driver returned (None for plain runs)
    session_result: str | None
    uart_log: Path
    qemu_log: Path | None
    guest_log: Path | None
    qemu_version: str
    icount_shift: int | None
    startup_s: float
    flash_s: float
    run_s: float
    duration_s: float


def run_firmware(
    machine: str,
    elf: Path,
    *,
    end_markers: Sequence[str] | str,
    timeout_s: float,
    log_path: Path,
    icount_shift: int | None = None,
    interactive: Callable[[Channel], str] | None = None,
    qemu_binary: str | Path = "qemu-system-arm",
    extra_args: Sequence[str] = (),
    log_dir: Path | None = None,
    inactivity_timeout_s: float | None = None,
    verify: bool = True,
    flash_timeout_s: float = 10.0,
    exit_wait_s: float = 2.0,
    linger_s: float = 0.5,
    on_line: Callable[[str], None] | None = None,
) -> QemuRun:
    """Start QEMU halted, flash ``elf`` over RSP (verified), run it and capture its UART.

    Capture stops on an end marker, the semihosting exit (end of stream) or ``timeout_s``
    after the core starts; with ``interactive`` the driver talks over the channel first and
    the capture then continues to the end marker. QEMU is stopped in every case; the UART
    log is at ``log_path`` even when an exception escapes. A ``TIMEOUT`` outcome is returned,
    not raised: the caller turns it into ``CaptureError`` with the log path.
    """
    started = time.monotonic()
    version = qemu_version(qemu_binary)  # preflight first: a missing QEMU is the first thing to say
    image = load_elf(Path(elf))
    with FirmwareSession(
        machine,
        Path(log_dir) if log_dir is not None else Path(log_path).parent,
        Path(log_path),
        qemu_binary=qemu_binary,
        icount_shift=icount_shift,
        extra_args=extra_args,
        on_line=on_line,
    ) as session:
        booted = time.monotonic()
        report = session.flash(image, verify=verify, timeout_s=flash_timeout_s)
        session.resume()
        running = time.monotonic()
        channel = session.channel
        session_result = interactive(channel) if interactive is not None else None
        remaining = max(running + timeout_s - time.monotonic(), 1.0)
        result = channel.capture(
            end_markers=end_markers,
            timeout_s=remaining,
            inactivity_timeout_s=inactivity_timeout_s,
            linger_s=linger_s,
        )
        finished = time.monotonic()
        session.settle(exit_wait_s)
        session.close()
        qemu = session.machine
        return QemuRun(
            machine=machine,
            outcome=result.outcome,
            text=result.text,
            raw=result.raw,
            matched_marker=result.matched_marker,
            reason=result.reason,
            exit_status=qemu.exit_status,
            stopped_by_host=qemu.stopped_by_host,
            flash=report,
            session_result=session_result,
            uart_log=result.log_path,
            qemu_log=qemu.stderr_path,
            guest_log=qemu.guest_log_path,
            qemu_version=version,
            icount_shift=icount_shift,
            startup_s=booted - started,
            flash_s=running - booted,
            run_s=finished - running,
            duration_s=time.monotonic() - started,
        )
