"""CMake builds of an export away from this machine's OS (a board, a container), with a stamp.

Why this module exists: a remote build must run the *same* configure and build commands as a
local one (``buildsys.plan_build`` is the single source of them), only with board paths, the
board's core count and without the export's cross toolchain file (on the board the build is
native). A stamp holding the export's content hash and the build location sits next to the
artifact, so an unchanged export is recognised as built with one cheap remote check and
never rebuilt.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.buildsys import STAMP_NAME, plan_build
from aidge_deploy.errors import BuildError
from aidge_deploy.exportspec import Export
from aidge_deploy.firmwareid import CMAKE_VARIABLE

CACHED_MARK = "AIDGE_DEPLOY_BUILD_CACHED"
_JOBS_PLACEHOLDER = 987_654_321  # replaced by the board's `nproc` in the shell line


@dataclass(frozen=True)
class RemoteBuildPlan:
    """Shell lines building one export at one place on the board."""

    check_line: str  # prints CACHED_MARK when the stamped artifact is already there
    build_line: str  # configure + build + stamp (run on the board or inside a container)
    artifact: str  # where the artifact will be, in the paths ``build_line`` uses
    stamp: str


#: configure arguments of a local build that name files of this machine: the firmware
#: identity's CMake script (``firmwareid``; a remote build's program prints no hash, and its
#: run is said to be unverified)
_LOCAL_ONLY = (f"-D{CMAKE_VARIABLE}=", "-DCMAKE_PROJECT_INCLUDE=")


def _drop_toolchain(command: Sequence[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
            continue
        if arg == "--toolchain":
            skip = True  # the board builds natively; the export's file names a cross compiler
            continue
        if arg.startswith(_LOCAL_ONLY):
            continue
        out.append(arg)
    return out


def _shell(command: Sequence[str]) -> str:
    words = []
    for arg in command:
        if arg == str(_JOBS_PLACEHOLDER):
            words.append('"$(nproc 2>/dev/null || echo 2)"')
        else:
            words.append(shlex.quote(arg))
    return " ".join(words)


def plan_remote_build(
    artifact: Export,
    *,
    src: str,
    build_dir: str,
    export_hash: str,
    location: str,
    jobs: int | None,
    check_paths: tuple[str, str] | None = None,
) -> RemoteBuildPlan:
    """Plan the build of ``artifact`` uploaded at ``src`` into ``build_dir`` (board paths).

    ``check_paths`` = (build_dir, src) as seen from the board's shell when the build itself
    runs elsewhere (inside a container, where ``src``/``build_dir`` are container paths).
    """
    if artifact.manifest.build_system != "cmake":
        raise BuildError(
            f"Remote builds support CMake exports; this export uses "
            f"{artifact.manifest.build_system!r}",
            hint="Linux boards run aidge_export_cpp exports (CMake); re-export for the board.",
        )
    remote = dataclasses.replace(artifact, path=Path(src))
    plan = plan_build(remote, Path(build_dir), jobs=jobs or _JOBS_PLACEHOLDER)
    commands = [_drop_toolchain(c) for c in plan.commands]
    artifact_path = posixpath.join(build_dir, plan.artifact_pattern)
    stamp_text = json.dumps({"export_hash": export_hash, "location": location}, sort_keys=True)
    stamp = posixpath.join(build_dir, STAMP_NAME)
    host_build = check_paths[0] if check_paths else build_dir
    host_artifact = posixpath.join(host_build, plan.artifact_pattern)
    host_stamp = posixpath.join(host_build, STAMP_NAME)
    check = (
        f"[ -x {shlex.quote(host_artifact)} ] && "
        f'[ "$(cat {shlex.quote(host_stamp)} 2>/dev/null)" = {shlex.quote(stamp_text)} ] '
        f"&& echo {CACHED_MARK}; true"
    )
    build = " && ".join(
        [
            f"mkdir -p {shlex.quote(build_dir)}",
            f"rm -f {shlex.quote(stamp)}",
            *(_shell(c) for c in commands),
            f"[ -x {shlex.quote(artifact_path)} ]",
            f"printf '%s' {shlex.quote(stamp_text)} > {shlex.quote(stamp)}",
        ]
    )
    return RemoteBuildPlan(check, build, artifact_path, stamp)


__all__ = ["CACHED_MARK", "RemoteBuildPlan", "plan_remote_build"]
