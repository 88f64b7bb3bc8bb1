"""Registration of the emulated boards with the Cortex-M exporter.

``aidge_export_arm_cortexm`` composes a project from ``<assets_root>/board_files`` (copied
into the export root, used as is because it is non-empty, so no BSP download is attempted)
and ``<assets_root>/templates/main.jinja`` (rendered to ``main.cpp``). It must run after
:mod:`aidge_qemu_boards.hw_targets`, because a ``TargetExport`` resolves its hardware class
when it is built.
"""

from __future__ import annotations

from pathlib import Path

from aidge_core.export_utils import register_target_export
from aidge_export_arm_cortexm.targets.common import CortexMTargetExport

# Imported for its side effect: the hardware classes must be registered before any
# TargetExport is built, whatever module the user imports first.
from aidge_qemu_boards import hw_targets as _hw_targets  # noqa: F401
from aidge_qemu_descriptors import list_boards

__all__ = ["ASSETS_ROOT", "TARGET_EXPORTS", "assets_root_for"]

ASSETS_ROOT = Path(__file__).resolve().parent / "assets"


def assets_root_for(board_name: str) -> Path:
    """Folder holding ``board_files/`` and ``templates/`` for one board."""
    return ASSETS_ROOT / board_name


def _register_all() -> dict[str, CortexMTargetExport]:
    exports: dict[str, CortexMTargetExport] = {}
    for board in list_boards():
        target_export = CortexMTargetExport(
            board.name,
            assets_root_for(board.name),
            expected_artifact=board.expected_artifact,
        )
        exports[board.name] = register_target_export(target_export)
    return exports


TARGET_EXPORTS: dict[str, CortexMTargetExport] = _register_all()
