"""The peak-RSS launcher (``perf_run``) on the board: compile or cross-compile it, cache it there.

Why this module exists: peak RSS must be measured *on the board*, around the program only.
The ``perf_run`` launcher (shipped as C, see ``profiling.native``) does that with ``wait4``.
It is compiled on the board with its own ``cc``/``gcc`` (static when the board has a static
libc, so it also runs inside containers) when building remotely, or cross-compiled
``-static`` here when cross-compiling; it is cached on the board by source hash. When
neither works the deploy still runs, without the launcher, and the reason is kept so the
result says why peak RSS is unavailable instead of silently omitting it.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.boards.sbc.toolchains import CrossToolchain
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.connections.ssh import SshConnection
from aidge_deploy.errors import DeployError
from aidge_deploy.profiling.native import (
    ensure_launcher,
    perf_run_source,
)

_log = logging.getLogger(__name__)
LAUNCHER_NAME = "perf_run"
_KIND_FILE = "perf_run.kind"  # "static" or "dynamic", written next to the board-built launcher
_PROBE_TIMEOUT_S = 30.0
_COMPILE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class BoardLauncher:
    """The launcher on the board, or why there is none."""

    path: str | None
    static: bool = False
    unavailable_reason: str | None = None

    @property
    def usable(self) -> bool:
        return self.path is not None


def _source_hash() -> str:
    return hashlib.sha256(perf_run_source().read_bytes()).hexdigest()[:12]


def staging_dir(name: str, payload: Path) -> Path:
    """A local folder holding only ``payload`` (``upload_dir`` mirrors folders)."""
    stage = default_cache_root() / "tools" / "stage" / name
    stage.mkdir(parents=True, exist_ok=True)
    dest = stage / payload.name
    if not dest.is_file() or dest.read_bytes() != payload.read_bytes():
        shutil.copy2(payload, dest)
    return stage


def board_built_launcher(conn: SshConnection, tools_root: str, log_dir: Path) -> BoardLauncher:
    """Compile ``perf_run.c`` on the board (once per source version) and return its path."""
    folder = posixpath.join(tools_root, f"perf_run-{_source_hash()}")
    binary = posixpath.join(folder, LAUNCHER_NAME)
    kind_file = posixpath.join(folder, _KIND_FILE)
    probe = conn.run(
        f"[ -x {shlex.quote(binary)} ] && cat {shlex.quote(kind_file)}",
        timeout_s=_PROBE_TIMEOUT_S,
    )
    if probe.ok and probe.stdout.strip() in ("static", "dynamic"):
        return BoardLauncher(binary, static=probe.stdout.strip() == "static")
    conn.upload_dir(staging_dir("perf_run-src", perf_run_source()), folder)
    # Static first (runs in any container); dynamic when the board lacks libc.a.
    script = (
        "cc=$(command -v cc || command -v gcc) || { echo 'no C compiler (cc/gcc)' >&2; exit 3; }; "
        f'if "$cc" -O2 -static -o {LAUNCHER_NAME}.tmp perf_run.c; then kind=static; '
        f'elif "$cc" -O2 -o {LAUNCHER_NAME}.tmp perf_run.c; then kind=dynamic; '
        "else exit 4; fi; "
        f"mv {LAUNCHER_NAME}.tmp {LAUNCHER_NAME} && echo $kind > {_KIND_FILE} && echo $kind"
    )
    done = conn.run(
        script, timeout_s=_COMPILE_TIMEOUT_S, cwd=folder, log_path=log_dir / "launcher-build.log"
    )
    if not done.ok:
        tail = " ".join(done.stderr.strip().splitlines()[-2:]) or f"exit {done.exit_status}"
        reason = f"the perf_run launcher could not be compiled on the board: {tail}"
        _log.warning("Peak RSS unavailable: %s", reason)
        return BoardLauncher(None, unavailable_reason=reason)
    return BoardLauncher(binary, static=done.stdout.strip() == "static")


def cross_built_launcher(
    conn: SshConnection, toolchain: CrossToolchain, tools_root: str
) -> BoardLauncher:
    """Cross-compile ``perf_run`` ``-static`` here and upload it (unchanged: nothing sent)."""
    cc = shutil.which(toolchain.cc)
    if cc is None:
        reason = f"no {toolchain.cc} on this machine to cross-compile the perf_run launcher"
        _log.warning("Peak RSS unavailable: %s", reason)
        return BoardLauncher(None, unavailable_reason=reason)
    try:
        local = ensure_launcher(cc, static=True)
    except DeployError as exc:
        reason = f"cross-compiling the perf_run launcher failed: {exc.message}"
        _log.warning("Peak RSS unavailable: %s", reason)
        return BoardLauncher(None, unavailable_reason=reason)
    folder = posixpath.join(tools_root, f"perf_run-{toolchain.name}-{local.name}")
    stage = staging_dir(f"{toolchain.name}-{local.name}", local)
    conn.upload_dir(stage, folder)
    return BoardLauncher(posixpath.join(folder, local.name), static=True)


__all__ = [
    "LAUNCHER_NAME",
    "BoardLauncher",
    "board_built_launcher",
    "cross_built_launcher",
    "staging_dir",
]
