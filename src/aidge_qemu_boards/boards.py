"""The board descriptors under the plug-in's name: they live in :mod:`aidge_qemu_descriptors`.

They moved to a package of their own so that reading them imports nothing heavy (this
package's ``__init__`` registers the boards with ``aidge_core``); this module keeps
``from aidge_qemu_boards.boards import get_board`` working.
"""

from __future__ import annotations

from aidge_qemu_descriptors import (
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
    "QEMU_BINARY",
    "MemoryRegion",
    "ModelMemory",
    "QemuBoard",
    "RegionKind",
    "UartKind",
    "get_board",
    "icount_shift_for",
    "list_boards",
    "qemu_command",
    "ticks_to_instructions",
]
