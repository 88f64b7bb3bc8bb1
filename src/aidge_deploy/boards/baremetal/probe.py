"""Physical Cortex-M boards behind a debug probe: flash with a registered flasher, read the UART.

The serial port is opened *before* the board is programmed and reset, so nothing it prints
at start-up is lost. Which flasher is used comes from ``DeployConfig.flash_method`` (pyOCD
by default); ``pyocd_target`` / ``probe_unique_id`` select the part and the probe, and the
flasher's own options (``flash_options``) are its to read and check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from aidge_deploy.backendoptions import FlashOptions, SerialOptions
from aidge_deploy.boards.baremetal.base import BareMetalTarget
from aidge_deploy.connections.serial_capture import SerialChannel
from aidge_deploy.errors import ConfigError
from aidge_deploy.flash.program import FlashReport, ResetMode
from aidge_deploy.flash.registry import (
    BoardLink,
    Flasher,
    FlashRequest,
    get_flasher_class,
    parse_options,
)
from aidge_deploy.readiness import ToolCheck
from aidge_deploy.registry import FlashableTarget
from aidge_deploy.results import BuildResult, DeployContext, Provenance
from aidge_deploy.targetspec import BackendCaps

#: the untyped ``extra`` keys flasher options used to be, and the option each now is
_FORMER_EXTRA = {
    "openocd_target": "openocd option target_script",
    "openocd_interface": "openocd option interface",
    "jlink_device": "jlink option device",
}


class ProbeBoardTarget(BareMetalTarget, FlashableTarget):
    """A real MCU board: cycles are the firmware's DWT counter, measured on silicon."""

    #: a board of its own, on a debug probe and a UART of this machine
    reach: ClassVar[BackendCaps] = BackendCaps(options=(FlashOptions, SerialOptions))
    default_flash_method: ClassVar[str | None] = "pyocd"
    timing_provenance: ClassVar[Provenance] = Provenance.SILICON
    counter_provenance: ClassVar[Provenance] = Provenance.SILICON
    description: ClassVar[str] = "probe flash + UART"
    #: pyOCD target name of the part, when it differs from the hardware target name
    pyocd_part: ClassVar[str | None] = None

    flash_report: FlashReport | None = None

    @property
    def flash_method(self) -> str:
        return self.config.flash.method or self.default_flash_method or "pyocd"

    def flasher_class(self) -> type[Flasher]:
        """The flasher ``flash_method`` names (``ConfigError`` for an unknown one)."""
        return get_flasher_class(self.flash_method)

    def flasher(self, log_dir: Path | None) -> Flasher:
        """The flasher of this board, configured by the flasher's own options."""
        cls = self.flasher_class()
        board = BoardLink(
            target=self.hardware_model or self.target_name,
            family=getattr(self.hardware_target, "hal_board", None),
            part=self.config.flash.pyocd_target or self.pyocd_part,
            probe_uid=self.config.flash.probe_unique_id,
            log_dir=log_dir,
        )
        return cls.for_board(board, parse_options(cls, self.config.flash.options))

    def preflight(self) -> list[ToolCheck]:
        """The firmware's build tools, and what the flash method needs on this machine."""
        return [*super().preflight(), *self.flasher_class().needs()]

    def run_needs(self) -> list[str]:
        needs = [
            "the board on its debug probe (--probe-unique-id when several are plugged in)",
            "--serial-port of the board's UART",
        ]
        if self.flash_method == "pyocd" and self.pyocd_part is None:
            needs.append(
                "pyOCD's name of the part (--pyocd-target; a CMSIS pack for parts it lacks)"
            )
        if self.flash_method == "gdb-remote":
            needs.append("a GDB server you started for the probe (--flash-option host/port)")
        return needs

    @classmethod
    def variants(cls) -> dict[str, dict[str, Any]]:
        from aidge_deploy.flash.registry import FLASHERS

        return {f"--flash-method {name}": {"flash_method": name} for name in FLASHERS.names()}

    def check_config(self) -> None:
        for key, option in _FORMER_EXTRA.items():
            if key in self.config.extra:
                raise ConfigError(
                    f"extra[{key!r}] is no longer read: it is the {option} of its flasher",
                    hint=f"Pass --flash-option {option.split()[-1]}=VALUE "
                    "(DeployConfig.flash_options).",
                )
        parse_options(self.flasher_class(), self.config.flash.options)  # its own, typed
        if not self.config.serial.port:
            raise ConfigError(
                f"{self.target_name} needs the serial port its UART is on",
                hint="Pass --serial-port (DeployConfig.serial_port), e.g. /dev/ttyACM0.",
            )

    def flash(self, ctx: DeployContext, build: BuildResult) -> None:
        port = self.config.serial.port
        if not port:
            raise ConfigError(
                f"{self.target_name} needs the serial port its UART is on",
                hint="Pass --serial-port (DeployConfig.serial_port), e.g. /dev/ttyACM0.",
            )
        self._channel = SerialChannel.open(
            port, ctx.log_dir / "uart.log", baudrate=int(self.config.serial.baudrate or 115200)
        )
        flasher = self.flasher(ctx.log_dir)
        self.flash_report = flasher.flash(
            FlashRequest(image=build.artifact_path, verify=True, reset=ResetMode.MONITOR)
        )
