"""What every bare-metal (Make + UART) target shares: build, sessions, capture, parsing.

Subclasses bring the mechanics that differ — how the firmware gets into the device and how
its UART is reached (a QEMU board's TCP socket, a probe-attached board's tty) — by opening a
``SerialChannel`` in ``flash()``; this base then runs the session and captures to the end.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

import numpy as np

from aidge_deploy.boards.baremetal.layout import to_exported_layout
from aidge_deploy.boards.baremetal.runtime import RuntimeConfig, resolve_runtime_config
from aidge_deploy.buildsys import BuildPlan, build_export, find_cached_build, plan_build
from aidge_deploy.config import DeployConfig
from aidge_deploy.connections.serial_capture import CaptureOutcome, CaptureResult, SerialChannel
from aidge_deploy.errors import BoardFault, CaptureError, ExecutionError, PipelineError
from aidge_deploy.protocols.base import OutputProtocol, ProtocolResult, SessionRequest
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.readiness import ToolCheck, apt_program_check
from aidge_deploy.registry import DeployTarget
from aidge_deploy.results import BuildResult, DeployContext, ExecutionResult


class BareMetalTarget(DeployTarget):
    """Make-built firmware whose results come back over a UART."""

    default_flash_method: ClassVar[str | None] = None
    #: the Aidge firmware reads DWT->CYCCNT, a 32-bit counter, and prints uint32 deltas
    cycle_counter_bits: ClassVar[int | None] = 32

    def __init__(self, config: DeployConfig | None = None) -> None:
        super().__init__(config)
        self._channel: SerialChannel | None = None
        self._planned: tuple[DeployContext, BuildPlan] | None = None

    # -- the exporter's contract ------------------------------------------------------------

    def resolve_runtime_config(
        self, export_path: Path, deploy_config: DeployConfig | None = None
    ) -> RuntimeConfig:
        """UART/probe settings the published exporter reads at firmware compile time."""
        return resolve_runtime_config(
            Path(export_path),
            deploy_config if deploy_config is not None else self.config,
            default_flash_method=self.default_flash_method,
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def preflight(self) -> list[ToolCheck]:
        return [
            apt_program_check("make", "make"),
            apt_program_check("arm-none-eabi-gcc", "gcc-arm-none-eabi libnewlib-arm-none-eabi"),
            apt_program_check("arm-none-eabi-g++", "libstdc++-arm-none-eabi-newlib"),
        ]

    def prepare(self, ctx: DeployContext) -> None:
        ctx.log_dir.mkdir(parents=True, exist_ok=True)

    def build(self, ctx: DeployContext) -> BuildResult:
        return build_export(
            ctx.artifact,
            self._build_plan(ctx),
            ctx.log_dir / "build.log",
            keep_failed=self.config.keep_build_dir,
        )

    def cached_build(self, ctx: DeployContext) -> BuildResult | None:
        """The build ``build()`` will return without building, if the cache holds it."""
        return find_cached_build(ctx.artifact, self._build_plan(ctx))

    def _build_plan(self, ctx: DeployContext) -> BuildPlan:
        """The run's build plan, made once (hashing the export): ``prepare`` may need it
        before ``build``."""
        if self._planned is None or self._planned[0] is not ctx:
            plan = plan_build(ctx.artifact, self.config.build_dir, jobs=self.config.build_jobs)
            self._planned = (ctx, plan)
        return self._planned[1]

    def protocol(self, ctx: DeployContext) -> OutputProtocol:
        return get_protocol(ctx.artifact.manifest.protocol)

    def end_markers(self, ctx: DeployContext) -> tuple[str, ...]:
        return self.config.end_markers or self.protocol(ctx).end_markers or ("END DEMO",)

    def capture_timeout(self, ctx: DeployContext) -> float:
        if self.config.serial.capture_duration:
            return float(self.config.serial.capture_duration)
        return max(float(self.config.run_timeout), 1.0)

    def session_request(self, ctx: DeployContext) -> SessionRequest:
        """Samples (in the exported layout) and labels for interactive protocols."""
        manifest = ctx.artifact.manifest
        validation = self.config.validation
        samples: tuple[np.ndarray, ...] = ()
        labels: tuple[int, ...] = ()
        if validation is not None and validation.samples:
            dims = manifest.inputs[0]["dims"] if manifest.inputs else None
            samples = tuple(
                to_exported_layout(s, dims) if dims else np.asarray(s) for s in validation.samples
            )
            labels = tuple(int(v) for v in (validation.labels or ()))
        app = manifest.application_config or {}
        return SessionRequest(
            samples=samples,
            labels=labels,
            nb_iterations=int(app.get("nb_iterations", 1)) or 1,
            nb_warmup=int(app.get("nb_warmup", 1)),
            line_timeout_s=self.capture_timeout(ctx),
        )

    def opened_channel(self) -> SerialChannel:
        if self._channel is None:
            raise PipelineError(
                "The UART channel is not open — FlashStage has not run",
            )
        return self._channel

    def execute(self, ctx: DeployContext, build: BuildResult) -> ExecutionResult:
        channel = self.opened_channel()
        protocol = self.protocol(ctx)
        started = time.monotonic()
        self.start(ctx)
        if protocol.interactive:
            protocol.drive(channel, ctx.artifact.manifest, self.session_request(ctx))
        result = channel.capture(
            end_markers=self.end_markers(ctx),
            timeout_s=self.capture_timeout(ctx),
            linger_s=self.capture_linger_s,
        )
        result = self.finish(ctx, result)
        status = self.exit_status()
        if status is not None and status < 0:  # a signal: the emulator died, not the firmware
            raise BoardFault(
                f"The emulator died by signal {-status} ({result.reason}): the board failed, "
                "not the program",
                hint="Run it again (a farm does so on another board); see the emulator's log.",
                log_path=result.log_path,
            )
        if result.outcome is CaptureOutcome.TIMEOUT and not result.text.strip():
            raise BoardFault(
                f"Nothing came from the board before the capture timed out: {result.reason}",
                hint="The board did not start the program (no banner, no output): check its "
                "power, UART and flash; a farm runs it again on another board.",
                log_path=result.log_path,
            )
        if result.outcome is CaptureOutcome.TIMEOUT:
            raise CaptureError(
                f"No end marker ({' | '.join(self.end_markers(ctx))}) on the UART: {result.reason}",
                hint="The firmware may be stuck or slower than the capture window: raise "
                "uart_capture_duration / --timeout, or check the log for a fault.",
                log_path=result.log_path,
            )
        if status not in (None, 0):
            raise ExecutionError(
                f"The firmware stopped with status {status} ({result.reason})",
                hint="It reported an error through semihosting; see the UART log.",
                log_path=result.log_path,
            )
        return ExecutionResult(
            raw_output=result.text,
            exit_status=status,
            duration_s=time.monotonic() - started,
            log_path=result.log_path,
            interactive=protocol.interactive,
        )

    def start(self, ctx: DeployContext) -> None:
        """Let the flashed firmware run (resume the core), if flashing left it halted."""

    #: how long the UART is read after the end marker (a trailing banner, an exit)
    capture_linger_s: ClassVar[float] = 0.2

    def finish(self, ctx: DeployContext, result: CaptureResult) -> CaptureResult:
        """Once the capture ended: stop whatever runs the firmware, and return the capture
        with anything it still received."""
        return result

    def exit_status(self) -> int | None:
        """The firmware's own exit status when it has one (semihosting), else None."""
        return None

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        return self.protocol(ctx).parse(execution.raw_output, ctx.artifact.manifest)

    def cleanup(self, ctx: DeployContext) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
