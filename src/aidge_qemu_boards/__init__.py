"""Emulated Cortex-M boards (QEMU) as Aidge export targets, with their own local BSPs.

Importing this package registers ``mps2-an386`` (Cortex-M4F), ``mps2-an500`` (Cortex-M7),
``mps2-an505`` (Cortex-M33), ``mps3-an547`` (Cortex-M55) and ``netduinoplus2`` (STM32F405,
Cortex-M4F) in ``aidge_core.hw_model`` and with
``aidge_export_arm_cortexm``, so ``aidge_core.export_utils.export()`` can produce a
buildable ``make build`` project for them, and exposes the board descriptors
(:func:`get_board`, :func:`list_boards`) a runner needs to start QEMU and to convert the
firmware's SysTick "cycles" into emulated instruction counts.

The descriptors live in :mod:`aidge_qemu_descriptors`, which imports nothing heavy: the
deploy side reads them from there at run time, and imports this package (``aidge_core``,
the Cortex-M exporter) only to export or to ask the hardware model.
"""

from __future__ import annotations

from aidge_qemu_boards import hw_targets

# Must come after ``hw_targets``: a TargetExport resolves its hardware class when built.
from aidge_qemu_boards.exports import ASSETS_ROOT, TARGET_EXPORTS, assets_root_for

# Imported for its side effect: the project composer of the boards' cores.
from aidge_qemu_boards import entry  # noqa: F401  isort: skip
from aidge_qemu_descriptors import (
    LINEAR_ENTRY_MARK,
    QEMU_BINARY,
    MemoryRegion,
    ModelMemory,
    QemuBoard,
    RegionKind,
    UartKind,
    get_board,
    icount_shift_for,
    list_boards,
    qemu_command,
    ticks_to_instructions,
)

__all__ = [
    "ASSETS_ROOT",
    "LINEAR_ENTRY_MARK",
    "QEMU_BINARY",
    "TARGET_EXPORTS",
    "MemoryRegion",
    "ModelMemory",
    "QemuBoard",
    "RegionKind",
    "UartKind",
    "assets_root_for",
    "get_board",
    "hw_targets",
    "icount_shift_for",
    "list_boards",
    "qemu_command",
    "ticks_to_instructions",
]
