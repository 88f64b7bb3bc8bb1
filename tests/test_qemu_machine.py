"""QemuMachine lifecycle and run_firmware against real QEMU with the test firmware.

Every test checks that no QEMU process it started is left behind (looked up by the test's
own temporary directory, which appears in QEMU's command line).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from aidge_deploy.connections.qemu import (
    QEMU_INSTALL_HINT,
    FirmwareSession,
    QemuMachine,
    find_qemu,
    qemu_version,
)
from aidge_deploy.connections.serial_capture import CaptureOutcome
from aidge_deploy.errors import ConfigError, ExecutionError, FlashError, PreflightError
from aidge_deploy.flash.image import load_elf
from aidge_deploy.protocols.base import Channel
from qemu_run import QemuRun, run_firmware
from testfw import Variant, fw, needs_qemu, procs

BOARDS = ("mps2-an386", "netduinoplus2")


# -- preflight (no QEMU process involved) -----------------------------------------------------


def test_find_qemu_missing_binary_path_is_a_preflight_error(tmp_path: Path) -> None:
    with pytest.raises(PreflightError) as info:
        find_qemu(tmp_path / "no-such-qemu-system-arm")
    assert "does not exist" in info.value.message
    assert info.value.hint == QEMU_INSTALL_HINT
    assert "apt-get install" in str(info.value)


def test_find_qemu_missing_on_path_is_a_preflight_error() -> None:
    with pytest.raises(PreflightError, match="not installed"):
        find_qemu("qemu-system-arm-does-not-exist")


def test_run_firmware_with_missing_qemu_raises_preflight_error(tmp_path: Path) -> None:
    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"")  # never read: the preflight fails first
    with pytest.raises(PreflightError) as info:
        run_firmware(
            "mps2-an386",
            elf,
            end_markers="END DEMO",
            timeout_s=5,
            log_path=tmp_path / "uart.log",
            qemu_binary=tmp_path / "missing" / "qemu-system-arm",
        )
    assert "apt-get install" in (info.value.hint or "")
    with pytest.raises(PreflightError):
        QemuMachine("mps2-an386", tmp_path, qemu_binary=tmp_path / "missing" / "qemu").start()


def test_icount_shift_out_of_range_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="icount shift"):
        QemuMachine("mps2-an386", tmp_path, icount_shift=42)


@needs_qemu
def test_qemu_version_reports_the_installed_version() -> None:
    version = qemu_version()
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", version)
    assert int(version.split(".")[0]) >= 7


# -- machine lifecycle --------------------------------------------------------------------------


@needs_qemu
@pytest.mark.qemu
def test_machine_starts_halted_and_stops_on_exit(run_dir: Path) -> None:
    with QemuMachine("mps2-an386", run_dir, icount_shift=3) as qemu:
        pid = qemu.pid
        assert pid is not None
        assert qemu.gdb_port != qemu.serial_port_number
        assert "-S" in qemu.command and "shift=3,align=off,sleep=off" in qemu.command
        assert procs.qemu_pids_mentioning(str(run_dir)) == [pid]
        assert qemu.poll() is None
        # halted: nothing arrives on the UART before the firmware is loaded
        assert qemu.serial.read(1) == b""
    assert procs.process_gone(pid)
    assert qemu.stopped_by_host
    assert qemu.exit_status is None
    assert qemu.stderr_path is not None and qemu.stderr_path.exists()


@needs_qemu
@pytest.mark.qemu
def test_qemu_runs_without_huge_pages_and_dies_with_a_sigkilled_host(run_dir: Path) -> None:
    """No cleanup runs in a SIGKILLed host: QEMU's parent-death signal (child_exec) ends it."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from aidge_deploy.connections.qemu import QemuMachine\n"
        "machine = QemuMachine('mps2-an386', Path(sys.argv[1])).start()\n"
        "print(machine.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    host = subprocess.Popen(
        [sys.executable, "-c", script, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        pid = int(host.stdout.readline())
        assert procs.qemu_pids_mentioning(str(run_dir)) == [pid]  # child_exec became QEMU
        status = Path(f"/proc/{pid}/status").read_text()
        assert re.search(r"^THP_enabled:\s+0$", status, re.M), status
    finally:
        host.kill()
        host.wait(10)
    deadline = time.monotonic() + 10
    while procs.qemu_pids_mentioning(str(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procs.qemu_pids_mentioning(str(run_dir)) == []


@needs_qemu
@pytest.mark.qemu
def test_machine_is_stopped_on_keyboard_interrupt(run_dir: Path) -> None:
    with pytest.raises(KeyboardInterrupt), QemuMachine("mps2-an386", run_dir) as qemu:
        pid = qemu.pid
        raise KeyboardInterrupt
    assert pid is not None and procs.process_gone(pid)


@needs_qemu
@pytest.mark.qemu
def test_unknown_machine_is_an_execution_error_with_qemus_message(run_dir: Path) -> None:
    with pytest.raises(ExecutionError) as info:
        QemuMachine("no-such-board", run_dir).start()
    assert "unsupported machine type" in info.value.message
    assert info.value.log_path is not None and info.value.log_path.exists()


# -- run_firmware ---------------------------------------------------------------------------------


@needs_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", BOARDS)
def test_run_firmware_flashes_runs_and_captures_to_end(
    board: str, firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    log = run_dir / "uart.log"
    run = run_firmware(
        board,
        firmware(board, Variant.DEMO),
        end_markers="BENCHMARK_DONE|END DEMO",
        timeout_s=20,
        log_path=log,
        icount_shift=3,
    )
    assert run.outcome is CaptureOutcome.END
    assert run.matched_marker == "END DEMO"
    lines = run.text.splitlines()
    assert lines[0] == "BOOT aidge-deploy test firmware"
    assert "DATA counter=7" in lines  # .data was copied from its load address
    # every byte of the 12 KiB blob arrived: the firmware's checksum matches Python's
    assert f"CHECKSUM 0x{fw.expected_checksum():08x}" in lines
    assert [f"LINE {i}" for i in range(20)] == [line for line in lines if line.startswith("LINE")]
    assert run.flash.verified and run.flash.bytes_written > 12 * 1024
    assert run.exit_status == 0 and not run.stopped_by_host  # semihosting exit 0
    assert log.read_bytes() == run.raw
    assert b"END DEMO" in run.raw
    assert run.qemu_version == qemu_version()
    assert run.qemu_log is not None and run.qemu_log.exists()
    assert run.guest_log is not None


@needs_qemu
@pytest.mark.qemu
def test_run_firmware_hang_times_out_stops_qemu_and_keeps_the_log(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    log = run_dir / "uart.log"
    started = time.monotonic()
    run = run_firmware(
        "mps2-an386",
        firmware("mps2-an386", Variant.HANG),
        end_markers="END DEMO",
        timeout_s=1.0,
        log_path=log,
    )
    assert run.outcome is CaptureOutcome.TIMEOUT
    assert "deadline" in run.reason
    assert run.stopped_by_host and run.exit_status is None
    assert time.monotonic() - started < 10
    assert b"HANGING" in log.read_bytes()
    assert log.read_bytes() == run.raw


@needs_qemu
@pytest.mark.qemu
def test_run_firmware_inactivity_timeout(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    run = run_firmware(
        "netduinoplus2",
        firmware("netduinoplus2", Variant.HANG),
        end_markers="END DEMO",
        timeout_s=30.0,
        inactivity_timeout_s=0.5,
        log_path=run_dir / "uart.log",
    )
    assert run.outcome is CaptureOutcome.TIMEOUT
    assert "no output for 0.5 s" in run.reason
    assert run.run_s < 10


@needs_qemu
@pytest.mark.qemu
def test_run_firmware_semihosting_failure_exits_with_status_1(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    run = run_firmware(
        "mps2-an386",
        firmware("mps2-an386", Variant.FAIL),
        end_markers="END DEMO",
        timeout_s=20,
        log_path=run_dir / "uart.log",
    )
    assert run.outcome is CaptureOutcome.EXITED
    assert run.exit_status == 1 and not run.stopped_by_host
    assert run.text.splitlines()[-1] == "FAILING"


@needs_qemu
@pytest.mark.qemu
def test_run_firmware_outside_flash_raises_flash_error_and_stops_qemu(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    with pytest.raises(FlashError) as info:
        run_firmware(
            "mps2-an386",
            firmware("mps2-an386", Variant.OUTSIDE_FLASH),
            end_markers="END DEMO",
            timeout_s=20,
            log_path=run_dir / "uart.log",
        )
    assert "0x30000000" in info.value.message
    assert info.value.hint is not None and "0x30000000" in info.value.hint
    assert (run_dir / "uart.log").exists()


@needs_qemu
@pytest.mark.qemu
def test_run_firmware_interactive_echo(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    def session(channel: Channel) -> str:
        while (line := channel.read_line(10.0)) != "READY":
            assert line is not None
        answers = []
        for word in ("hello", "aidge deploy", "42"):
            channel.write(word.encode() + b"\r\n")
            answer = channel.read_line(10.0)
            assert answer is not None
            answers.append(answer)
        channel.write(b"quit\n")
        return "|".join(answers)

    log = run_dir / "uart.log"
    run = run_firmware(
        "netduinoplus2",
        firmware("netduinoplus2", Variant.ECHO),
        end_markers="END DEMO",
        timeout_s=20,
        log_path=log,
        interactive=session,
    )
    assert run.session_result == "ECHO hello|ECHO aidge deploy|ECHO 42"
    assert run.outcome is CaptureOutcome.END and run.exit_status == 0
    assert b"ECHO aidge deploy\r\n" in log.read_bytes()


@needs_qemu
@pytest.mark.qemu
def test_two_machines_run_in_parallel(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    elves = {board: firmware(board, Variant.DEMO) for board in BOARDS}
    barrier = threading.Barrier(len(BOARDS))

    def run(board: str) -> QemuRun:
        barrier.wait(10)
        return run_firmware(
            board,
            elves[board],
            end_markers="END DEMO",
            timeout_s=20,
            log_path=run_dir / board / "uart.log",
        )

    with ThreadPoolExecutor(len(BOARDS)) as pool:
        runs = list(pool.map(run, BOARDS))
    assert [r.outcome for r in runs] == [CaptureOutcome.END] * len(BOARDS)
    logs = {board: (run_dir / board / "uart.log").read_bytes() for board in BOARDS}
    assert all(b"END DEMO" in data for data in logs.values())


@needs_qemu
@pytest.mark.qemu
def test_ctrl_c_during_capture_stops_qemu_and_keeps_the_log(
    firmware: Callable[[str, object], Path], run_dir: Path, ctrl_c: None
) -> None:
    log = run_dir / "uart.log"
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_firmware(
                "mps2-an386",
                firmware("mps2-an386", Variant.HANG),
                end_markers="END DEMO",
                timeout_s=30,
                log_path=log,
            )
    finally:
        timer.cancel()
    assert b"HANGING" in log.read_bytes()


@needs_qemu
@pytest.mark.qemu
def test_semihosting_exit_is_announced_before_qemu_exits(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    """The debugger stays attached while the firmware runs: QEMU's stub announces its
    semihosting exit status before QEMU's own exit (whose teardown nobody waits for), and
    the bytes the firmware wrote before exiting are all there to be read without waiting:
    the same bytes a run that waits for QEMU to close the UART receives."""
    reference = _reference_run(firmware("mps2-an386", Variant.DEMO), run_dir)
    assert reference.outcome is CaptureOutcome.END and reference.exit_status == 0
    image = load_elf(firmware("mps2-an386", Variant.DEMO))
    session = FirmwareSession("mps2-an386", run_dir, run_dir / "uart.log", icount_shift=3)
    with session:
        session.flash(image)
        session.resume()
        result = session.channel.capture(end_markers="END DEMO", timeout_s=20)
        assert result.outcome is CaptureOutcome.END
        assert session.await_exit(10.0) == 0 and session.exit_status == 0
        complete = session.channel.drain(result)
        assert complete.raw == reference.raw
        assert complete.text.endswith(reference.text.splitlines()[-1])
    assert (run_dir / "uart.log").read_bytes() == reference.raw

    for variant, marker, status in ((Variant.FAIL, "FAILING", 1), (Variant.HANG, "HANGING", None)):
        session = FirmwareSession("mps2-an386", run_dir, run_dir / f"{variant}.log")
        with session:
            session.flash(load_elf(firmware("mps2-an386", variant)))
            session.resume()
            assert session.channel.capture(end_markers=marker, timeout_s=20).outcome is (
                CaptureOutcome.END
            )
            started = time.monotonic()
            assert session.await_exit(0.3) == status and session.exit_status == status
            if status is None:  # still running: the wait lasted its linger, no more
                assert 0.3 <= time.monotonic() - started < 5
    assert procs.qemu_pids_mentioning(str(run_dir)) == [], "a QEMU outlived its session"


@needs_qemu
@pytest.mark.qemu
def test_a_preloaded_firmware_is_started_not_written_and_a_changed_one_is_refused(
    firmware: Callable[[str, object], Path], run_dir: Path
) -> None:
    """QEMU loads a firmware known before it starts itself (``-kernel``, as a bare run
    does): flash() only points the core at its reset vector, and the run is the same as
    one flashed over RSP; a file rebuilt after QEMU loaded it is a FlashError."""
    elf = run_dir / "fw.elf"
    shutil.copyfile(firmware("mps2-an386", Variant.DEMO), elf)
    image = load_elf(elf)
    reference = _reference_run(elf, run_dir)
    session = FirmwareSession(
        "mps2-an386", run_dir, run_dir / "uart.log", icount_shift=3, preload=elf
    )
    with session:
        command = session.machine.command
        assert command[command.index("-kernel") + 1] == str(elf)
        report = session.flash(image)
        assert report.preloaded and report.bytes_written == 0 and not report.verified
        assert (report.initial_sp, report.entry) == image.initial_sp_and_entry()
        session.resume()
        result = session.channel.capture(end_markers="END DEMO", timeout_s=20)
        assert result.outcome is CaptureOutcome.END
        assert session.await_exit(10.0) == 0
        assert session.channel.drain(result).raw == reference.raw

    session = FirmwareSession("mps2-an386", run_dir, run_dir / "changed.log", preload=elf)
    with session:
        elf.write_bytes(elf.read_bytes())  # rebuilt: another file with the same name
        with pytest.raises(FlashError, match="changed since QEMU loaded it"):
            session.flash(image)


def _reference_run(elf: Path, run_dir: Path) -> QemuRun:
    """The demo firmware run the plain way (flashed over RSP, QEMU's exit waited for): what
    a faster path must reproduce byte for byte."""
    return run_firmware(
        "mps2-an386",
        elf,
        end_markers="END DEMO",
        timeout_s=20,
        log_path=run_dir / "reference.log",
        icount_shift=3,
    )
