"""Alif Ensemble boards of the hardware model, reached locally through a probe and a UART.

The ake7 runs heterogeneous exports (``application_config.heterogeneous_deploy``): the
published exporter builds one ELF per M55 core (``out/**/*.elf``: the HP core's and the HE
core's). Deploy flashes every one of them through the board's probe, the last with the
reset that starts the board, reads the HP core's UART, and a ``DUAL_CORE_TEST: FAIL`` the
exporter's firmware prints is a ``CoreError`` naming the secondary core, its log kept —
the mechanics of the emulated dual-core board (mps2-an521), with a probe for QEMU's loader.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from aidge_deploy.boards.baremetal.probe import ProbeBoardTarget
from aidge_deploy.buildsys import find_artifacts
from aidge_deploy.connections.serial_capture import SerialChannel
from aidge_deploy.errors import ConfigError, CoreError
from aidge_deploy.flash.program import FlashReport, ResetMode
from aidge_deploy.flash.registry import FlashRequest
from aidge_deploy.registry import register_deploy_target
from aidge_deploy.results import BuildResult, DeployContext, ExecutionResult

if TYPE_CHECKING:
    from aidge_deploy.protocols.base import ProtocolResult

_FAIL = re.compile(r"^(DUAL_CORE_TEST|APSS_M55_TEST): FAIL\b(.*)$", re.MULTILINE)


@register_deploy_target("ake7", "local")
class AlifE7LocalTarget(ProbeBoardTarget):
    """Alif Ensemble E7 (M55 HP core): its exports build with Make into ``out/**/*.elf``."""

    runs_heterogeneous: ClassVar[bool] = True
    #: every image flashed for the run, in order (a heterogeneous export has several)
    flash_reports: tuple[FlashReport, ...] = ()

    def _heterogeneous(self, ctx: DeployContext) -> bool:
        return bool((ctx.artifact.manifest.application_config or {}).get("heterogeneous_deploy"))

    def images(self, ctx: DeployContext, build: BuildResult) -> tuple[Path, ...]:
        """The programs to flash: every ELF the build made for a heterogeneous export (the
        secondary cores' first, the one the build reports last: its reset starts the
        board), else the build's one."""
        if not self._heterogeneous(ctx):
            return (build.artifact_path,)
        pattern = ctx.artifact.manifest.expected_artifact
        found: tuple[Path, ...] = ()
        for root in build.artifact_path.parents:  # the folder the pattern is relative to
            found = find_artifacts(root, pattern)
            if build.artifact_path in found:
                break
        others = tuple(p for p in found if p != build.artifact_path)
        if not others:
            raise CoreError(
                "the secondary core",
                f"the heterogeneous export built one program ({build.artifact_path.name}), "
                "not one per core",
                hint="Export it again with heterogeneous_deploy=True for ake7.",
                log_path=build.log_path,
            )
        return (*others, build.artifact_path)

    def flash(self, ctx: DeployContext, build: BuildResult) -> None:
        if not self._heterogeneous(ctx):
            super().flash(ctx, build)
            self.flash_reports = (self.flash_report,) if self.flash_report else ()
            return
        port = self.config.serial.port
        if not port:
            raise ConfigError(
                f"{self.target_name} needs the serial port its UART is on",
                hint="Pass --serial-port (DeployConfig.serial_port), e.g. /dev/ttyACM0.",
            )
        images = self.images(ctx, build)
        self._channel = SerialChannel.open(
            port, ctx.log_dir / "uart.log", baudrate=int(self.config.serial.baudrate or 115200)
        )
        flasher = self.flasher(ctx.log_dir)
        reports = []
        for index, image in enumerate(images):
            last = index == len(images) - 1
            reports.append(
                flasher.flash(
                    FlashRequest(
                        image=image,
                        verify=True,
                        reset=ResetMode.MONITOR if last else ResetMode.NONE,
                    )
                )
            )
        self.flash_reports = tuple(reports)
        self.flash_report = reports[-1]

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        if self._heterogeneous(ctx):
            failed = _FAIL.search(execution.raw_output.replace("\r", ""))
            if failed is not None:
                raise CoreError(
                    "the secondary core (M55-HE)"
                    if failed.group(1) == "DUAL_CORE_TEST"
                    else "the APSS",
                    f"{self.target_name}'s secondary core failed: {failed.group(0)}",
                    hint="Both images were flashed (see the flash reports); check that the "
                    "HE core's image is the one the HP core starts.",
                    log_path=execution.log_path,
                )
        return super().parse_output(ctx, execution)
