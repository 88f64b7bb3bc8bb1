"""Whether the board support package a Cortex-M export copies in is on this machine.

The exporter, not aidge-deploy, resolves a board's BSP (the deploy guide): it copies the
package's ``board_files`` from the exporter's own folder for the target, and when that
folder is empty it downloads the exact package (name, version, archive of the hardware
model's ``bsp_package``) from the GitLab package registry, on the first export. Offline, that
export fails. ``doctor`` says which boards' BSPs are here, and ``profile`` turns the
exporter's download failure into a ``PreflightError`` with the same words.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aidge_deploy.readiness import ToolCheck

#: the GitLab package registry the exporter downloads from by default
DEFAULT_REGISTRY = "gitlab.eclipse.org"
#: the message the exporter's download failure starts with
DOWNLOAD_FAILURE = "Failed to resolve BSP package"


def how_to_get(package: Any) -> str:
    return (
        f"Export once with network access (the exporter downloads {package.name} "
        f"{package.version}), or set AIDGE_BSP_REGISTRY_URL to a mirror you can reach "
        "(file://...)."
    )


def bsp_folder(hardware_target: Any) -> Path | None:
    """Where the exporter looks for the board's BSP first (None: not a Cortex-M export)."""
    try:
        from aidge_export_arm_cortexm.targets.common import target_root

        return Path(target_root(hardware_target)) / "board_files"
    except Exception:  # no Cortex-M export registered for this hardware model
        return None


def bsp_check(hardware_target: Any) -> ToolCheck | None:
    """The BSP of ``hardware_target``'s exports: here, or downloaded at the first export (and
    how to get it); None when its exports need none."""
    package = getattr(hardware_target, "bsp_package", None)
    folder = bsp_folder(hardware_target) if package is not None else None
    if package is None or folder is None:
        return None
    if folder.is_dir() and any(folder.iterdir()):
        return ToolCheck("BSP package", True, f"{package.name} {package.version} in {folder}")
    registry = os.environ.get("AIDGE_BSP_REGISTRY_URL") or DEFAULT_REGISTRY
    return ToolCheck(
        "BSP package",
        False,
        f"{package.name} {package.version} not on this machine: the first export downloads "
        f"it from {registry} (fails offline)",
        how_to_get(package),
    )


__all__ = ["DOWNLOAD_FAILURE", "bsp_check", "bsp_folder", "how_to_get"]
