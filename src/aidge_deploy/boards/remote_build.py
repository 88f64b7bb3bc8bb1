"""CMake builds of an export away from this machine's OS (a board, a container), with a stamp.

Why this module exists: a remote build must run the *same* configure and build commands as a
local one (``buildsys.plan_build`` is the single source of them), only with board paths, the
board's core count and without the export's cross toolchain file (on the board the build is
native). A stamp holding the export's content hash and the build location sits next to the
artifact, so an unchanged export is recognised as built with one cheap remote check and
never rebuilt.

The firmware identity (``firmwareid``) goes along: the configure line's CMake script is a
file of this machine, so the build line first writes its text into the build folder on the
board (or in the container) and the configure includes that copy, with the export's hash.
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
from aidge_deploy.firmwareid import CMAKE_VARIABLE, cmake_script

CACHED_MARK = "AIDGE_DEPLOY_BUILD_CACHED"
_JOBS_PLACEHOLDER = 987_654_321  # replaced by the board's `nproc` in the shell line


@dataclass(frozen=True)
class RemoteBuildPlan:
    """Shell lines building one export at one place on the board."""

    check_line: str  # prints CACHED_MARK when the stamped artifact is already there
    build_line: str  # configure + build + stamp (run on the board or inside a container)
    artifact: str  # where the artifact will be, in the paths ``build_line`` uses
    stamp: str


#: the firmware identity's CMake script, as the build line writes it into the build folder
IDENTITY_SCRIPT = "aidge_firmware_id.cmake"
_HASH_ARG = f"-D{CMAKE_VARIABLE}="
_INCLUDE_ARG = "-DCMAKE_PROJECT_INCLUDE="


def _for_board(command: Sequence[str], export_hash: str, script: str) -> list[str]:
    """A local configure or build command as the board runs it: no cross toolchain file (the
    board builds natively), the identity script's copy on the board, this export's hash."""
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
            continue
        if arg == "--toolchain":
            skip = True  # the export's file names a cross compiler
            continue
        if arg.startswith(_HASH_ARG):
            arg = _HASH_ARG + export_hash
        elif arg.startswith(_INCLUDE_ARG):
            arg = _INCLUDE_ARG + script
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
    script = posixpath.join(build_dir, IDENTITY_SCRIPT)
    commands = [_for_board(c, export_hash, script) for c in plan.commands]
    artifact_path = posixpath.join(build_dir, plan.artifact_pattern)
    # "identity": a build stamped before programs printed their hash is rebuilt once
    stamp_text = json.dumps(
        {"export_hash": export_hash, "location": location, "identity": 1}, sort_keys=True
    )
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
            f"printf '%s' {shlex.quote(cmake_script().read_text(encoding='utf-8'))} "
            f"> {shlex.quote(script)}",
            *(_shell(c) for c in commands),
            f"[ -x {shlex.quote(artifact_path)} ]",
            f"printf '%s' {shlex.quote(stamp_text)} > {shlex.quote(stamp)}",
        ]
    )
    return RemoteBuildPlan(check, build, artifact_path, stamp)


__all__ = ["CACHED_MARK", "RemoteBuildPlan", "plan_remote_build"]
