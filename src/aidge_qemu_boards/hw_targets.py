"""Hardware-model classes of the emulated boards, registered in ``aidge_core.hw_model``.

``aidge_core.export_utils.export(graph, ExportConfig(target="mps2-an386", ...))`` resolves
the target by name in the hardware registry, picks the Cortex-M project composer from the
main processing element's type (so the CPU must be a ``CortexM`` subclass) and reads
``hal_board``, ``uart_handle`` and ``bsp_package`` from the device. Every fact (clock,
memories and their capacities, HAL board, UART) comes from the board's descriptor
(:mod:`aidge_qemu_descriptors`), which the deploy side reads directly at run time: the two
never disagree.
"""

from __future__ import annotations

from aidge_core.hw_model import (
    M4,
    M7,
    M55,
    BSPPackage,
    BuildSystem,
    ExecutionDomain,
    ExecutionEnvironment,
    Memory,
    register_target,
)
from aidge_core.hw_model.processing_elements import CortexM
from aidge_core.hw_model.targets.base import Microcontroller

from aidge_qemu_descriptors import QemuBoard, get_board

__all__ = [
    "MPS2_AN386",
    "MPS2_AN500",
    "MPS2_AN505",
    "MPS2_AN521",
    "MPS3_AN547",
    "QEMU_CORES",
    "EmulatedM4",
    "EmulatedM7",
    "EmulatedM33",
    "EmulatedM55",
    "NetduinoPlus2",
    "QemuMicrocontroller",
]

# The BSP ships inside this package (``assets/<board>/board_files``), so this version is
# never downloaded; the exporter still calls ``bsp_package.with_version()`` on every export.
BSP_VERSION = "v1.0.0"


# The emulated boards' cores are processing-element types of their own: aidge_core picks a
# project composer by the main PE's type (most derived first), and the boards' composer
# (exports.py) adds their linear benchmark entry to what the Cortex-M exporter composes.
class EmulatedM4(M4):
    """The Cortex-M4F of an emulated board: an ``M4`` whose projects get the boards' entry."""


class EmulatedM55(M55):
    """The Cortex-M55 of an emulated board: an ``M55`` whose projects get the boards' entry."""


class EmulatedM7(M7):
    """The Cortex-M7 of an emulated board: an ``M7`` whose projects get the boards' entry."""


class EmulatedM33(CortexM):
    """The Cortex-M33 of an emulated board (``aidge_core`` has no Armv8-M mainline class): a
    ``CortexM`` of architecture ``cortex-m33`` whose projects get the boards' entry."""

    def __init__(self, cmsis: bool = False) -> None:
        super().__init__(cmsis=cmsis)
        self._arch = "cortex-m33"


#: every processing-element type of the emulated boards
QEMU_CORES: tuple[type[CortexM], ...] = (EmulatedM4, EmulatedM7, EmulatedM33, EmulatedM55)


class QemuMicrocontroller(Microcontroller):
    """A Cortex-M board emulated by ``qemu-system-arm`` with a BSP local to this package."""

    def __init__(self, board: QemuBoard, cpu: CortexM) -> None:
        super().__init__(name=board.name)
        self.qemu_board = board
        self.build_system = BuildSystem.MAKE
        self.hal_board = board.hal_board
        self.uart_handle = board.uart_handle
        slug = board.name.replace("-", "_")
        self.bsp_package = BSPPackage(f"aidge_qemu_bsp_{slug}", BSP_VERSION, f"{slug}.tar.gz")
        cpu.frequency_hz = board.cpu_hz
        self.cpu = cpu
        # aidge_core keys a device's memories by the attribute holding each one
        memories = []
        for model_memory in board.model_memories:
            memory = Memory(capacity=model_memory.capacity, priority=model_memory.priority)
            setattr(self, model_memory.name, memory)
            memories.append(memory)
        self.baremetal_domain = ExecutionDomain(
            name="baremetal",
            environment=ExecutionEnvironment.BAREMETAL,
            processing_elements=[self.cpu],
            memories=memories,
            build_system=BuildSystem.MAKE,
            # No CMSIS-NN is shipped with the local BSP, so the CMSIS kernels are never used.
            cmsis_configurable=False,
        )
        self.default_execution_domain = self.baremetal_domain


@register_target("mps2-an386")
class MPS2_AN386(QemuMicrocontroller):
    """Arm MPS2 FPGA image AN386: Cortex-M4F at 25 MHz, 4 MB code SSRAM, 4 MB data SSRAM."""

    def __init__(self, cmsis: bool = False) -> None:
        super().__init__(get_board("mps2-an386"), EmulatedM4(cmsis))


@register_target("mps3-an547")
class MPS3_AN547(QemuMicrocontroller):
    """Arm MPS3 FPGA image AN547 (Corstone-300): Cortex-M55 at 32 MHz, 8 MB QSPI, 4 MB SRAM."""

    def __init__(self, cmsis: bool = False) -> None:
        super().__init__(get_board("mps3-an547"), EmulatedM55(cmsis))


@register_target("netduinoplus2")
class NetduinoPlus2(QemuMicrocontroller):
    """Netduino Plus 2 (STM32F405RG): Cortex-M4F at 168 MHz, 1 MB flash, 192 KB SRAM."""

    def __init__(self, cmsis: bool = False) -> None:
        super().__init__(get_board("netduinoplus2"), EmulatedM4(cmsis))


@register_target("mps2-an500")
class MPS2_AN500(QemuMicrocontroller):
    """Arm MPS2 FPGA image AN500: Cortex-M7 (FPv5-D16) at 25 MHz, 4 MB code and 4 MB data SSRAM."""

    def __init__(self, cmsis: bool = False) -> None:
        super().__init__(get_board("mps2-an500"), EmulatedM7(cmsis))


@register_target("mps2-an505")
class MPS2_AN505(QemuMicrocontroller):
    """Arm MPS2 FPGA image AN505 (SSE-200 IoT kit): Cortex-M33 at 20 MHz, 4 MB code SSRAM, 4 MB data SSRAM."""

    def __init__(self, cmsis: bool = False) -> None:
        super().__init__(get_board("mps2-an505"), EmulatedM33(cmsis))


@register_target("mps2-an521")
class MPS2_AN521(QemuMicrocontroller):
    """Arm MPS2 FPGA image AN521 (SSE-200): two Cortex-M33 at 20 MHz; core 0 is the main
    processing element, core 1 is started by it (a heterogeneous export runs a program on
    each); each core has 2 MB of code and 2 MB of data SSRAM."""

    def __init__(self, cmsis: bool = False) -> None:
        super().__init__(get_board("mps2-an521"), EmulatedM33(cmsis))
