"""Where a deployment lives on the board, and how long it stays there.

Why this module exists: the remote paths and the clean-up policy are one decision, made here.

Layout under the *root* (``ssh_remote_workdir`` when set, else ``~/.cache/aidge-deploy``)::

    exports/<export-name>-<id16>/      one folder per local export folder (id = hash of its path)
        src/                           mirror of the export (only changed files are sent)
        build/<location>/              CMake trees: "board", or "container-<image-hash>"
        bin/<toolchain-key>/           cross-built binary (cross_compile=True)
    tools/perf_run-<hash>/             the peak-RSS launcher, compiled once per source version

Clean-up policy (what "the remote workdir is cleaned" means):

* Default root: ``exports/<id>`` is a *cache*, kept after the run so that re-deploying an
  unchanged export uploads nothing and rebuilds nothing (a changed export sends only the
  changed files and CMake rebuilds incrementally). The cache is bounded: after each run
  the folders beyond the ``MAX_CACHED_EXPORTS`` most recently deployed are removed — except
  those used in the last ``IN_USE_MINUTES``, which parallel runs may be using. A run marks
  its folder in use (``touch_command``) when it starts.
* ``ssh_remote_workdir`` given: it is the user's scratch area; this run's ``exports/<id>``
  is removed after the run (nothing of the export stays behind), the small ``tools/`` stays.
* ``keep_build_dir=True``: nothing is removed or evicted (the paths are logged).

Containers are always removed (``--rm``, and ``docker rm -f`` after a failed run).
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
from dataclasses import dataclass
from pathlib import Path

DEFAULT_REMOTE_ROOT = ".cache/aidge-deploy"  # relative to the board user's home
MAX_CACHED_EXPORTS = 3
#: a cached export folder touched this recently may be in use by another run: never evicted
#: (longer than a build's timeout plus a run's)
IN_USE_MINUTES = 120


@dataclass(frozen=True)
class RemoteLayout:
    """Absolute POSIX paths of one deployment on the board."""

    root: str
    export_id: str
    user_workdir: bool  # the root came from ssh_remote_workdir

    @property
    def exports(self) -> str:
        return posixpath.join(self.root, "exports")

    @property
    def export_home(self) -> str:
        return posixpath.join(self.exports, self.export_id)

    @property
    def src(self) -> str:
        return posixpath.join(self.export_home, "src")

    def build_dir(self, location: str) -> str:
        return posixpath.join(self.export_home, "build", location)

    def bin_dir(self, toolchain_key: str) -> str:
        return posixpath.join(self.export_home, "bin", toolchain_key)

    @property
    def tools(self) -> str:
        return posixpath.join(self.root, "tools")

    def container_path(self, remote: str) -> str:
        """Where ``remote`` (under ``export_home``) appears inside a container (``/work``)."""
        rel = posixpath.relpath(remote, self.export_home)
        return "/work" if rel == "." else posixpath.join("/work", rel)


def export_id(export_dir: Path) -> str:
    """``<name>-<hash16>``: stable for one local export folder, whatever its content."""
    resolved = export_dir.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    return f"{resolved.name}-{digest}"


def remote_layout(home: str, workdir: str | None, export_dir: Path) -> RemoteLayout:
    """The layout for ``export_dir``; ``workdir`` relative paths are under ``home``."""
    if workdir:
        root = workdir if posixpath.isabs(workdir) else posixpath.join(home, workdir)
        return RemoteLayout(posixpath.normpath(root), export_id(export_dir), True)
    return RemoteLayout(posixpath.join(home, DEFAULT_REMOTE_ROOT), export_id(export_dir), False)


def touch_command(layout: RemoteLayout) -> str:
    """Shell line marking this export's folder as in use (its time orders the eviction)."""
    return f"mkdir -p {_q(layout.export_home)} && touch {_q(layout.export_home)}"


def eviction_command(layout: RemoteLayout, keep: int = MAX_CACHED_EXPORTS) -> str:
    """Shell line removing all but the ``keep`` most recently used export caches.

    The current export is touched first, so it is never the one evicted; nor is any folder
    used in the last ``IN_USE_MINUTES`` (another run — another process, another machine —
    may be uploading to it or running from it right now).
    """
    exports = layout.exports
    return (
        f"touch {_q(layout.export_home)} 2>/dev/null; cd {_q(exports)} 2>/dev/null || exit 0; "
        f"ls -1t | tail -n +{keep + 1} | while IFS= read -r old; do "
        f'[ -n "$(find "$old" -maxdepth 0 -mmin -{IN_USE_MINUTES} 2>/dev/null)" ] && continue; '
        'chmod -R u+w -- "$old" 2>/dev/null; rm -rf -- "$old"; done; true'
    )


def _q(path: str) -> str:
    return shlex.quote(path)


__all__ = [
    "DEFAULT_REMOTE_ROOT",
    "MAX_CACHED_EXPORTS",
    "RemoteLayout",
    "eviction_command",
    "export_id",
    "remote_layout",
    "touch_command",
]
