"""Emulated Cortex-M boards: the MCU flow of the deploy guide, without a board.

An emulated board behaves like a real one: the firmware is cross-compiled with the export's
Makefile, flashed over the GDB remote protocol into a halted QEMU (the same protocol pyOCD,
OpenOCD and J-Link GDB servers speak), its UART is read with pyserial over a TCP socket, and
it ends with the end keyword or a semihosting exit. QEMU has no cycle counter: under a fixed
``-icount`` shift the firmware's "cycles" are SysTick ticks of virtual time, converted here
to **emulated instruction counts** and labelled emulated everywhere. Times are those counts
÷ the board's core clock, labelled "estimated at N MHz, CPI = 1": QEMU's virtual clock is an
emulator setting, never reported as a time.

The board's facts (clock, memories, QEMU machine) are read from its descriptor
(:mod:`aidge_qemu_descriptors`), the one its hardware model is built from: a run never
imports the plug-in :mod:`aidge_qemu_boards` (``aidge_core`` and matplotlib, a second of
start-up) unless something asks for the hardware model itself (a report, ``targets``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from aidge_deploy.backendoptions import QemuOptions
from aidge_deploy.boards.baremetal.base import BareMetalTarget
from aidge_deploy.boards.baremetal.qemu.estimate import (
    TimingPlan,
    TimingRun,
    estimated_run_times,
    plan_timing_run,
    unavailable,
)
from aidge_deploy.boards.baremetal.qemu.power import QemuPowerVariant
from aidge_deploy.config import TimingMode
from aidge_deploy.connections.qemu import FirmwareSession, qemu_check
from aidge_deploy.connections.serial_capture import CaptureOutcome, CaptureResult
from aidge_deploy.errors import ConfigError, CoreError, DeployError, ExecutionError, FlashError
from aidge_deploy.flash.image import load_elf
from aidge_deploy.flash.program import FlashReport
from aidge_deploy.profiling.binary import MemoryCapacity
from aidge_deploy.profiling.timing import EstimatedCycles, code_kind_of, model_for_cpu
from aidge_deploy.readiness import ToolCheck
from aidge_deploy.registry import FlashableTarget, register_deploy_target
from aidge_deploy.results import BuildResult, DeployContext, ExecutionResult, Provenance
from aidge_deploy.targetspec import BackendCaps, TargetKind, TargetSpec
from aidge_deploy.timing import RunTimes, TimingInfo, estimate_label
from aidge_qemu_descriptors import (
    QemuBoard,
    RegionKind,
    SecondCore,
    get_board,
    list_boards,
    ticks_to_instructions,
)

if TYPE_CHECKING:
    from aidge_deploy.protocols.base import ProtocolResult

#: how long a firmware that printed its end marker is given to exit (the base targets'
#: linger after the marker): one that keeps running costs no more than this
_EXIT_WAIT_S = 0.2

__all__ = [
    "Mps2An521Target",
    "QemuBoardTarget",
    "emulated_targets",
]


class QemuBoardTarget(BareMetalTarget, FlashableTarget, QemuPowerVariant):
    """Build with the board's BSP, flash into QEMU over RSP, capture its UART."""

    board_name: ClassVar[str]
    target_kind: ClassVar[TargetKind] = TargetKind.EMULATED_MCU
    #: QEMU, a process of this machine
    reach: ClassVar[BackendCaps] = BackendCaps(runs_here=True, options=(QemuOptions,))
    hardware_model_module: ClassVar[str | None] = "aidge_qemu_boards"
    emulated: ClassVar[bool] = True
    default_flash_method: ClassVar[str | None] = "gdb-remote"
    #: times are instructions ÷ core clock: a model's output (CPI = 1), not a measurement
    timing_provenance: ClassVar[Provenance] = Provenance.ESTIMATED
    #: instruction counts are exact for the emulator: the primary emulated figure
    counter_provenance: ClassVar[Provenance] = Provenance.EMULATED
    cycle_metric: ClassVar[tuple[str, str]] = ("emulated_instructions", "instructions")
    #: the aidge_pmu QEMU plugin (``qemu.counters.QemuPmuCounters``)
    counts_with: ClassVar[str | None] = "emulated-pmu"

    @classmethod
    def spec_attributes(cls, spec: TargetSpec) -> dict[str, Any]:
        """A board record's QEMU machine is its hardware model's descriptor (a lab's name
        for an existing emulated board reuses that board's machine and BSP)."""
        return {"board_name": spec.hardware_name, "description": _described(spec.hardware_name)}

    #: the BSP's counter is a 64-bit SysTick-derived count, converted to instructions: the
    #: 32-bit DWT wrap rule does not apply to it
    cycle_counter_bits: ClassVar[int | None] = None
    #: the boards' own benchmark entry (aidge_qemu_boards.entry) keeps one uint32_t of
    #: ticks per timed iteration, in static RAM
    benchmark_bytes_per_iteration: ClassVar[int] = 4

    def __init__(self, config=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config)
        self._session: FirmwareSession | None = None
        self.flash_report: FlashReport | None = None
        #: the deploy run's timing model (estimate.py): planned with the early launch,
        #: bound to the firmware when it is flashed
        self._timing_plan: TimingPlan | None = None
        self._timing_run: TimingRun | None = None
        self._timing_unavailable: EstimatedCycles | None = None
        #: a QEMU launched by prepare() and not flashed yet: its log folder, its arguments
        #: and the cached firmware it loaded itself (None: not known before the build)
        self._early: tuple[Path, tuple[str, ...], Path | None] | None = None
        #: the timing model prepare() bound to that cached firmware: (the firmware, the run)
        self._early_bound: tuple[Path, TimingRun | EstimatedCycles] | None = None

    @property
    def board(self) -> QemuBoard:
        return get_board(self.board_name)

    def convert_cycles(self, value: float) -> float:
        return ticks_to_instructions(self.board, value)

    @property
    def core_clock_hz(self) -> float:
        """The board's core clock, Hz (its hardware model's ``main_pe.frequency_hz``)."""
        return float(self.board.cpu_hz)

    def memory_capacities(self) -> tuple[MemoryCapacity, ...]:
        """The memories of the board's hardware model, from the descriptor it is built from."""
        return tuple(
            MemoryCapacity(m.name, m.capacity, "flash" if m.kind is RegionKind.ROM else "ram")
            for m in self.board.model_memories
        )

    def run_times(self, parsed: ProtocolResult, app_config: Mapping[str, Any] | None) -> RunTimes:
        """Times are the timing model's estimated cycles ÷ the core clock when the run has
        them (``parsed.estimated``), else emulated instructions ÷ the core clock (CPI = 1).
        Both are estimates, labelled with what they assume."""
        estimated = parsed.estimated
        if estimated is not None and estimated.samples:
            return estimated_run_times(
                estimated, self.core_clock_hz, self.board.ticks_per_instruction
            )
        return self._cpi1_run_times(parsed, app_config)

    def _cpi1_run_times(
        self, parsed: ProtocolResult, app_config: Mapping[str, Any] | None
    ) -> RunTimes:
        """Times are emulated instructions ÷ the board's core clock (CPI = 1), estimated.

        The firmware's own timer runs on QEMU's virtual clock, where one instruction lasts
        ``2**shift`` ns — an emulator setting, not a time. Where the firmware printed its
        (instruction-exact) cycle counter, times come from it; otherwise its tick readings
        are converted to instructions first, and keep the tick's coarser step.
        """
        hz = self.core_clock_hz
        ms_per_instruction = 1e3 / hz
        per_tick = self.board.ticks_per_instruction  # SysTick ticks per instruction
        raw = super().run_times(parsed, app_config)
        label = estimate_label(hz)
        timings: tuple[float, ...] | None = None
        resolution: float | None = None
        sources: list[str] = []
        if parsed.cycles:
            timings = tuple(self.convert_cycles(c) * ms_per_instruction for c in parsed.cycles)
            resolution = ms_per_instruction
            sources.append("latency: emulated instructions per inference ÷ core clock")
        elif raw.timings_ms and raw.info is not None and raw.info.resolution_ms is not None:
            timings = tuple(t / per_tick for t in raw.timings_ms)
            resolution = raw.info.resolution_ms / per_tick
            sources.append(
                "latency: the firmware's tick on QEMU's virtual clock converted to "
                "instructions ÷ core clock"
            )
        layer_times: dict[str, float] | None = None
        layer_resolution: float | None = None
        if parsed.layer_cycles:
            layer_times = {
                name: self.convert_cycles(c) * ms_per_instruction
                for name, c in parsed.layer_cycles.items()
            }
            layer_resolution = ms_per_instruction
            sources.append("layers: emulated instructions per call ÷ core clock")
        elif raw.layer_times_ms and raw.info is not None and raw.info.layer_resolution_ms:
            layer_times = {n: t / per_tick for n, t in raw.layer_times_ms.items()}
            layer_resolution = raw.info.layer_resolution_ms / per_tick
            sources.append("layers: the firmware's tick converted to instructions ÷ core clock")
        info = None
        if timings is not None or layer_times is not None or raw.info is not None:
            info = TimingInfo(
                provenance=self.timing_provenance,
                resolution_ms=resolution,
                layer_resolution_ms=layer_resolution,
                source="; ".join(sources)
                or "the firmware's timer on QEMU's virtual clock, converted to instructions "
                "÷ core clock",
                label=label,
                clock_hz=hz,
                derived_from=self.cycle_metric[0] if parsed.layer_cycles else None,
            )
        return RunTimes(info, timings, layer_times, scale=1.0 / per_tick)

    def preflight(self) -> list[ToolCheck]:
        return [*super().preflight(), qemu_check(self.config.qemu.binary)]

    def prepare(self, ctx: DeployContext) -> None:
        """Launch the board's QEMU now, halted: its start (~30 ms, mostly the dynamic
        loader of a 50-library binary) overlaps the build-cache check and the stages up to
        Flash, instead of following them. When the cache already holds the build, QEMU
        loads that firmware itself (as a bare run does), Flash only points the core at it,
        and the timing model is bound to it now; otherwise the model's snapshot addresses, which
        need the firmware, reach the plugin through a file written at flash time, before
        the core runs."""
        super().prepare(ctx)
        manifest = ctx.artifact.manifest
        self._timing_run = None
        self._timing_plan, self._timing_unavailable = plan_timing_run(
            self.board,
            TimingMode(self.config.timing),
            manifest.application,
            manifest.application_config,
            ctx.log_dir,
        )
        cached = self.cached_build(ctx)
        firmware = cached.artifact_path if cached is not None else None
        args = self._timing_args(firmware)
        self._launch(ctx, args, preload=firmware)
        self._early = (ctx.log_dir, args, firmware)

    def _preloadable(self, firmware: Path | None) -> Path | None:
        """``firmware`` if QEMU may load it itself: every loaded segment lies in the board's
        memory. Otherwise it goes over RSP, where a segment the board has no memory for is
        a FlashError naming its addresses."""
        if firmware is None:
            return None
        try:
            segments = load_elf(firmware).segments
        except DeployError:
            return None  # flashing it says what is wrong
        regions = self.board.memory_regions
        fits = all(any(r.origin <= s.address and s.end <= r.end for r in regions) for s in segments)
        return firmware if fits else None

    def _timing_args(self, firmware: Path | None) -> tuple[str, ...]:
        """The plugin's arguments for a run of ``firmware`` (``None``: not known yet),
        binding the timing model to it; none when the model cannot time it."""
        self._early_bound = None
        if self._timing_plan is None:
            return ()
        if firmware is not None:
            bound = self._timing_plan.bind(firmware)
            self._early_bound = (firmware, bound)
            if not isinstance(bound, TimingRun):
                return ()
        return self._timing_plan.plugin_args

    def flash(self, ctx: DeployContext, build: BuildResult) -> None:
        """Write + verify the ELF into the halted board (or point it at the one QEMU loaded
        itself) and set SP/PC/xPSR; with the core's timing model loaded into QEMU when the
        run is a benchmark."""
        args: tuple[str, ...] = ()
        if self._timing_plan is not None:
            early = self._early_bound
            bound = (
                early[1]
                if early is not None and early[0] == build.artifact_path
                else self._timing_plan.bind(build.artifact_path)
            )
            if isinstance(bound, TimingRun):
                self._timing_run, args = bound, bound.plugin_args
            else:  # the firmware cannot be timed: no plugin (a QEMU without it is started)
                self._timing_unavailable = bound
        self._boot(ctx, build, args)

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        """The protocol's result, with the timing model's estimate of the same run."""
        parsed = super().parse_output(ctx, execution)
        manifest = ctx.artifact.manifest
        app = manifest.application_config
        if self._timing_run is not None:
            code = code_kind_of([str(t.get("dtype", "")) for t in manifest.inputs])
            estimated = self._timing_run.estimate(parsed, app, code)
            return dataclasses.replace(parsed, estimated=estimated)
        if self._timing_unavailable is not None:
            return dataclasses.replace(parsed, estimated=self._timing_unavailable)
        return parsed

    def _boot(self, ctx: DeployContext, build: BuildResult, extra_args: Sequence[str] = ()) -> None:
        """Flash ``build`` into a halted QEMU started with ``extra_args``: the one prepare()
        launched when it matches, else a new one, which loads the firmware itself."""
        early, self._early = self._early, None
        firmware = build.artifact_path
        session = self._session
        if (
            session is None
            or early is None
            or early[:2] != (ctx.log_dir, tuple(extra_args))
            or early[2] not in (None, firmware)
        ):
            session = self._launch(ctx, extra_args, preload=firmware)
        image = load_elf(firmware)
        try:
            self.flash_report = session.flash(image)
        except (ExecutionError, FlashError):
            if session.machine.kernel is None:
                raise
            # QEMU's own loader refused the ELF, or the file changed since QEMU loaded it:
            # program it over RSP into a new QEMU, which says what is wrong with it
            session = self._launch(ctx, extra_args)
            self.flash_report = session.flash(image)

    def _launch(
        self, ctx: DeployContext, extra_args: Sequence[str], *, preload: Path | None = None
    ) -> FirmwareSession:
        """Start the board halted with its UART open (QEMU loading ``preload`` itself when
        it fits the board's memory); its GDB stub is waited for by flash."""
        self._release()  # one run of the board at a time
        board = self.board
        emulator = self.config.qemu
        session = FirmwareSession(
            board.qemu_machine,
            ctx.log_dir,
            ctx.log_dir / "uart.log",
            qemu_binary=emulator.binary,
            icount_shift=board.icount_shift,
            extra_args=(
                *board.qemu_args,
                *self._second_core_args(ctx),
                *extra_args,
                *emulator.extra_args,
            ),
            preload=self._preloadable(preload),
        )
        self._session = session
        # with wait=on QEMU holds the guest until the serial client is connected: nothing is lost
        self._channel = session.start(wait_ready=False).channel
        return session

    def _second_core_args(self, ctx: DeployContext) -> tuple[str, ...]:
        """QEMU options loading a second core's program (none: one core runs)."""
        return ()

    def start(self, ctx: DeployContext) -> None:
        if self._session is not None:
            self._session.resume()  # the core runs from the reset vector

    #: the end of a run is the exit QEMU's stub announces (finish), not the UART's close
    capture_linger_s: ClassVar[float] = 0.0

    def finish(self, ctx: DeployContext, result: CaptureResult) -> CaptureResult:
        """After the end marker, wait (up to ``_EXIT_WAIT_S``) for the semihosting exit the
        debugger's link announces, then take the UART's last bytes, already received: the
        output and the exit status are complete while QEMU is still tearing itself down.
        After an end of stream (QEMU exited), let that exit complete instead."""
        session = self._session
        if session is None or self._channel is None:
            return result
        if result.outcome is CaptureOutcome.END:
            session.await_exit(_EXIT_WAIT_S)
            return self._channel.drain(result)
        session.settle()
        return result

    def exit_status(self) -> int | None:
        return self._session.exit_status if self._session is not None else None

    def cleanup(self, ctx: DeployContext) -> None:
        self._release()
        super().cleanup(ctx)

    def _release(self) -> None:
        """Stop this board's run: its UART, debugger connection and QEMU."""
        self._channel = None  # the session owns it
        self._early = None
        if self._session is not None:
            self._session.close()
            self._session = None

    def run_again(
        self, ctx: DeployContext, build: BuildResult, qemu_args: Sequence[str]
    ) -> ProtocolResult:
        """One more complete run of ``build`` on a new QEMU started with ``qemu_args`` (a
        counter pass's plugin), logged in ``ctx.log_dir``: the same boot, flash and capture
        as a deploy's, its output parsed. The deploy's own run is over: the board is free."""
        self.cleanup(ctx)
        try:
            self._boot(ctx, build, qemu_args)
            execution = self.execute(ctx, build)
        finally:
            self.cleanup(ctx)
        return self.parse_output(ctx, execution)


