"""Emulated Cortex-M boards: the MCU flow of the deploy guide, without a board.

An emulated board behaves like a real one: the firmware is cross-compiled with the export's
Makefile, flashed over the GDB remote protocol into a halted QEMU (the same protocol pyOCD,
OpenOCD and J-Link GDB servers speak), its UART is read with pyserial over a TCP socket, and
it ends with the end keyword or a semihosting exit. QEMU has no cycle counter: under a fixed
``-icount`` shift the firmware's "cycles" are SysTick ticks of virtual time, converted here
to **emulated instruction counts** (CPI = 1 model) and labelled emulated everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import ClassVar

import aidge_qemu_boards
from aidge_deploy.boards.baremetal.base import BareMetalTarget, which_check
from aidge_deploy.boards.baremetal.qemu.pmu import (
    PmuSymbols,
    emulated_counter_availability,
    pass_result_from_trace,
)
from aidge_deploy.boards.baremetal.qemu.power import QemuPowerVariant
from aidge_deploy.connections.qemu import FirmwareSession
from aidge_deploy.connections.serial_capture import CaptureResult
from aidge_deploy.flash.image import load_elf
from aidge_deploy.flash.program import FlashReport
from aidge_deploy.profiling.capability import CounterCapableTarget
from aidge_deploy.profiling.counters import CounterDomain
from aidge_deploy.profiling.passes import CounterPass, PassResult
from aidge_deploy.profiling.qemu_plugin import plugin_option, plugin_path, read_trace
from aidge_deploy.registry import FlashableTarget, ToolCheck, register_deploy_target
from aidge_deploy.results import BuildResult, DeployContext, Provenance
from aidge_qemu_boards.boards import QemuBoard, get_board, list_boards, ticks_to_instructions

__all__ = ["QemuBoardTarget", "aidge_qemu_boards"]


class QemuBoardTarget(BareMetalTarget, FlashableTarget, CounterCapableTarget, QemuPowerVariant):
    """Build with the board's BSP, flash into QEMU over RSP, capture its UART."""

    board_name: ClassVar[str]
    emulated: ClassVar[bool] = True
    default_flash_method: ClassVar[str | None] = "gdb-remote"
    timing_provenance: ClassVar[Provenance] = Provenance.EMULATED
    cycle_metric: ClassVar[tuple[str, str]] = ("emulated_instructions", "instructions")
    counter_domain: ClassVar[CounterDomain] = CounterDomain.EMULATED
    #: the plugin counts every emulated event in one run
    max_counters_per_pass: ClassVar[int] = 4

    def __init__(self, config=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config)
        self._session: FirmwareSession | None = None
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
        self._boot(ctx, build)

    def _boot(self, ctx: DeployContext, build: BuildResult, extra_args: Sequence[str] = ()) -> None:
        self._release()  # one run of the board at a time
        board = self.board
        session = FirmwareSession(
            board.qemu_machine,
            ctx.log_dir,
            ctx.log_dir / "uart.log",
            icount_shift=board.icount_shift,
            extra_args=extra_args,
        )
        self._session = session
        # with wait=on QEMU holds the guest until the serial client is connected: nothing is lost
        self._channel = session.start().channel
        self.flash_report = session.flash(load_elf(build.artifact_path))

    def start(self, ctx: DeployContext) -> None:
        if self._session is not None:
            self._session.resume()  # the core runs from the reset vector

    def finish(self, ctx: DeployContext, result: CaptureResult) -> None:
        if self._session is not None:
            self._session.settle()

    def exit_status(self) -> int | None:
        return self._session.exit_status if self._session is not None else None

    def cleanup(self, ctx: DeployContext) -> None:
        self._release()
        super().cleanup(ctx)

    def _release(self) -> None:
        """Stop this board's run: its UART, debugger connection and QEMU."""
        self._channel = None  # the session owns it
        if self._session is not None:
            self._session.close()
            self._session = None

    # -- emulated counters (the aidge_pmu QEMU plugin, see pmu.py) ------------------------------

    def available_counters(self) -> Mapping[str, str | None]:
        return emulated_counter_availability()

    def run_counter_pass(
        self, ctx: DeployContext, build: BuildResult, counter_pass: CounterPass
    ) -> PassResult:
        """A complete run with the plugin loaded: the same boot, flash and capture as a deploy."""
        symbols = PmuSymbols.of(build.artifact_path)
        pass_dir = ctx.log_dir / f"counters-{counter_pass.index}-{counter_pass.name}"
        pass_dir.mkdir(parents=True, exist_ok=True)
        trace_path = pass_dir / "pmu.trace"
        pass_ctx = dataclasses.replace(ctx, log_dir=pass_dir)
        self.cleanup(ctx)  # the deploy's own run is over: the board is free for the pass
        try:
            self._boot(
                pass_ctx, build, plugin_option(plugin_path(), symbols.boundaries, trace_path)
            )
            execution = self.execute(pass_ctx, build)
        finally:
            self.cleanup(pass_ctx)
        parsed = self.parse_output(pass_ctx, execution)
        return pass_result_from_trace(
            counter_pass,
            read_trace(trace_path),
            symbols,
            layer_names=list(parsed.layer_cycles or parsed.layer_times_ms or {}),
            warmup=int((ctx.artifact.manifest.application_config or {}).get("nb_warmup", 0)),
            aggregation=self.config.aggregation,
            icount_shift=self.board.icount_shift,
        )


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
