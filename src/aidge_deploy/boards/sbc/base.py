"""The lifecycle of a Linux board reached over SSH: ``ssh`` and ``ssh_docker`` backends.

Why this module exists: every Linux board (Raspberry Pi, Jetson, K230, a host over SSH) is
deployed the same way; only the hardware identity differs (``targets`` registers one class
per board). The pipeline calls, in order:

* ``prepare``: check the config, connect (host key verified, key auth), find the remote
  layout (``layout``), and for ``ssh_docker`` check the image and decide where to build;
* ``build_remote`` (default): upload the export (only changed files) and build it on the
  board (or in the container) unless the stamped build is already there; or ``build``
  (``cross_compile=True``): build here with the board's cross toolchain;
* ``transfer``: upload the cross-built binary (unchanged: nothing sent) and provision the
  ``perf_run`` launcher that measures peak RSS on the board;
* ``execute``: run the program under ``timeout`` (and the launcher), in a container for
  ``ssh_docker``; ``parse_output``: the manifest's protocol parser, as on the host;
* ``cleanup``: the clean-up policy of ``layout``; containers never outlive a run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import posixpath
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from aidge_deploy.artifact import export_hash, memory_peaks
from aidge_deploy.boards.host.local import describe_exit
from aidge_deploy.boards.sbc.container import (
    BOARD_USER_EXPR,
    BuildLocation,
    DockerBuildChoice,
    Mount,
    container_name,
    docker_failure,
    docker_run_argv,
    image_key,
    image_probe_command,
    shell_line,
)
from aidge_deploy.boards.sbc.counters import SbcPerfCounters
from aidge_deploy.boards.sbc.launcher import (
    BoardLauncher,
    board_built_launcher,
    cross_built_launcher,
    split_report,
    wrap_with_launcher,
)
from aidge_deploy.boards.sbc.layout import RemoteLayout, eviction_command, remote_layout
from aidge_deploy.boards.sbc.remote_build import CACHED_MARK, plan_remote_build
from aidge_deploy.boards.sbc.toolchains import CrossToolchain, toolchain_for, write_toolchain_file
from aidge_deploy.buildsys import BUILD_TIMEOUT_S, build_export, default_cache_root, plan_build
from aidge_deploy.connections.local_process import ProcessRun
from aidge_deploy.connections.ssh import SshConnection
from aidge_deploy.connections.ssh_exec import RemoteRunResult
from aidge_deploy.connections.ssh_settings import SshSettings
from aidge_deploy.connections.ssh_transfer import DEFAULT_EXCLUDE, TransferReport
from aidge_deploy.errors import (
    BuildError,
    ConfigError,
    DeployError,
    ExecutionError,
    TransferError,
)
from aidge_deploy.profiling.native import PerfRunReport
from aidge_deploy.protocols.base import ProtocolResult
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.registry import DeployTarget, RemoteBuildTarget, ToolCheck, TransferableTarget
from aidge_deploy.results import (
    BuildResult,
    BuildStatus,
    DeployContext,
    ExecutionResult,
    Provenance,
)

_log = logging.getLogger(__name__)

#: environment variable holding the passphrase of an encrypted SSH key (never in the config,
#: whose snapshot lands in result bundles)
PASSPHRASE_ENV = "AIDGE_SBC_SSH_KEY_PASSPHRASE"
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
_SHORT_TIMEOUT_S = 60.0
_CMAKE_PERCENT = re.compile(r"^\[\s*(\d+)%\]")


def ssh_settings_from_config(config: object) -> SshSettings:
    """``SshSettings`` for ``DeployConfig`` (``extra["ssh_settings"]`` overrides the rest)."""
    from aidge_deploy.config import DeployConfig

    assert isinstance(config, DeployConfig)
    if not config.ssh_host:
        raise ConfigError(
            f"Backend {config.backend_kind} needs the board's address (ssh_host)",
            hint="Pass --ssh-host (or AIDGE_SBC_IP), or DeployConfig(ssh_host=...).",
        )
    values: dict[str, object] = {
        "host": config.ssh_host,
        "port": config.ssh_port,
        "user": config.ssh_user,
        "key_path": config.ssh_key_path,
        "known_hosts_path": config.ssh_known_hosts_path,
        "trust_on_first_use": config.ssh_trust_on_first_use,
        "connect_timeout_s": config.ssh_connect_timeout,
        "key_passphrase": os.environ.get(PASSPHRASE_ENV) or None,
    }
    overrides = config.extra.get("ssh_settings") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(
            "extra['ssh_settings'] must be a dict of SshSettings fields",
            hint="e.g. extra={'ssh_settings': {'connect_attempts': 1}}",
        )
    if "key_passphrase" in overrides:
        raise ConfigError(
            "The key passphrase cannot be given in the config (it would be recorded)",
            hint=f"Set the {PASSPHRASE_ENV} environment variable, or use an SSH agent.",
        )
    values.update(overrides)
    try:
        return SshSettings(**values)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ConfigError(
            f"Unknown SSH setting in extra['ssh_settings']: {exc}",
            hint="See aidge_deploy.connections.ssh_settings.SshSettings for the fields.",
        ) from None


class SbcSshTarget(DeployTarget, TransferableTarget, RemoteBuildTarget, SbcPerfCounters):
    """A Linux board over SSH: build on the board (or cross-build here), run, measure."""

    #: timings, RSS and counters are measured on the board (its OS clock, kernel and PMU)
    timing_provenance: ClassVar[Provenance] = Provenance.SILICON
    description: ClassVar[str] = "SSH: build on the board (or cross-compile), run, peak RSS"
    #: the run (and, when the image can, the build) happens inside ``docker_image``
    uses_container: ClassVar[bool] = False

    _conn: SshConnection | None = None
    _layout: RemoteLayout | None = None
    _ctx: DeployContext | None = None
    _location: BuildLocation = BuildLocation.BOARD
    _image_id: str | None = None
    _launcher: BoardLauncher | None = None
    _program: str | None = None  # the artifact on the board
    _program_dir: str | None = None  # the folder mounted at /work for container runs
    _upload: TransferReport | None = None

    # ----------------------------------------------------------------- configuration

    @property
    def toolchain(self) -> CrossToolchain:
        return toolchain_for(self.target_name)

    def builds_remotely(self) -> bool:
        return not self.config.cross_compile

    def preflight(self) -> list[ToolCheck]:
        checks: list[ToolCheck] = []
        if self.config.cross_compile:
            tc = self.toolchain
            path = shutil.which(tc.cxx)
            checks.append(
                ToolCheck(
                    tc.cxx,
                    path is not None,
                    path or "not found",
                    None if path else f"apt-get install --no-install-recommends {tc.apt_package}",
                )
            )
            cmake = shutil.which("cmake")
            checks.append(
                ToolCheck(
                    "cmake",
                    cmake is not None,
                    cmake or "not found",
                    None if cmake else "apt-get install --no-install-recommends cmake",
                )
            )
        return checks

    @property
    def run_timeout_s(self) -> float:
        limit = self.config.sbc_max_runtime_seconds or self.config.run_timeout
        return float(limit)

    @property
    def conn(self) -> SshConnection:
        if self._conn is None:
            raise DeployError("Not connected to the board", hint="prepare() was not called.")
        return self._conn

    @property
    def layout(self) -> RemoteLayout:
        if self._layout is None:
            raise DeployError("No remote layout", hint="prepare() was not called.")
        return self._layout

    def _report(self, stage: str, message: str, **figures: float | str | None) -> None:
        ctx = self._ctx
        progress = getattr(ctx, "progress", None) if ctx is not None else None
        if progress is None:
            return
        from aidge_deploy.pipeline.context import ProgressKind, ProgressUpdate

        completed = figures.get("completed")
        total = figures.get("total")
        progress(
            ProgressUpdate(
                stage,
                ProgressKind.STATUS,
                message,
                completed=float(completed) if isinstance(completed, int | float) else None,
                total=float(total) if isinstance(total, int | float) else None,
                unit=str(figures.get("unit") or ""),
            )
        )

    # ----------------------------------------------------------------- prepare

    def prepare(self, ctx: DeployContext) -> None:
        self._ctx = ctx
        ctx.log_dir.mkdir(parents=True, exist_ok=True)
        if self.uses_container and not self.config.docker_image:
            raise ConfigError(
                "Backend ssh_docker needs docker_image (the image to build/run in on the board)",
                hint="Pass --docker-image IMAGE (or DeployConfig(docker_image=...)).",
            )
        settings = ssh_settings_from_config(self.config)
        self._conn = SshConnection(settings)
        self._report("Prepare", f"connecting to {settings.label}")
        self._conn.connect()
        home = self._conn.home()
        self._layout = remote_layout(home, self.config.ssh_remote_workdir, ctx.export_dir)
        if self.config.cross_compile:
            self._location = BuildLocation.LOCAL_CROSS
        if self.uses_container:
            self._probe_image(ctx)
        self._write_record(ctx)

    def _docker_choice(self) -> DockerBuildChoice:
        raw = str(self.config.extra.get("docker_build", DockerBuildChoice.AUTO.value)).lower()
        try:
            return DockerBuildChoice(raw)
        except ValueError:
            raise ConfigError(
                f"Unknown extra['docker_build'] {raw!r}",
                hint=f"Use one of: {', '.join(c.value for c in DockerBuildChoice)}.",
            ) from None

    def _probe_image(self, ctx: DeployContext) -> None:
        image = str(self.config.docker_image)
        choice = self._docker_choice()
        probe_tools = choice == DockerBuildChoice.AUTO and not self.config.cross_compile
        self._report("Prepare", f"checking docker image {image} on the board")
        result = self.conn.run(
            image_probe_command(image, probe_tools),
            timeout_s=_SHORT_TIMEOUT_S,
            log_path=ctx.log_dir / "docker-probe.log",
        )
        if not result.ok:
            error = docker_failure(
                result.exit_status,
                result.stderr,
                image=image,
                where=f"on {self.conn.target}",
                doing="checking the image",
                log_path=result.log_path,
            )
            if error is not None and not (
                self.config.docker_pull and "not present" in error.message
            ):
                raise error
            if error is None:
                raise ExecutionError(
                    f"Checking docker image {image} on {self.conn.target} failed "
                    f"(exit {result.exit_status}): {result.stderr.strip()[-500:]}",
                    hint="Run `docker image inspect IMAGE` on the board to see why.",
                    log_path=result.log_path,
                )
        found = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        self._image_id = found.get("id") or image  # pulled later (docker_pull): key by name
        if self.config.cross_compile:
            return
        if choice == DockerBuildChoice.CONTAINER or found.get("tools") == "yes":
            self._location = BuildLocation.CONTAINER
        else:
            self._location = BuildLocation.BOARD

    def _write_record(self, ctx: DeployContext) -> None:
        """``remote.json`` in the run's log folder: where everything went on the board."""
        layout = self.layout
        record = {
            "board": self.conn.target,
            "backend": self.backend_name,
            "build_location": self._location.value,
            "docker_image": self.config.docker_image if self.uses_container else None,
            "docker_image_id": self._image_id,
            "export_folder": layout.export_home,
            "removed_after_run": layout.user_workdir and not self.config.keep_build_dir,
            "upload": None
            if self._upload is None
            else {
                "files_sent": self._upload.files_sent,
                "bytes_sent": self._upload.bytes_sent,
                "files_unchanged": self._upload.files_unchanged,
                "files_deleted": self._upload.files_deleted,
            },
            "launcher": None
            if self._launcher is None
            else {
                "path": self._launcher.path,
                "static": self._launcher.static,
                "unavailable_reason": self._launcher.unavailable_reason,
            },
            "program": self._program,
        }
        (ctx.log_dir / "remote.json").write_text(json.dumps(record, indent=2), encoding="utf-8")

    # ----------------------------------------------------------------- build

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
        made = self.conn.run(f"mkdir -p -- {_q(remote)}", timeout_s=_SHORT_TIMEOUT_S)
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
            where = f"in container {self.config.docker_image} on {self.conn.target}"
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
        check = self.conn.run(plan.check_line, timeout_s=_SHORT_TIMEOUT_S)
        self._program = host_artifact
        self._program_dir = layout.export_home
        if CACHED_MARK in check.stdout:
            self._report("Build", f"unchanged export: reusing the build {where}")
            log_path.write_text(f"# built {where}: cached ({plan.stamp})\n", encoding="utf-8")
            return self._build_result(ctx, host_artifact, BuildStatus.CACHED, where, log_path, 0.0)
        self._report("Build", f"building {where}")
        command = plan.build_line
        if self._location == BuildLocation.CONTAINER:
            command = self._container_command(plan.build_line, workdir="/work")
        result = self.conn.run(
            command,
            timeout_s=BUILD_TIMEOUT_S,
            log_path=log_path,
            stdout_sink=self._build_progress,
        )
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
                image=str(self.config.docker_image),
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
        )

    def build(self, ctx: DeployContext) -> BuildResult:
        """``cross_compile=True``: build here with the board's toolchain (static binary)."""
        tc = self.toolchain
        digest = export_hash(ctx.artifact)
        base = self.config.build_dir or default_cache_root() / "builds"
        build_dir = base / f"{ctx.export_dir.name}-{digest[:16]}-{tc.key}"
        toolchain_file = write_toolchain_file(tc, build_dir.parent / f".toolchains-{tc.key}")
        plan = plan_build(
            ctx.artifact, build_dir, jobs=self.config.build_jobs, toolchain_file=toolchain_file
        )
        self._report("Build", f"cross-compiling locally for {tc.name} ({tc.cxx})")
        result = build_export(ctx.artifact, plan, ctx.log_dir / "build.log")
        return dataclasses.replace(
            result,
            log=f"aidge-deploy: built locally with {tc.cxx} (local-cross)\n{result.log}",
        )

    # ----------------------------------------------------------------- transfer

    def transfer(self, ctx: DeployContext, build: BuildResult) -> None:
        layout = self.layout
        if self.config.cross_compile:
            stage = build.artifact_path.parent / ".aidge-upload"
            stage.mkdir(exist_ok=True)
            staged = stage / build.artifact_path.name
            if not staged.is_file() or staged.read_bytes() != build.artifact_path.read_bytes():
                shutil.copy2(build.artifact_path, staged)
            remote_bin = layout.bin_dir(self.toolchain.key)
            self._upload = self._upload_dir("Transfer", stage, remote_bin, "the binary")
            self._program = posixpath.join(remote_bin, staged.name)
            self._program_dir = layout.export_home
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

    # ----------------------------------------------------------------- execute

    def _container_command(self, script: str, *, workdir: str, name: str | None = None) -> str:
        layout = self.layout
        mounts = [Mount(layout.export_home, "/work")]
        if self._launcher is not None and self._launcher.path is not None:
            mounts.append(Mount(posixpath.dirname(self._launcher.path), "/aidge-tools", True))
        argv = docker_run_argv(
            str(self.config.docker_image),
            script,
            mounts=mounts,
            workdir=workdir,
            name=name or container_name(),
            pull=self.config.docker_pull,
            user=BOARD_USER_EXPR,
        )
        return shell_line(argv)

    def execute(self, ctx: DeployContext, build: BuildResult) -> ExecutionResult:
        return self.run_program(ctx, build)[0]

    def run_program(
        self,
        ctx: DeployContext,
        build: BuildResult,
        *,
        events: Sequence[str] = (),
        log_name: str = "run.log",
    ) -> tuple[ExecutionResult, PerfRunReport | None]:
        """Run the program on the board (under the launcher, counting ``events`` if given)."""
        layout = self.layout
        program = self._program or str(build.artifact_path)
        launcher = self._launcher.path if self._launcher is not None else None
        timeout = self.run_timeout_s
        log_path = ctx.log_dir / log_name
        name: str | None = None
        if self.uses_container:
            name = container_name()
            in_launcher = (
                posixpath.join("/aidge-tools", posixpath.basename(launcher)) if launcher else None
            )
            script = wrap_with_launcher(in_launcher, layout.container_path(program), events)
            # the export's folder when it was uploaded, the binary's folder for cross builds
            cwd = posixpath.dirname(program) if self.config.cross_compile else layout.src
            command = self._container_command(script, workdir=layout.container_path(cwd), name=name)
            where = f"in container {self.config.docker_image} on {self.conn.target}"
        else:
            cwd = layout.src if not self.config.cross_compile else posixpath.dirname(program)
            command = f"cd {_q(cwd)} && {wrap_with_launcher(launcher, program, events)}"
            where = f"on {self.conn.target}"
        self._report("Execute", f"running {posixpath.basename(program)} {where}")
        try:
            result = self.conn.run(command, timeout_s=timeout, log_path=log_path)
        except ExecutionError:
            if name is not None:
                self._remove_container(name)
            raise
        if name is not None and (result.timed_out or result.exit_status is None):
            self._remove_container(name)
        stderr, report = split_report(result.stderr)
        if report is None and self.uses_container and not result.timed_out:
            error = docker_failure(
                result.exit_status,
                stderr,
                image=str(self.config.docker_image),
                where=f"on {self.conn.target}",
                doing="running the program",
                log_path=log_path,
            )
            if error is not None:
                raise error
        returncode = result.exit_status
        signal_number: int | None = None
        peak: int | None = None
        if report is not None:
            returncode, signal_number, peak = report.exit_code, report.signal, report.peak_rss_bytes
        elif returncode is not None and returncode > 128 and not result.timed_out:
            signal_number = returncode - 128  # sh convention when no launcher report exists
            returncode = None
        run = ProcessRun(
            argv=(command,),
            returncode=returncode,
            signal=signal_number,
            stdout=result.stdout,
            stderr=stderr,
            duration_s=result.duration_s,
            timed_out=result.timed_out,
            peak_rss_bytes=peak,
            stdout_path=log_path,
            stderr_path=log_path,
        )
        error = describe_exit(run, timeout)
        if error is not None:
            error.message = f"{error.message} ({where})"
            raise error
        execution = ExecutionResult(
            raw_output=result.stdout,
            exit_status=returncode,
            duration_s=result.duration_s,
            log_path=log_path,
            stderr=stderr,
            signal=signal_number,
            peak_rss_bytes=peak,
        )
        return execution, report

    def _remove_container(self, name: str) -> None:
        """Best effort: a container orphaned by a timeout or a drop must not keep running."""
        try:
            self.conn.run(f"docker rm -f {_q(name)} >/dev/null 2>&1; true", timeout_s=30.0)
        except DeployError as exc:
            _log.warning("Could not remove container %s on the board: %s", name, exc.message)

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        protocol = get_protocol(ctx.artifact.manifest.protocol)
        try:
            parsed = protocol.parse(execution.raw_output, ctx.artifact.manifest)
        except DeployError as exc:
            if exc.log_path is None:
                exc.log_path = execution.log_path
            raise
        notices = [f"built {self._where_built()}"]
        if self._launcher is not None and self._launcher.unavailable_reason:
            notices.append(f"peak RSS unavailable: {self._launcher.unavailable_reason}")
        return dataclasses.replace(parsed, notices=(*parsed.notices, *notices))

    def _where_built(self) -> str:
        target = self.conn.target if self._conn is not None else "the board"
        if self._location == BuildLocation.LOCAL_CROSS:
            return f"locally with {self.toolchain.cxx} (local-cross)"
        if self._location == BuildLocation.CONTAINER:
            return f"in container {self.config.docker_image} on {target} (container)"
        return f"on {target} (board)"

    # ----------------------------------------------------------------- cleanup

    def cleanup(self, ctx: DeployContext) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            if conn.connected or self._layout is not None:
                self._clean_remote(ctx)
        except DeployError as exc:
            _log.warning("Remote clean-up on %s failed: %s", conn.target, exc.message)
        finally:
            conn.close()
            self._conn = None

    def _clean_remote(self, ctx: DeployContext) -> None:
        layout = self._layout
        if layout is None:
            return
        if self.config.keep_build_dir:
            _log.info("keep_build_dir: kept %s on %s", layout.export_home, self.conn.target)
            return
        if layout.user_workdir:
            self.conn.run(
                f"chmod -R u+w {_q(layout.export_home)} 2>/dev/null; "
                f"rm -rf -- {_q(layout.export_home)}",
                timeout_s=_SHORT_TIMEOUT_S,
            )
        else:
            self.conn.run(eviction_command(layout), timeout_s=_SHORT_TIMEOUT_S)


class SbcSshDockerTarget(SbcSshTarget):
    """The same board, with the run (and the build, when the image can) in ``docker_image``."""

    description: ClassVar[str] = "SSH + Docker on the board: export mounted, --pull never"
    uses_container: ClassVar[bool] = True


def _q(path: str) -> str:
    return shlex.quote(path)


__all__ = ["PASSPHRASE_ENV", "SbcSshDockerTarget", "SbcSshTarget", "ssh_settings_from_config"]
