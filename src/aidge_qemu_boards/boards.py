"""The board descriptors under the plug-in's name: they live in :mod:`aidge_qemu_descriptors`.

They moved to a package of their own so that reading them imports nothing heavy (this
package's ``__init__`` registers the boards with ``aidge_core``); this module keeps
``from aidge_qemu_boards.boards import get_board`` working, with the same objects.
"""

from __future__ import annotations

import aidge_qemu_descriptors
from aidge_qemu_descriptors import *  # noqa: F403 - re-exported as they are

__all__ = list(aidge_qemu_descriptors.__all__)
