"""Where aidge-deploy keeps what it writes for itself: builds, run logs, tools, hashes.

A leaf module (standard library only): the manifest loader, the build system, the tool
cache and the CLI all need the cache root, and none of them should import another for it.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_root() -> Path:
    """``$AIDGE_DEPLOY_CACHE_DIR``, else ``$XDG_CACHE_HOME/aidge-deploy``, else ``~/.cache/aidge-deploy``."""
    base = os.environ.get("AIDGE_DEPLOY_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "aidge-deploy"
