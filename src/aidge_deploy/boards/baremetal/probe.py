"""Physical Cortex-M boards behind a debug probe: flash with a registered flasher, read the UART.

The serial port is opened *before* the board is programmed and reset, so nothing it prints
at start-up is lost. Which flasher is used comes from ``DeployConfig.flash_method`` (pyOCD
by default); ``pyocd_target`` / ``probe_unique_id`` select the part and the probe.
"""

from __future__ import annotations

from typing import ClassVar

from aidge_deploy.boards.baremetal.base import BareMetalTarget
from aidge_deploy.connections.serial_capture import SerialChannel
from aidge_deploy.errors import ConfigError
from aidge_deploy.flash.program import FlashReport, ResetMode
from aidge_deploy.flash.registry import FlashRequest, get_flasher
from aidge_deploy.registry import FlashableTarget
from aidge_deploy.results import BuildResult, DeployContext, Provenance


class ProbeBoardTarget(BareMetalTarget, FlashableTarget):
    """A real MCU board: cycles are the firmware's DWT counter, measured on silicon."""

    default_flash_method: ClassVar[str | None] = "pyocd"
    timing_provenance: ClassVar[Provenance] = Provenance.SILICON
    counter_provenance: ClassVar[Provenance] = Provenance.SILICON
    description: ClassVar[str] = "probe flash + UART"
    #: pyOCD target name of the part, when it differs from the hardware target name
    pyocd_part: ClassVar[str | None] = None

    flash_report: FlashReport | None = None

    def flasher_options(self, method: str, ctx: DeployContext) -> dict[str, object]:
        """What the chosen flasher needs, from the config and the hardware model."""
        uid = self.config.probe_unique_id
        if method == "pyocd":
            target = self.config.pyocd_target or self.pyocd_part or self.target_name
            return {"target": target, "probe_uid": uid, "log_dir": ctx.log_dir}
        if method == "openocd":
            # OpenOCD names its target scripts after the family (hal_board stm32h7 -> stm32h7x)
            family = getattr(self.hardware_target, "hal_board", None) or self.target_name
            script = self.config.extra.get("openocd_target") or f"target/{family}x.cfg"
            interface = self.config.extra.get("openocd_interface") or "interface/stlink.cfg"
            return {
                "target": script,
                "interface": interface,
                "probe_serial": uid,
                "log_dir": ctx.log_dir,
            }
        if method == "jlink":
            device = (
                self.config.extra.get("jlink_device")
                or self.config.pyocd_target
                or self.target_name.upper()
            )
            return {"device": device, "probe_serial": uid, "log_dir": ctx.log_dir}
        return {}

    def check_config(self) -> None:
        if not self.config.serial_port:
            raise ConfigError(
                f"{self.target_name} needs the serial port its UART is on",
                hint="Pass --serial-port (DeployConfig.serial_port), e.g. /dev/ttyACM0.",
            )

    def flash(self, ctx: DeployContext, build: BuildResult) -> None:
        method = self.config.flash_method or self.default_flash_method or "pyocd"
        port = self.config.serial_port
        if not port:
            raise ConfigError(
                f"{self.target_name} needs the serial port its UART is on",
                hint="Pass --serial-port (DeployConfig.serial_port), e.g. /dev/ttyACM0.",
            )
        self._channel = SerialChannel.open(
            port, ctx.log_dir / "uart.log", baudrate=int(self.config.serial_baudrate or 115200)
        )
        flasher = get_flasher(method, **self.flasher_options(method, ctx))
        self.flash_report = flasher.flash(
            FlashRequest(image=build.artifact_path, verify=True, reset=ResetMode.MONITOR)
        )
