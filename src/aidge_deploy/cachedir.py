"""Where aidge-deploy keeps what it writes for itself: builds, run logs, tools, hashes.

A leaf module (standard library only): the manifest loader, the build system, the tool
cache and the CLI all need the cache root, and none of them should import another for it.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path


def default_cache_root() -> Path:
    """``$AIDGE_DEPLOY_CACHE_DIR``, else ``$XDG_CACHE_HOME/aidge-deploy``, else ``~/.cache/aidge-deploy``."""
    env = os.environ
    return _cache_root(
        env.get("AIDGE_DEPLOY_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME")
    )


@functools.lru_cache(maxsize=8)
def _cache_root(base: str | None, xdg: str | None, home: str | None) -> Path:
    # asked several times per run: the answer is kept per value of the variables it reads
    if base:
        return Path(base)
    return (Path(xdg) if xdg else Path.home() / ".cache") / "aidge-deploy"
