"""The size budgets of a farm agent's caches: least recently used entries go first.

An agent keeps what saves time on its next jobs — each built export (``work/exports``),
and the deploy's build cache (``<cache>/builds``, its own: the agent points its jobs'
``AIDGE_DEPLOY_CACHE_DIR`` at ``work/cache`` unless told otherwise). Uploads are bounded
by the service, but many distinct exports would still fill the disk: after each job,
every cache is brought back under its budget by removing the entries used longest ago
(an entry's use is its folder's modification time, which the agent refreshes when a job
reuses it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path


def tree_size(path: Path) -> int:
    """Bytes of the regular files under ``path`` (links not followed)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += st.st_size
    return total


def touch(path: Path) -> None:
    """Mark a cache entry as used now."""
    with contextlib.suppress(OSError):
        os.utime(path, None)


@dataclass(frozen=True)
class Pruned:
    removed: tuple[Path, ...]
    #: the cache's size once within its budget
    size: int


def prune(folder: Path, budget: int, *, keep: frozenset[str] = frozenset()) -> Pruned:
    """Remove the least recently used entries of ``folder`` until it holds at most
    ``budget`` bytes (entries named in ``keep``, in use by a running job, stay)."""
    if not folder.is_dir():
        return Pruned((), 0)
    entries = []
    for entry in folder.iterdir():
        if entry.name.startswith("."):  # a private temporary entry being written
            continue
        try:
            used = entry.lstat().st_mtime
        except OSError:
            continue
        entries.append((used, entry, tree_size(entry)))
    total = sum(size for _, _, size in entries)
    removed = []
    for _used, entry, size in sorted(entries, key=lambda e: e[0]):
        if total <= budget:
            break
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        total -= size
        removed.append(entry)
    return Pruned(tuple(removed), total)


__all__ = ["Pruned", "prune", "touch", "tree_size"]
