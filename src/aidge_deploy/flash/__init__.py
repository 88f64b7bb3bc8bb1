"""Programming firmware into boards: a GDB remote protocol client and named flashers.

``gdb_remote`` talks to any GDB server (QEMU, pyOCD, OpenOCD, J-Link) and ``program`` flashes
an image through it; ``registry`` maps flash-method names to ``Flasher`` objects that declare
their capabilities.
"""

from aidge_deploy.flash.gdb_remote import GdbRemoteClient
from aidge_deploy.flash.program import (
    FlashReport,
    ResetMode,
    flash_elf,
    flash_file,
    flash_image,
    program,
)
from aidge_deploy.flash.registry import (
    Flasher,
    FlasherCaps,
    FlashRequest,
    flasher_names,
    get_flasher,
    register_flasher,
)

__all__ = [
    "FlashReport",
    "FlashRequest",
    "Flasher",
    "FlasherCaps",
    "GdbRemoteClient",
    "ResetMode",
    "flash_elf",
    "flash_file",
    "flash_image",
    "flasher_names",
    "get_flasher",
    "program",
    "register_flasher",
]
