"""The build and transfer steps of an SSH board: upload, build there (or here), provision.

Why this module exists: building is the longest part of ``SbcSshTarget``: upload the export
(only changed files), build it on the board or in the container unless the stamped build is
already there, or cross-build here with the board's toolchain; then upload the binary and
provision the ``perf_run`` launcher. Mixed into ``SbcSshTarget`` (``base``).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import shlex
import shutil
from pathlib import Path

from aidge_deploy.artifact import export_hash, memory_peaks
from aidge_deploy.boards.container import (
    BuildLocation,
    container_name,
    docker_failure,
    image_key,
)
from aidge_deploy.boards.remote_build import CACHED_MARK, plan_remote_build
from aidge_deploy.boards.sbc.launcher import (
    BoardLauncher,
    board_built_launcher,
    cross_built_launcher,
)
from aidge_deploy.boards.sbc.session import SHORT_TIMEOUT_S, SbcSession
from aidge_deploy.boards.sbc.toolchains import write_toolchain_file
from aidge_deploy.buildsys import BUILD_TIMEOUT_S, build_export, plan_build
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.connections.ssh_exec import RemoteRunResult
from aidge_deploy.connections.ssh_transfer import DEFAULT_EXCLUDE, TransferReport
from aidge_deploy.errors import BuildError, DeployError, TransferError
from aidge_deploy.results import BuildResult, BuildStatus, DeployContext, Toolchain

#: local files never uploaded: build outputs and logs of earlier local builds
UPLOAD_EXCLUDE = (
    *DEFAULT_EXCLUDE,
    "build",
    "bin",
    "obj",
    "export_log.log",
    "uart_output.txt",
    ".aidge-deploy-build.json",
    "*.o",
    "*.elf",
)
_CMAKE_PERCENT = re.compile(r"^\[\s*(\d+)%\]")


class SbcBuildSteps(SbcSession):
    """``build_remote``, ``build`` (cross-compile) and ``transfer`` of ``SbcSshTarget``."""

    def _upload_dir(self, stage: str, local: Path, remote: str, what: str) -> TransferReport:
        sent = [0]

        def on_file(rel: str, size: int) -> None:
            sent[0] += 1
            self._report(stage, f"uploaded {rel} ({size} B)", completed=sent[0], unit="files")

        self._report(stage, f"uploading {what} to {self.conn.target}:{remote}")
        self._ensure_remote_dir(remote)
        report = self.conn.upload_dir(local, remote, exclude=UPLOAD_EXCLUDE, on_file=on_file)
        self._report(
            stage,
            f"upload: {report.files_sent} file(s) sent ({report.bytes_sent} B), "
            f"{report.files_unchanged} unchanged",
            completed=report.files_sent,
            total=report.files_sent,
            unit="files",
        )
        return report

    def _ensure_remote_dir(self, remote: str) -> None:
        """Create ``remote`` with the board's shell: its message names the real cause."""
        made = self.conn.run(f"mkdir -p -- {shlex.quote(remote)}", timeout_s=SHORT_TIMEOUT_S)
        if made.ok:
            return
        reason = made.stderr.strip().splitlines()[-1] if made.stderr.strip() else ""
        parent = posixpath.dirname(remote.rstrip("/")) or "/"
        denied = "permission denied" in reason.lower() or "read-only" in reason.lower()
        raise TransferError(
            f"{'Permission denied' if denied else 'Cannot create the folder'}: the board user "
            f"cannot create {remote} on {self.conn.target} ({reason or made.exit_status})",
            hint=f"Check `ls -ld {parent}` and `df -h {parent}` on the board; pick a folder the "
            "user owns (ssh_remote_workdir, default ~/.cache/aidge-deploy) or fix ownership "
            "(sudo chown -R <user> <dir>).",
            stage="transfer",
        )

    def build_remote(self, ctx: DeployContext) -> BuildResult:
        layout = self.layout
        self._upload = self._upload_dir("Build", ctx.export_dir, layout.src, "the export")
        digest = export_hash(ctx.artifact)
        if self._location == BuildLocation.CONTAINER:
            location = f"container-{image_key(str(self._image_id))}"
            host_build = layout.build_dir(location)
            plan = plan_remote_build(
                ctx.artifact,
                src=layout.container_path(layout.src),
                build_dir=layout.container_path(host_build),
                export_hash=digest,
                location=location,
                jobs=self.config.build_jobs,
                check_paths=(host_build, layout.src),
            )
            host_artifact = posixpath.join(
                layout.export_home, posixpath.relpath(plan.artifact, "/work")
            )
            where = f"in container {self.config.docker.image} on {self.conn.target}"
        else:
            location = "board"
            plan = plan_remote_build(
                ctx.artifact,
                src=layout.src,
                build_dir=layout.build_dir(location),
                export_hash=digest,
                location=location,
                jobs=self.config.build_jobs,
            )
            host_artifact = plan.artifact
            where = f"on {self.conn.target}"
        log_path = ctx.log_dir / "build.log"
        check = self.conn.run(plan.check_line, timeout_s=SHORT_TIMEOUT_S)
        self._program = host_artifact
        if CACHED_MARK in check.stdout:
            self._report("Build", f"unchanged export: reusing the build {where}")
            log_path.write_text(f"# built {where}: cached ({plan.stamp})\n", encoding="utf-8")
            return self._build_result(ctx, host_artifact, BuildStatus.CACHED, where, log_path, 0.0)
        self._report("Build", f"building {where}")
        command = plan.build_line
        name: str | None = None
        if self._location == BuildLocation.CONTAINER:
            name = container_name()
            command = self._container_command(plan.build_line, workdir="/work", name=name)
        try:
            result = self.conn.run(
                command,
                timeout_s=BUILD_TIMEOUT_S,
                log_path=log_path,
                stdout_sink=self._build_progress,
            )
        except (DeployError, KeyboardInterrupt):  # KeyboardInterrupt: also RunInterrupted
            if name is not None:
                self._remove_container(name)
            raise
        if not result.ok:
            self._raise_build_failure(result, where, log_path)
        return self._build_result(
            ctx, host_artifact, BuildStatus.BUILT, where, log_path, result.duration_s
        )

    def _build_progress(self, line: str) -> None:
        match = _CMAKE_PERCENT.match(line)
        if match:
            self._report(
                "Build", line.strip()[:120], completed=int(match.group(1)), total=100, unit="%"
            )

    def _raise_build_failure(self, result: RemoteRunResult, where: str, log_path: Path) -> None:
        if self._location == BuildLocation.CONTAINER:
            error = docker_failure(
                result.exit_status,
                result.stderr,
                image=str(self.config.docker.image),
                where=f"on {self.conn.target}",
                doing="building the export",
                log_path=log_path,
            )
            if error is not None:
                raise error
        if result.timed_out:
            raise BuildError(
                f"The build {where} did not finish within {BUILD_TIMEOUT_S:.0f} s",
                hint="Check the log for a stuck step; the board may be swapping (free -h).",
                log_path=log_path,
            )
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        missing = "cmake: not found" in result.stderr or "cmake: command not found" in result.stderr
        raise BuildError(
            f"Build {where} failed (exit {result.exit_status}):\n{tail}",
            hint="Install cmake and g++ on the board (apt-get install cmake g++), or build "
            "locally with cross_compile=True."
            if missing
            else "The compiler's last lines are above; the full log is on disk.",
            log_path=log_path,
        )

    def _build_result(
        self,
        ctx: DeployContext,
        artifact: str,
        status: BuildStatus,
        where: str,
        log_path: Path,
        duration: float,
    ) -> BuildResult:
        text = log_path.read_text(encoding="utf-8", errors="replace")
        return BuildResult(
            artifact_path=Path(artifact),
            mem_peaks=memory_peaks(ctx.artifact),
            status=status,
            log=f"aidge-deploy: built {where} ({self._location.value})\n{text}",
            log_path=log_path,
            build_dir=Path(posixpath.dirname(artifact)),
            duration_s=duration,
            toolchain=Toolchain(("cmake", "c++"), elsewhere=where),
        )

    def build(self, ctx: DeployContext) -> BuildResult:
        """``cross_compile=True``: build here with the board's toolchain (static binary)."""
        tc = self.toolchain
        digest = export_hash(ctx.artifact)
        base = self.config.build_dir or default_cache_root() / "builds"
        build_dir = base / f"{ctx.export_dir.name}-{digest[:16]}-{tc.key}"
        toolchain_file = write_toolchain_file(tc, build_dir.parent / f".toolchains-{tc.key}")
        plan = plan_build(
            ctx.artifact,
            build_dir,
            jobs=self.config.build_jobs,
            toolchain_file=toolchain_file,
            compiler=tc.cxx,
        )
        self._report("Build", f"cross-compiling locally for {tc.name} ({tc.cxx})")
        result = build_export(
            ctx.artifact, plan, ctx.log_dir / "build.log", keep_failed=self.config.keep_build_dir
        )
        return dataclasses.replace(
            result,
            log=f"aidge-deploy: built locally with {tc.cxx} (local-cross)\n{result.log}",
        )

    # ----------------------------------------------------------------- transfer

    def transfer(self, ctx: DeployContext, build: BuildResult) -> None:
        layout = self.layout
        if self.config.ssh.cross_compile:
            stage = build.artifact_path.parent / ".aidge-upload"
            stage.mkdir(exist_ok=True)
            staged = stage / build.artifact_path.name
            if not staged.is_file() or staged.read_bytes() != build.artifact_path.read_bytes():
                shutil.copy2(build.artifact_path, staged)
            remote_bin = layout.bin_dir(self.toolchain.key)
            self._upload = self._upload_dir("Transfer", stage, remote_bin, "the binary")
            self._program = posixpath.join(remote_bin, staged.name)
            self._report("Transfer", "provisioning the peak-RSS launcher")
            self._launcher = cross_built_launcher(self.conn, self.toolchain, layout.tools)
        else:
            self._report("Transfer", "provisioning the peak-RSS launcher")
            self._launcher = board_built_launcher(self.conn, layout.tools, ctx.log_dir)
        if self.uses_container and self._launcher.usable and not self._launcher.static:
            self._launcher = BoardLauncher(
                None,
                unavailable_reason="the board could only link the perf_run launcher "
                "dynamically (no static libc): it is not run inside the image",
            )
        self._write_record(ctx)
