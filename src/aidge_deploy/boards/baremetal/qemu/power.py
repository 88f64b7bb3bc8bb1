"""The power variant of the emulated boards: build it, boot it in QEMU, run the gated window.

``make power POWER_REPEATS=R`` (the BSP's Makefile) links ``bin/<elf>_power.elf``, whose
``main`` calls the export's benchmark entry point R times between ``aidge_power_gate_open``
and ``aidge_power_gate_close`` with every print compiled out, then prints one
``AIDGE_POWER_TERMINAL`` record. It boots through the same ``FirmwareSession`` sequence as
every QEMU run, with the monitor's emulator arguments (the emulated PMU plugin for the
``emulated`` monitor), so the gate is seen exactly.
"""

from __future__ import annotations

import dataclasses
import time
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from aidge_deploy.connections.local_process import run_process
from aidge_deploy.errors import BuildError, ConfigError, PipelineError
from aidge_deploy.power.capability import PowerCapableTarget, PowerRun, parse_bsp_terminal
from aidge_deploy.power.result import PowerPlan, TerminalRecord
from aidge_deploy.results import BuildResult, BuildStatus, DeployContext, Provenance

if TYPE_CHECKING:
    from aidge_deploy.power.protocol import PowerMonitor
    from aidge_deploy.results import ExecutionResult
    from aidge_qemu_boards.boards import QemuBoard

BUILD_TIMEOUT_S = 600.0


class QemuPowerVariant(PowerCapableTarget):
    """``PowerCapableTarget`` of the QEMU boards (mixed into ``QemuBoardTarget``)."""

    power_variant = True
    _power_ctx: DeployContext | None = None

    @property
    @abstractmethod
    def board(self) -> QemuBoard: ...

    @abstractmethod
    def _boot(
        self, ctx: DeployContext, build: BuildResult, extra_args: Sequence[str] = ()
    ) -> None: ...

    @abstractmethod
    def execute(self, ctx: DeployContext, build: BuildResult) -> ExecutionResult: ...

    @abstractmethod
    def cleanup(self, ctx: DeployContext) -> None: ...

    def power_inferences_per_repeat(self, ctx: DeployContext) -> int:
        manifest = ctx.artifact.manifest
        app = manifest.application_config or {}
        if manifest.application != "benchmark" or app.get("tinymlbenchmark"):
            raise ConfigError(
                f"Power runs need a benchmark export; this one is {manifest.application!r}",
                hint="Use `aidge-deploy profile` (it exports a benchmark) or export with "
                "application kind 'benchmark'.",
            )
        warmup = int(app.get("nb_warmup", 0))
        iterations = int(app.get("nb_iterations", 1))
        # the Cortex-M benchmark entry runs max(10, I) forwards per timed iteration
        return warmup + iterations * max(10, iterations)

    def build_power_firmware(
        self, ctx: DeployContext, build: BuildResult, plan: PowerPlan
    ) -> BuildResult:
        root = build.build_dir or ctx.export_dir
        log = ctx.log_dir / "power-build.log"
        run = run_process(
            ["make", "power", f"POWER_REPEATS={plan.repeats}"],
            cwd=root,
            timeout_s=BUILD_TIMEOUT_S,
            stdout_path=log,
            stderr_path=ctx.log_dir / "power-build.stderr.log",
        )
        elf = root / "bin" / f"{Path(self.board.elf_name).stem}_power.elf"
        if run.returncode != 0 or not elf.is_file():
            raise BuildError(
                f"Building the power firmware failed (make power exited with {run.returncode})",
                hint="See the power build log; the export's BSP needs the power variant "
                "(exports made by this version of aidge_qemu_boards have it).",
                log_path=log,
            )
        return BuildResult(
            artifact_path=elf,
            mem_peaks=build.mem_peaks,
            status=BuildStatus.BUILT,
            log=log.read_text(errors="replace"),
            log_path=log,
            build_dir=root,
            duration_s=run.duration_s,
        )

    def flash_power_firmware(
        self, ctx: DeployContext, firmware: BuildResult, monitor: PowerMonitor
    ) -> None:
        power_ctx = dataclasses.replace(ctx, log_dir=ctx.log_dir / "power")
        power_ctx.log_dir.mkdir(parents=True, exist_ok=True)
        self.cleanup(ctx)  # the profile run is over: the board is free for the power run
        self._power_ctx = power_ctx
        self._boot(power_ctx, firmware, monitor.emulator_args())

    def run_power_window(
        self, ctx: DeployContext, build: BuildResult, plan: PowerPlan, monitor: PowerMonitor
    ) -> PowerRun:
        power_ctx = self._power_ctx
        if power_ctx is None:
            raise PipelineError(
                "The power firmware is not flashed — FlashPowerFirmwareStage has not run",
                hint="This is a bug in the stage order; please report it with the log.",
            )
        started = time.monotonic()
        try:
            execution = self.execute(power_ctx, build)
        finally:
            self.cleanup(power_ctx)
            self._power_ctx = None
        return PowerRun(started, time.monotonic(), execution.raw_output, execution.log_path)

    def parse_power_terminal(self, run: PowerRun, plan: PowerPlan) -> TerminalRecord | None:
        # SysTick counts virtual time at cpu_hz: ticks / cpu_hz is the window at CPI = 1
        return parse_bsp_terminal(
            run.text_after_gate,
            plan.inferences_per_repeat,
            float(self.board.cpu_hz),
            Provenance.ESTIMATED,
        )


__all__ = ["QemuPowerVariant"]
