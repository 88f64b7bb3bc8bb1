"""Emulated Cortex-M boards: the MCU flow of the deploy guide, without a board.

An emulated board behaves like a real one: the firmware is cross-compiled with the export's
Makefile, flashed over the GDB remote protocol into a halted QEMU (the same protocol pyOCD,
OpenOCD and J-Link GDB servers speak), its UART is read with pyserial over a TCP socket, and
it ends with the end keyword or a semihosting exit. QEMU has no cycle counter: under a fixed
``-icount`` shift the firmware's "cycles" are SysTick ticks of virtual time, converted here
to **emulated instruction counts** (CPI = 1 model) and labelled emulated everywhere.
"""

from __future__ import annotations

from typing import ClassVar

import aidge_qemu_boards
from aidge_deploy.boards.baremetal.base import BareMetalTarget, which_check
from aidge_deploy.boards.baremetal.qemu.pmu import QemuEmulatedCounters
from aidge_deploy.connections.qemu import QemuMachine
from aidge_deploy.connections.serial_capture import CaptureResult, SerialChannel
from aidge_deploy.flash.gdb_remote import GdbRemoteClient
from aidge_deploy.flash.image import load_elf
from aidge_deploy.flash.program import FlashReport, ResetMode, program
from aidge_deploy.registry import FlashableTarget, ToolCheck, register_deploy_target
from aidge_deploy.results import BuildResult, DeployContext, Provenance
from aidge_qemu_boards.boards import QemuBoard, get_board, list_boards, ticks_to_instructions

__all__ = ["QemuBoardTarget", "aidge_qemu_boards"]


class QemuBoardTarget(BareMetalTarget, FlashableTarget, QemuEmulatedCounters):
    """Build with the board's BSP, flash into QEMU over RSP, capture its UART."""

    board_name: ClassVar[str]
    emulated: ClassVar[bool] = True
    default_flash_method: ClassVar[str | None] = "gdb-remote"
    timing_provenance: ClassVar[Provenance] = Provenance.EMULATED
    cycle_metric: ClassVar[tuple[str, str]] = ("emulated_instructions", "instructions")

    def __init__(self, config=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config)
        self._qemu: QemuMachine | None = None
        self._gdb: GdbRemoteClient | None = None
        self.flash_report: FlashReport | None = None

    @property
    def board(self) -> QemuBoard:
        return get_board(self.board_name)

    def convert_cycles(self, value: float) -> float:
        return ticks_to_instructions(self.board, value)

    def preflight(self) -> list[ToolCheck]:
        return [*super().preflight(), which_check("qemu-system-arm", "qemu-system-arm")]

    def flash(self, ctx: DeployContext, build: BuildResult) -> None:
        """Start the board halted, open its UART, write + verify the ELF, set SP/PC/xPSR."""
        board = self.board
        qemu = QemuMachine(board.qemu_machine, ctx.log_dir, icount_shift=board.icount_shift)
        self._qemu = qemu.start()
        # with wait=on QEMU holds the guest until the serial client is connected: nothing is lost
        self._channel = SerialChannel(qemu.serial, ctx.log_dir / "uart.log")
        self._gdb = qemu.connect_gdb()
        self.flash_report = program(
            self._gdb,
            load_elf(build.artifact_path),
            verify=True,
            reset=ResetMode.VECTOR,
            detach=False,
        )

    def start(self, ctx: DeployContext) -> None:
        if self._gdb is not None:
            self._gdb.detach()  # resumes the core at the reset vector
            self._gdb.close()
            self._gdb = None

    def finish(self, ctx: DeployContext, result: CaptureResult) -> None:
        if self._qemu is not None and self._channel is not None and self._channel.at_eof:
            self._qemu.wait(2.0)

    def exit_status(self) -> int | None:
        if self._qemu is None or self._qemu.stopped_by_host:
            return None
        return self._qemu.exit_status

    def cleanup(self, ctx: DeployContext) -> None:
        if self._gdb is not None:
            self._gdb.close()
            self._gdb = None
        super().cleanup(ctx)
        if self._qemu is not None:
            self._qemu.stop()
            self._qemu = None


def _register(board: QemuBoard) -> type[QemuBoardTarget]:
    cls = type(
        f"Qemu_{board.name.replace('-', '_')}_Target",
        (QemuBoardTarget,),
        {
            "board_name": board.name,
            "description": f"QEMU, RSP flash, icount {board.icount_shift}",
            "__module__": __name__,
            "__doc__": f"Emulated {board.name} ({board.cpu}).",
        },
    )
    return register_deploy_target(board.name, "local")(cls)


TARGETS = {board.name: _register(board) for board in list_boards()}
