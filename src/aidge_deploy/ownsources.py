"""A digest of our own code that shapes what a run produces, for the caches keyed on it.

Why this module exists: the export cache and the kept hardware facts are reused across
runs and keyed on package versions, but a source checkout changes without a version bump.
The emulated boards' plug-in (BSPs, hardware model), the board descriptors its hardware
model is built from, and ``modelexport`` (the sample inputs) are digested here, located
without being imported (``aidge_qemu_boards`` imports Aidge's Cortex-M exporter), so that a
change there never reuses what older code produced.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import cache
from pathlib import Path

#: our packages that shape an export and a board's hardware facts
OWN_PACKAGES = ("aidge_qemu_boards", "aidge_qemu_descriptors")


def package_dirs(name: str) -> list[str]:
    """The folders of package ``name``, found without importing it."""
    spec = importlib.util.find_spec(name)
    return list(spec.submodule_search_locations or []) if spec is not None else []


@cache
def own_sources_digest() -> str:
    """Hex digest of every file of ``OWN_PACKAGES`` and of ``modelexport.py`` (once per
    process)."""
    digest = hashlib.sha256()
    roots = [Path(p) for name in OWN_PACKAGES for p in package_dirs(name)]
    files = [Path(p) / "modelexport.py" for p in package_dirs("aidge_deploy")]
    for root in roots:
        files += sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


__all__ = ["OWN_PACKAGES", "own_sources_digest", "package_dirs"]