def _described(board: str) -> str:  # the targets' line in `aidge-deploy targets`
    return f"QEMU (cached ELF by -kernel, else RSP flash), icount {get_board(board).icount_shift}"


# -- the dual-core board ------------------------------------------------------------
# The dual-core emulated board (mps2-an521): a heterogeneous export runs a program per core.
#
# Why a target of its own: a heterogeneous export (``application_config.heterogeneous_deploy``,
# the published manifest field) builds one ELF per core (``expected_artifact`` matches both,
# core 0's first). Both are loaded into one QEMU: core 0's as the kernel (or over RSP, as any
# emulated board), core 1's by QEMU's generic loader (``-device loader``), which writes its
# segments and leaves CPU1 held by the SSE-200's CPUWAIT; core 0's program releases it. Core 0
# prints on UART0 (the run's capture), core 1 on UART1, which QEMU writes to a file of the
# run's log folder (``uart-core1.log``). Both logs are parsed with the export's protocol; a
# ``DUAL_CORE_TEST: FAIL`` from core 0 (core 1 never started, did not finish, or printed
# another output) is a :class:`~aidge_deploy.errors.CoreError` naming core 1, its log kept.
#
# Per-core figures: the outputs each core printed and the emulated instructions each core's
# entry point took (SysTick ticks of QEMU's virtual clock, converted; core 1 runs while core 0
# sleeps in WFI, so its count includes core 0's wake-up per 1 ms tick, about 60 ticks in
# 65 000 on the tiny CNN). The emulated-PMU plugin counts every vCPU together, so per-core
# plugin counts are said unavailable, and the timing model is not run.

