"""The power variant of the emulated boards: build it, boot it in QEMU, run the gated window.

``make power POWER_REPEATS=R`` (the BSP's Makefile) links ``bin/<elf>_power.elf``, whose
``main`` calls the export's benchmark entry point (warm-up + N forwards with the boards' own
entry) R times between ``aidge_power_gate_open``
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

from aidge_deploy.errors import ConfigError, PipelineError
from aidge_deploy.power.capability import PowerCapableTarget, PowerRun, parse_bsp_terminal
from aidge_deploy.power.result import PowerPlan, TerminalRecord
from aidge_deploy.results import BuildResult, DeployContext, Provenance
from aidge_qemu_descriptors import LINEAR_ENTRY_MARK

if TYPE_CHECKING:
    from aidge_deploy.power.protocol import PowerMonitor
    from aidge_deploy.results import ExecutionResult
    from aidge_qemu_descriptors import QemuBoard

BUILD_TIMEOUT_S = 600.0


def forwards_per_iteration(export_dir: Path, iterations: int) -> int:
    """Forwards one timed iteration of a benchmark export runs: 1 with the boards' own entry
    (it carries ``LINEAR_ENTRY_MARK``), ``max(10, N)`` with the Cortex-M exporter's (an
    export made before the boards had their entry)."""
    entry = export_dir / "Src" / "inference_time.hpp"
    try:
        linear = LINEAR_ENTRY_MARK in entry.read_text(encoding="utf-8", errors="replace")
    except OSError:
        linear = False
    return 1 if linear else max(10, iterations)


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
        return warmup + iterations * forwards_per_iteration(Path(ctx.artifact.path), iterations)

    def build_power_firmware(
        self, ctx: DeployContext, build: BuildResult, plan: PowerPlan
    ) -> BuildResult:
        from aidge_deploy.artifact import export_hash
        from aidge_deploy.buildsys import build_variant

        return build_variant(
            build,
            f"power{plan.repeats}",
            ["make", "power", f"POWER_REPEATS={plan.repeats}"],
            f"bin/{Path(self.board.elf_name).stem}_power.elf",
            ctx.log_dir / "power-build.log",
            digest=export_hash(ctx.artifact),
            shared=self.config.build_dir is None,  # type: ignore[attr-defined]
            timeout_s=BUILD_TIMEOUT_S,
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
            )
        started = time.monotonic()
        try:
            execution = self.execute(power_ctx, build)
        finally:
            self.cleanup(power_ctx)
            self._power_ctx = None
        return PowerRun(started, time.monotonic(), execution.raw_output, execution.log_path)

    def parse_power_terminal(self, run: PowerRun, plan: PowerPlan) -> TerminalRecord | None:
        # the record's ticks are SysTick counts of QEMU's virtual clock (icount): not the
        # time base of the energy model, so they are not reported (the window's duration
        # is the model's, from the emulated PMU counts)
        return parse_bsp_terminal(
            run.text_after_gate,
            plan.inferences_per_repeat,
            Provenance.EMULATED,
            no_clock_reason="QEMU's virtual clock is not a time base of the energy model: "
            "the window's time is the model's (power_window_duration)",
        )


__all__ = ["QemuPowerVariant", "forwards_per_iteration"]
