"""Builds an export with the build system its manifest declares, with a content-keyed cache.

CMake exports (``aidge_export_cpp``) are configured out of tree in a build directory keyed
by the export's source hash, so an unchanged export is never rebuilt and the export folder
stays clean. Make exports (Cortex-M BSPs) build in place, as their Makefiles expect. Every
build writes its full log to disk (and to ``<export>/export_log.log``, which the exporter's
charts read for ``--print-memory-usage`` lines); a failure quotes the compiler's last lines.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aidge_core.export_utils import ExportArtifact

from aidge_deploy.artifact import export_hash, memory_peaks
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.errors import BuildError, MemoryFitError, PreflightError
from aidge_deploy.results import BuildResult, BuildStatus

STAMP_NAME = ".aidge-deploy-build.json"
BUILD_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class BuildPlan:
    """What to run to build one export, and where the artifact will be."""

    build_system: str
    source_dir: Path
    build_dir: Path
    commands: tuple[tuple[str, ...], ...]
    artifact_pattern: str  # relative to build_dir's artifact root, may be a glob
    artifact_root: Path


def plan_build(
    artifact: ExportArtifact,
    build_dir: Path | None,
    *,
    jobs: int | None = None,
    cmake_args: Sequence[str] = (),
    toolchain_file: Path | None = None,
) -> BuildPlan:
    manifest = artifact.manifest
    jobs = jobs or os.cpu_count() or 1
    cmp_flag = "true" if manifest.aidge_cmp else "false"
    if manifest.build_system == "cmake":
        digest = export_hash(artifact)
        bdir = (
            build_dir
            or default_cache_root() / "builds" / f"{Path(artifact.path).name}-{digest[:16]}"
        )
        configure = ["cmake", "-S", str(artifact.path), "-B", str(bdir), f"-DAIDGE_CMP={cmp_flag}"]
        configure += ["-DCMAKE_BUILD_TYPE=Release", *cmake_args]
        if toolchain_file is not None:
            configure += ["--toolchain", str(toolchain_file)]
        elif manifest.arch:
            configure += [
                "--toolchain",
                str(artifact.path / "cmake" / f"{manifest.arch}.toolchain"),
            ]
        build = ["cmake", "--build", str(bdir), "--parallel", str(jobs)]
        # expected_artifact is relative to the export ("build/run_export"): our build dir
        # replaces its first component.
        rel = Path(manifest.expected_artifact)
        pattern = str(Path(*rel.parts[1:])) if rel.parts and rel.parts[0] == "build" else str(rel)
        return BuildPlan(
            "cmake", artifact.path, bdir, (tuple(configure), tuple(build)), pattern, bdir
        )
    if manifest.build_system == "make":
        bdir = build_dir or artifact.path
        make = ("make", "build", f"-j{jobs}", f"AIDGE_CMP={cmp_flag}")
        return BuildPlan("make", artifact.path, bdir, (make,), manifest.expected_artifact, bdir)
    raise BuildError(
        f"Unsupported build system {manifest.build_system!r} in {artifact.manifest_path}",
        hint="aidge-deploy builds 'cmake' and 'make' exports.",
    )


def find_artifact(root: Path, pattern: str) -> Path | None:
    if any(ch in pattern for ch in "*?["):
        matches = sorted(Path(p) for p in glob.glob(str(root / pattern), recursive=True))
        matches = [m for m in matches if m.is_file()]
        return matches[0] if matches else None
    candidate = root / pattern
    return candidate if candidate.is_file() else None


def required_tools(build_system: str) -> tuple[str, ...]:
    return ("cmake", "c++") if build_system == "cmake" else ("make",)


def build_export(
    artifact: ExportArtifact,
    plan: BuildPlan,
    log_path: Path,
    *,
    timeout_s: float = BUILD_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> BuildResult:
    """Run the plan unless an identical build is already there; return the BuildResult."""
    for tool in required_tools(plan.build_system)[:1]:
        if shutil.which(tool) is None:
            raise PreflightError(
                f"'{tool}' is not installed",
                hint=f"apt-get install --no-install-recommends {'cmake g++' if tool == 'cmake' else 'make'}",
            )
    digest = export_hash(artifact)
    peaks = memory_peaks(artifact)
    stamp = plan.build_dir / STAMP_NAME
    cached = _read_stamp(stamp)
    if cached and cached.get("export_hash") == digest:
        found = find_artifact(plan.artifact_root, plan.artifact_pattern)
        if found is not None and str(found) == cached.get("artifact"):
            return BuildResult(
                artifact_path=found,
                mem_peaks=peaks,
                status=BuildStatus.CACHED,
                log=cached.get("log_tail", ""),
                log_path=Path(cached["log_path"]) if cached.get("log_path") else None,
                build_dir=plan.build_dir,
            )
    if plan.build_system == "make" and plan.build_dir != plan.source_dir:
        shutil.copytree(plan.source_dir, plan.build_dir, dirs_exist_ok=True)
    plan.build_dir.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    cwd = plan.build_dir if plan.build_system == "make" else plan.source_dir
    with log_path.open("w", encoding="utf-8") as log:
        for command in plan.commands:
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            try:
                proc = subprocess.run(
                    command,
                    cwd=cwd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                    env={**os.environ, **(env or {})},
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise BuildError(
                    f"Build step timed out after {timeout_s:.0f} s: {' '.join(command)}",
                    hint="Check the log for a stuck step; raise the timeout for very large models.",
                    log_path=log_path,
                ) from exc
            except FileNotFoundError as exc:
                raise PreflightError(
                    f"Build tool not found: {command[0]}",
                    hint="Run `aidge-deploy doctor` to see what is missing.",
                    log_path=log_path,
                ) from exc
            if proc.returncode != 0:
                log.flush()
                tail = _tail(log_path, 25)
                overflow = _region_overflow(log_path)
                if overflow is not None:
                    raise overflow
                raise BuildError(
                    f"Build failed ({' '.join(command[:2])} exited with {proc.returncode}):\n{tail}",
                    hint="The compiler's last lines are above; the full log is on disk.",
                    log_path=log_path,
                )
    text = log_path.read_text(encoding="utf-8", errors="replace")
    export_log = plan.build_dir / "export_log.log" if plan.build_system == "make" else None
    if export_log is not None:
        export_log.write_text(text, encoding="utf-8")
    found = find_artifact(plan.artifact_root, plan.artifact_pattern)
    if found is None:
        raise BuildError(
            f"The build succeeded but produced no artifact matching "
            f"{plan.artifact_pattern!r} under {plan.artifact_root}",
            hint="The manifest's expected_artifact does not match what the build system makes.",
            log_path=log_path,
        )
    _write_stamp(stamp, digest, found, log_path, text)
    return BuildResult(
        artifact_path=found,
        mem_peaks=peaks,
        status=BuildStatus.BUILT,
        log=text,
        log_path=log_path,
        build_dir=plan.build_dir,
        duration_s=time.perf_counter() - started,
    )


_OVERFLOW = re.compile(r"region [`'\"]?([\w.]+)[`'\"]? overflowed by (\d+) bytes")


def _region_overflow(log_path: Path) -> MemoryFitError | None:
    """The linker's own verdict when the firmware does not fit a memory region."""
    found = _OVERFLOW.findall(log_path.read_text(encoding="utf-8", errors="replace"))
    if not found:
        return None
    worst: dict[str, int] = {}
    for region, amount in found:
        worst[region] = max(worst.get(region, 0), int(amount))
    parts = ", ".join(f"{region} overflowed by {amount} B" for region, amount in worst.items())
    return MemoryFitError(
        f"The firmware does not fit the board's memory: the linker reports {parts}",
        hint="Use a smaller model, quantise it (--dtype int8), or pick a board with more "
        "memory; nothing was flashed.",
        log_path=log_path,
    )


def _tail(path: Path, n: int) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(lines[-n:])


def _read_stamp(path: Path) -> dict[str, str] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _write_stamp(path: Path, digest: str, artifact: Path, log_path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "export_hash": digest,
                "artifact": str(artifact),
                "log_path": str(log_path),
                "log_tail": "\n".join(text.splitlines()[-20:]),
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    tmp.replace(path)