#: core 1's UART log, in the run's log folder
CORE1_LOG = "uart-core1.log"
_PLUGIN_UNAVAILABLE = (
    "unavailable (the aidge_pmu plugin sums the instructions of every vCPU: it does not "
    "split them by vcpu_index)"
)
_FAIL = re.compile(r"^DUAL_CORE_TEST: FAIL\b(.*)$", re.MULTILINE)
_PASS = re.compile(
    r"^DUAL_CORE_TEST: PASS .*core0 ticks_hi=(\d+) ticks_lo=(\d+) core1 ticks_hi=(\d+) "
    r"ticks_lo=(\d+)",
    re.MULTILINE,
)


def is_heterogeneous(app_config: dict[str, Any] | None) -> bool:
    """The published manifest field that asks for a program per core."""
    return bool((app_config or {}).get("heterogeneous_deploy"))


def second_core_elf(core0_elf: Path, core: SecondCore) -> Path:
    """Core 1's ELF of a build: beside core 0's (the Makefile writes both to ``bin/``)."""
    return core0_elf.parent / core.elf_name


@register_deploy_target("mps2-an521", "local")
class Mps2An521Target(QemuBoardTarget):
    """Emulated mps2-an521 (two Cortex-M33): a heterogeneous export runs on both cores."""

    board_name = "mps2-an521"
    runs_heterogeneous: ClassVar[bool] = True
    description: ClassVar[str] = (
        f"QEMU, two Cortex-M33 (core 1 by -device loader, started by core 0 through "
        f"CPUWAIT), icount {get_board(board_name).icount_shift}"
    )

    def __init__(self, config=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config)
        self._core1_elf: Path | None = None

    @property
    def second_core(self) -> SecondCore:
        core = self.board.second_core
        if core is None:  # the descriptor says it has one: a test checks it
            raise DeployError(f"{self.board_name} has no second core in its descriptor")
        return core

    def _heterogeneous(self, ctx: DeployContext) -> bool:
        return is_heterogeneous(ctx.artifact.manifest.application_config)

    def prepare(self, ctx: DeployContext) -> None:
        """A one-core export runs as on any emulated board; a two-core one is launched at
        flash time, once both programs are built, without the timing model (its plugin
        would count both cores as one)."""
        if not self._heterogeneous(ctx):
            super().prepare(ctx)
            return
        if ctx.artifact.manifest.protocol not in (
            "aidge-uart-output/v1",
            "aidge-uart-benchmark/v1",
        ):
            raise ConfigError(
                f"a heterogeneous export on {self.board_name} runs the output or benchmark "
                f"application on each core, not {ctx.artifact.manifest.protocol}",
                hint="Export the output or benchmark application (or one core only).",
            )
        ctx.log_dir.mkdir(parents=True, exist_ok=True)
        self._timing_plan = None
        self._early = None
        model = model_for_cpu(self.board.cpu)
        if model is not None and ctx.artifact.manifest.application == "benchmark":
            self._timing_unavailable = unavailable(
                model, "a two-core run: the plugin would count both cores' instructions as one"
            )

    def _second_core_args(self, ctx: DeployContext) -> tuple[str, ...]:
        if not self._heterogeneous(ctx) or self._core1_elf is None:
            return ()
        log = ctx.log_dir / CORE1_LOG
        log.unlink(missing_ok=True)
        return (
            "-device",
            f"loader,file={self._core1_elf}",
            "-chardev",
            f"file,id=aidge_uart_core1,path={log}",
            "-serial",
            "chardev:aidge_uart_core1",
        )

    def flash(self, ctx: DeployContext, build: Any) -> None:
        if self._heterogeneous(ctx):
            elf = second_core_elf(build.artifact_path, self.second_core)
            if not elf.is_file():
                raise CoreError(
                    "core 1",
                    f"the build made no program for core 1 ({elf.name} is missing)",
                    hint="The export is heterogeneous but its main.cpp is one core's: "
                    "export it again with aidge_qemu_boards installed.",
                    log_path=build.log_path,
                )
            self._core1_elf = elf
        super().flash(ctx, build)

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        if not self._heterogeneous(ctx):
            return super().parse_output(ctx, execution)
        core1_log = ctx.log_dir / CORE1_LOG
        core1_text = core1_log.read_text(errors="replace") if core1_log.is_file() else ""
        failed = _FAIL.search(execution.raw_output.replace("\r", ""))
        if failed is not None:
            raise CoreError(
                "core 1",
                f"core 1 of {self.board_name} failed: DUAL_CORE_TEST: FAIL{failed.group(1)} "
                f"(core 0's log: {execution.log_path})",
                hint="Core 0 starts core 1 by INITSVTOR1 and CPUWAIT and waits for its result "
                "in the shared SRAM: read core 1's UART log (empty: it never ran).",
                log_path=core1_log,
            )
        core0 = super().parse_output(ctx, execution)
        try:
            core1 = self.protocol(ctx).parse(core1_text, ctx.artifact.manifest)
        except DeployError as exc:
            raise CoreError(
                "core 1",
                f"core 1's output could not be parsed: {exc.message}",
                hint=exc.hint,
                log_path=core1_log,
            ) from exc
        ticks = _PASS.search(execution.raw_output.replace("\r", ""))
        cores = []
        for index, (parsed, log) in enumerate(((core0, execution.log_path), (core1, core1_log))):
            figure: dict[str, Any] = {
                "core": index,
                "cpu": f"{self.board.cpu} (CPU{index})",
                "uart_log": str(log) if log is not None else None,
                "outputs": [o.reshape(-1).tolist() for o in parsed.outputs]
                if parsed.outputs
                else None,
                "cycles": list(parsed.cycles) if parsed.cycles else None,
                "plugin_instructions": _PLUGIN_UNAVAILABLE,
            }
            if ticks is not None:
                hi, lo = int(ticks.group(1 + 2 * index)), int(ticks.group(2 + 2 * index))
                figure["entry_instructions"] = round(
                    ticks_to_instructions(self.board, (hi << 32) + lo)
                )
                figure["entry_instructions_source"] = (
                    "emulated (QEMU icount): SysTick ticks of the entry point's run ÷ "
                    "ticks per instruction"
                    + ("; includes core 0's 1 ms wake-ups" if index == 1 else "")
                )
            else:
                figure["entry_instructions"] = "unavailable (core 0 printed no PASS line)"
            cores.append(figure)
        return dataclasses.replace(core0, cores=tuple(cores))


#: the emulated boards whose targets are made from their records (``aidge_deploy.boards``),
#: by the class names they had: importable as before
_ALIASES = {
    "Mps2An386Target": "mps2-an386",
    "Mps2An500Target": "mps2-an500",
    "Mps2An505Target": "mps2-an505",
    "Mps3An547Target": "mps3-an547",
    "NetduinoPlus2Target": "netduinoplus2",
}


def emulated_targets() -> dict[str, type[QemuBoardTarget]]:
    """The emulated boards' targets, by board name (one per descriptor: a test checks it)."""
    from aidge_deploy.registry import pipeline_target_class

    found: dict[str, type[QemuBoardTarget]] = {}
    for board in list_boards():
        cls = pipeline_target_class(board.name, "local")
        if not issubclass(cls, QemuBoardTarget):
            raise DeployError(f"the emulated board {board.name} is deployed by {cls}")
        found[board.name] = cls
    return found


def __getattr__(name: str) -> object:
    """The former per-board classes (``Mps2An386Target``...) and ``TARGETS``, made from the
    records on first access."""
    if name == "TARGETS":
        return emulated_targets()
    board = _ALIASES.get(name)
    if board is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from aidge_deploy.registry import pipeline_target_class

    return pipeline_target_class(board, "local")
