"""Builds an export with the build system its manifest declares, with a content-keyed cache.

The cache entry of an export is ``<cache>/builds/<export>-<hash>``, keyed by the hash of
its sources, so an unchanged export is never rebuilt. Runs of the same export can go in
parallel, so an entry is never built where it will be read: each build happens in a
private sibling folder that is renamed into place once complete (the first run to finish
wins; the others drop their copy and use it). CMake exports (``aidge_export_cpp``) are
configured out of tree there, so the export folder stays clean; Make exports (Cortex-M
BSPs), whose Makefiles build in place, are built in a private copy of the export. With an
explicit ``build_dir`` the build happens in that folder, in place.

Every build writes its full log to disk (and to ``<export>/export_log.log``, replaced
atomically, which the exporter's charts read for ``--print-memory-usage`` lines); a failure
quotes the compiler's last lines. Build commands run in their own process group registered
with the run (``runcontrol``): an interruption stops the compilers too.
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.artifact import export_hash, memory_peaks
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.connections.local_process import run_to_streams
from aidge_deploy.errors import BuildError, InternalError, MemoryFitError, PreflightError
from aidge_deploy.exportspec import Export
from aidge_deploy.filememo import FileMemo, Reads
from aidge_deploy.firmwareid import build_arguments
from aidge_deploy.lifecycle import BuildResult, BuildStatus, Toolchain
from aidge_deploy.pathsearch import which

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
    #: ``build_dir`` is a shared cache entry: build privately, then rename into place
    cache_entry: bool = False
    #: the export's content hash the plan was made for (hashed once per build)
    digest: str | None = None
    #: the compiler the caller chose (a cross toolchain behind a wrapper); None: the one
    #: the build system picked (CMake's cache says which)
    compiler: str | None = None

    def moved_to(self, build_dir: Path) -> BuildPlan:
        """The same plan building in ``build_dir`` instead (paths in the commands follow)."""
        old = str(self.build_dir)
        return dataclasses.replace(
            self,
            build_dir=build_dir,
            commands=tuple(
                tuple(str(build_dir) if word == old else word for word in command)
                for command in self.commands
            ),
            artifact_root=build_dir if self.artifact_root == self.build_dir else self.artifact_root,
            cache_entry=False,
        )


def plan_build(
    artifact: Export,
    build_dir: Path | None,
    *,
    jobs: int | None = None,
    cmake_args: Sequence[str] = (),
    toolchain_file: Path | None = None,
    cache_entry: bool | None = None,
    compiler: str | None = None,
) -> BuildPlan:
    """Plan the build; ``build_dir`` None means the export's entry of the build cache.

    ``cache_entry`` says whether ``build_dir`` is shared by runs (default: when it is the
    cache's own folder), so ``build_export`` builds privately and renames into place.
    ``compiler``: the compiler ``toolchain_file`` stands for (recorded as the build's).
    """
    manifest = artifact.manifest
    shared = build_dir is None if cache_entry is None else cache_entry
    digest = export_hash(artifact)
    entry = default_cache_root() / "builds" / f"{Path(artifact.path).name}-{digest[:16]}"
    jobs = jobs or os.cpu_count() or 1
    cmp_flag = "true" if manifest.aidge_cmp else "false"
    if manifest.build_system == "cmake":
        bdir = build_dir or entry
        configure = ["cmake", "-S", str(artifact.path), "-B", str(bdir), f"-DAIDGE_CMP={cmp_flag}"]
        # the program prints the export's hash at boot (firmwareid)
        configure += ["-DCMAKE_BUILD_TYPE=Release", *build_arguments("cmake", digest), *cmake_args]
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
            "cmake",
            artifact.path,
            bdir,
            (tuple(configure), tuple(build)),
            pattern,
            bdir,
            shared,
            digest,
            compiler,
        )
    if manifest.build_system == "make":
        bdir = build_dir or entry  # a copy of the export, built there
        make = (
            "make",
            "build",
            f"-j{jobs}",
            f"AIDGE_CMP={cmp_flag}",
            *build_arguments("make", digest),  # printed at boot by our boards' main()
        )
        return BuildPlan(
            "make",
            artifact.path,
            bdir,
            (make,),
            manifest.expected_artifact,
            bdir,
            shared,
            digest,
            compiler or _makefile_compiler(Path(artifact.path)),
        )
    raise BuildError(
        f"Unsupported build system {manifest.build_system!r} in {artifact.manifest_path}",
        hint="aidge-deploy builds 'cmake' and 'make' exports.",
    )


#: the GNU cross compilers the exporters' Makefiles name (the Cortex-M BSPs), with a
#: version suffix if any; the name ends where the next character cannot continue it
#: (``g++`` ends in no word character, so a ``\b`` cannot close it)
_MAKE_COMPILER = re.compile(
    r"\b((?:arm-none-eabi|riscv64-unknown-elf|riscv32-unknown-elf)-g(?:cc|\+\+)(?:-\d+)?)"
    r"(?![\w+.-])"
)
_CMAKE_COMPILER = re.compile(r"^CMAKE_CXX_COMPILER:[A-Z]+=(.+)$", re.MULTILINE)


#: what each Makefile names, kept while it is unchanged
_MAKEFILE_COMPILERS: FileMemo[str, str | None] = FileMemo()


def _makefile_compiler(export_dir: Path) -> str | None:
    """The cross compiler the export's Makefile names (``arm-none-eabi-gcc``), if any."""
    makefile = export_dir / "Makefile"
    return _MAKEFILE_COMPILERS.answer(str(makefile), lambda reads: _named_compiler(makefile, reads))


def _named_compiler(makefile: Path, reads: Reads) -> str | None:
    reads.sign(makefile)
    try:
        text = makefile.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _MAKE_COMPILER.search(text)
    return found.group(1) if found else None


def _build_toolchain(plan: BuildPlan, build_dir: Path) -> Toolchain:
    """The programs that ran this plan: the build tool and the compiler (the caller's, the
    one CMake's cache recorded, or the Makefile's)."""
    compiler = plan.compiler
    if compiler is None and plan.build_system == "cmake":
        try:
            found = _CMAKE_COMPILER.search((build_dir / "CMakeCache.txt").read_text("utf-8"))
        except OSError:
            found = None
        compiler = Path(found.group(1).strip()).name if found else "c++"
    return Toolchain(tuple(p for p in (plan.build_system, compiler) if p))


def find_artifacts(root: Path, pattern: str) -> tuple[Path, ...]:
    """Every file ``pattern`` matches under ``root``, sorted (a heterogeneous export's
    programs, one per core); ``find_artifact`` is the first."""
    if any(ch in pattern for ch in "*?["):
        matches = sorted(Path(p) for p in glob.glob(str(root / pattern), recursive=True))
        return tuple(m for m in matches if m.is_file())
    candidate = root / pattern
    return (candidate,) if candidate.is_file() else ()


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
    artifact: Export,
    plan: BuildPlan,
    log_path: Path,
    *,
    timeout_s: float = BUILD_TIMEOUT_S,
    env: dict[str, str] | None = None,
    keep_failed: bool = False,
) -> BuildResult:
    """Run the plan unless an identical build is already there; return the BuildResult.

    ``keep_failed`` (``keep_build_dir``): a failed build of a cache entry leaves its private
    build folder in place, and the error says where (else it is removed with the failure).
    """
    for tool in required_tools(plan.build_system)[:1]:
        if which(tool) is None:
            raise PreflightError(
                f"'{tool}' is not installed",
                hint=f"apt-get install --no-install-recommends {'cmake g++' if tool == 'cmake' else 'make'}",
            )
    digest = plan.digest or export_hash(artifact)
    peaks = memory_peaks(artifact)
    cached = _cached_build(plan, digest, peaks)
    if cached is not None:
        return cached
    started = time.perf_counter()
    if not plan.cache_entry:
        text, found, toolchain = _run_build(plan, digest, log_path, timeout_s, env)
    else:
        plan.build_dir.parent.mkdir(parents=True, exist_ok=True)
        _sweep_stale(plan.build_dir.parent)
        private = Path(
            tempfile.mkdtemp(
                prefix=f"{_PRIVATE_PREFIX}{plan.build_dir.name}-", dir=plan.build_dir.parent
            )
        )
        keep = False
        try:
            try:
                text, _, toolchain = _run_build(
                    plan.moved_to(private), digest, log_path, timeout_s, env
                )
            except BuildError as exc:
                if keep_failed:
                    keep = True
                    exc.hint = f"{exc.hint or ''} The failed build is kept in {private}.".strip()
                raise
            if not publish_build(private, plan.build_dir):
                # another run of the same export finished first: its build is identical
                done = _cached_build(plan, digest, peaks)
                if done is not None:
                    return dataclasses.replace(done, status=BuildStatus.BUILT, log=text)
                raise BuildError(
                    f"The build cache entry {plan.build_dir} exists but holds no complete build",
                    hint=f"Delete {plan.build_dir} and retry.",
                    log_path=log_path,
                )
        finally:
            if not keep:
                shutil.rmtree(private, ignore_errors=True)
        published = find_artifact(plan.artifact_root, plan.artifact_pattern)
        if published is None:  # checked in the private folder already
            raise BuildError(
                f"{plan.build_dir} lost its artifact", hint="Retry.", log_path=log_path
            )
        found = published
    if plan.build_system == "make":
        # the exporter's charts read --print-memory-usage lines from the export folder
        _write_atomically(Path(artifact.path) / "export_log.log", text)
    return BuildResult(
        artifact_path=found,
        mem_peaks=peaks,
        status=BuildStatus.BUILT,
        log=text,
        log_path=log_path,
        build_dir=plan.build_dir,
        duration_s=time.perf_counter() - started,
        toolchain=toolchain,
    )


def find_cached_build(artifact: Export, plan: BuildPlan) -> BuildResult | None:
    """What ``build_export`` would return without building: the cache's complete build of
    this export, or ``None`` (a run can then prepare its target with the firmware known)."""
    return _cached_build(plan, plan.digest or export_hash(artifact), memory_peaks(artifact))


def build_variant(
    base: BuildResult,
    name: str,
    command: Sequence[str],
    artifact: str,
    log_path: Path,
    *,
    digest: str,
    shared: bool,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> BuildResult:
    """A second firmware of a built Make export (the BSP's power variant, ``name``).

    ``command`` runs in a copy of the base build (objects and their times kept, so only
    what differs recompiles) that becomes the cache entry ``<base>-<name>`` by the same
    private-build-then-rename rule as ``build_export``; with ``shared`` False (an explicit
    ``build_dir``) it runs in place. ``artifact`` is relative to the build folder.
    """
    root = base.build_dir
    if root is None:
        raise InternalError("The base build has no build folder")
    final = root.parent / f"{root.name}-{name}" if shared else root
    stamp = _read_stamp(final / STAMP_NAME)
    if shared and stamp and stamp.get("export_hash") == digest and (final / artifact).is_file():
        return dataclasses.replace(
            base, artifact_path=final / artifact, status=BuildStatus.CACHED, build_dir=final
        )
    started = time.perf_counter()
    work = final
    if shared:
        _sweep_stale(root.parent)
        work = Path(tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{final.name}-", dir=root.parent))
        shutil.copytree(root, work, symlinks=True, dirs_exist_ok=True)
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w", encoding="utf-8") as log:
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            waited = run_to_streams(
                list(command), cwd=work, timeout_s=timeout_s, stdout=log, stderr=subprocess.STDOUT
            )
        if waited.timed_out or waited.returncode != 0 or not (work / artifact).is_file():
            raise BuildError(
                f"Building the {name} firmware failed ({' '.join(command[:2])}):\n"
                + _tail(log_path, 25),
                hint="The compiler's last lines are above; the full log is on disk.",
                log_path=log_path,
            )
        text = log_path.read_text(encoding="utf-8", errors="replace")
        if shared:
            _write_stamp(work / STAMP_NAME, digest, Path(artifact), log_path, text, base.toolchain)
            publish_build(work, final)  # a run that finished first left an identical firmware
    finally:
        if work != final:
            shutil.rmtree(work, ignore_errors=True)
    return BuildResult(
        artifact_path=final / artifact,
        mem_peaks=base.mem_peaks,
        status=BuildStatus.BUILT,
        log=text,
        log_path=log_path,
        build_dir=final,
        duration_s=time.perf_counter() - started,
        toolchain=base.toolchain,
    )


_PRIVATE_PREFIX = ".tmp-"
_STALE_AFTER_S = 24 * 3600.0


#: builds found complete in the cache, kept while their stamp and artifact are unchanged
_CACHED: FileMemo[tuple[str, str, tuple[int, ...], str, str], BuildResult | None] = FileMemo()


def _cached_build(plan: BuildPlan, digest: str, peaks: tuple[int, ...]) -> BuildResult | None:
    """The build of ``plan`` if the cache holds it complete (its stamp names this export
    hash and its artifact is there). Kept for the process while the stamp and the artifact
    are unchanged (``filememo``), when the artifact's name is not a pattern."""
    stamp_path = plan.build_dir / STAMP_NAME
    key = (str(stamp_path), digest, peaks, str(plan.artifact_root), plan.artifact_pattern)
    return _CACHED.answer(key, lambda reads: _cached_entry(plan, digest, peaks, reads))


def _cached_entry(
    plan: BuildPlan, digest: str, peaks: tuple[int, ...], reads: Reads
) -> BuildResult | None:
    stamp_path = plan.build_dir / STAMP_NAME
    reads.sign(stamp_path)
    if any(ch in plan.artifact_pattern for ch in "*?["):
        reads.forget()  # a folder's listing decides which artifact is found
    stamp = _read_stamp(stamp_path)
    if not stamp or stamp.get("export_hash") != digest:
        reads.forget()
        return None
    found = find_artifact(plan.artifact_root, plan.artifact_pattern)
    if found is None or found.relative_to(plan.build_dir).as_posix() != stamp.get("artifact"):
        reads.forget()
        return None
    reads.sign(found)
    return BuildResult(
        artifact_path=found,
        mem_peaks=peaks,
        status=BuildStatus.CACHED,
        log=stamp.get("log_tail", ""),
        log_path=Path(stamp["log_path"]) if stamp.get("log_path") else None,
        build_dir=plan.build_dir,
        toolchain=Toolchain(tuple(str(p) for p in stamp.get("toolchain") or ())),
    )


def _run_build(
    plan: BuildPlan, digest: str, log_path: Path, timeout_s: float, env: dict[str, str] | None
) -> tuple[str, Path, Toolchain]:
    """Run the plan's commands in ``plan.build_dir``; the log text, the artifact and the
    programs that built it."""
    if plan.build_system == "make" and plan.build_dir != plan.source_dir:
        shutil.copytree(plan.source_dir, plan.build_dir, dirs_exist_ok=True)
    plan.build_dir.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cwd = plan.build_dir if plan.build_system == "make" else plan.source_dir
    with log_path.open("w", encoding="utf-8") as log:
        for command in plan.commands:
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            try:
                waited = run_to_streams(
                    command,
                    cwd=cwd,
                    timeout_s=timeout_s,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            except (FileNotFoundError, PermissionError) as exc:
                raise PreflightError(
                    f"Build tool not found or not executable: {command[0]}",
                    hint="Run `aidge-deploy doctor` to see what is missing.",
                    log_path=log_path,
                ) from exc
            if waited.timed_out:
                raise BuildError(
                    f"Build step timed out after {timeout_s:.0f} s: {' '.join(command)}",
                    hint="Check the log for a stuck step; raise the timeout for very large models.",
                    log_path=log_path,
                )
            if waited.returncode != 0:
                log.flush()
                tail = _tail(log_path, 25)
                overflow = _region_overflow(log_path)
                if overflow is not None:
                    raise overflow
                raise BuildError(
                    f"Build failed ({' '.join(command[:2])} exited with {waited.returncode}):\n{tail}",
                    hint="The compiler's last lines are above; the full log is on disk.",
                    log_path=log_path,
                )
    text = log_path.read_text(encoding="utf-8", errors="replace")
    if plan.build_system == "make":
        (plan.build_dir / "export_log.log").write_text(text, encoding="utf-8")
    found = find_artifact(plan.artifact_root, plan.artifact_pattern)
    if found is None:
        raise BuildError(
            f"The build succeeded but produced no artifact matching "
            f"{plan.artifact_pattern!r} under {plan.artifact_root}",
            hint="The manifest's expected_artifact does not match what the build system makes.",
            log_path=log_path,
        )
    toolchain = _build_toolchain(plan, plan.build_dir)
    _write_stamp(
        plan.build_dir / STAMP_NAME,
        digest,
        found.relative_to(plan.build_dir),
        log_path,
        text,
        toolchain,
    )
    return text, found, toolchain


def publish_build(private: Path, final: Path) -> bool:
    """Rename the finished ``private`` folder to ``final``; False if ``final`` already exists."""
    if final.exists():
        if _read_stamp(final / STAMP_NAME) is not None:
            return False
        # a folder without a stamp: an older aidge-deploy's in-place build, or debris
        shutil.rmtree(final, ignore_errors=True)
    try:
        private.rename(final)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            return False
        raise
    return True


def _sweep_stale(parent: Path) -> None:
    """Remove private build folders left by runs that were killed (older than a day)."""
    now = time.time()
    for entry in parent.glob(f"{_PRIVATE_PREFIX}*"):
        try:
            if now - entry.stat().st_mtime > _STALE_AFTER_S:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


def _read_stamp(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _write_stamp(
    path: Path,
    digest: str,
    artifact: Path,
    log_path: Path,
    text: str,
    toolchain: Toolchain,
) -> None:
    """The stamp marks a complete build; ``artifact`` is relative (the folder is renamed)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "export_hash": digest,
                "artifact": artifact.as_posix(),
                "log_path": str(log_path),
                "log_tail": "\n".join(text.splitlines()[-20:]),
                "toolchain": list(toolchain.programs),
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    tmp.replace(path)
