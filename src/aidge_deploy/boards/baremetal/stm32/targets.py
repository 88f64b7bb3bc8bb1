"""STM32 boards of the hardware model, reached locally through a debug probe and a UART.

Only deploy mechanics live here; memories, clocks, HAL family and UART handle come from
``aidge_core.hw_model`` through ``self.hardware_target``. ``pyocd_part`` is pyOCD's name of
the part where pyOCD has it built in; other parts need a CMSIS pack and ``--pyocd-target``.
"""

from __future__ import annotations

from typing import ClassVar

from aidge_deploy.boards.baremetal.probe import ProbeBoardTarget
from aidge_deploy.registry import register_deploy_target


class BaseSTM32LocalDeployTarget(ProbeBoardTarget):
    """An STM32 board flashed with pyOCD (default), J-Link or OpenOCD; results over UART."""


@register_deploy_target("stm32f413", "local")
class STM32F413LocalTarget(BaseSTM32LocalDeployTarget):
    pyocd_part: ClassVar[str | None] = None


@register_deploy_target("stm32f746", "local")
class STM32F746LocalTarget(BaseSTM32LocalDeployTarget):
    pyocd_part: ClassVar[str | None] = None


@register_deploy_target("stm32h743", "local")
class STM32H743LocalTarget(BaseSTM32LocalDeployTarget):
    pyocd_part: ClassVar[str | None] = "stm32h743xx"


@register_deploy_target("stm32h7a3", "local")
class STM32H7A3LocalTarget(BaseSTM32LocalDeployTarget):
    pyocd_part: ClassVar[str | None] = None


@register_deploy_target("stm32l4r5", "local")
class STM32L4R5LocalTarget(BaseSTM32LocalDeployTarget):
    pyocd_part: ClassVar[str | None] = None


@register_deploy_target("stm32n657", "local")
class STM32N657LocalTarget(BaseSTM32LocalDeployTarget):
    pyocd_part: ClassVar[str | None] = None
