"""The host target's Docker build location: build and run inside ``docker_image`` here.

Why this module exists: with backend ``local`` and ``docker_image`` set, the export must be
built and run in that image (a pinned toolchain, the board's userland) instead of on this
machine's OS. The export folder is mounted at ``/work`` (never copied into an image), the
build tree lives in the local build cache mounted at ``/build``, the container is removed
afterwards, exit codes are preserved, and the ``perf_run`` launcher (linked ``-static``) is
bind-mounted so peak RSS is still the program's own. An image without cmake and a C++
compiler gets the export built on this machine and only *runs* in the container; which
happened is recorded in the build log and the result's notices (``DockerOptions.build``:
``auto`` | ``container`` | ``outside`` forces the choice, as for ``ssh_docker``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from aidge_deploy.artifact import export_hash, memory_peaks
from aidge_deploy.boards.container import (
    TOOL_PROBE,
    BuildLocation,
    DockerBuildChoice,
    Mount,
    container_name,
    docker_build_choice,
    docker_failure,
    docker_run_argv,
    image_key,
)
from aidge_deploy.boards.remote_build import CACHED_MARK, plan_remote_build
from aidge_deploy.buildsys import BUILD_TIMEOUT_S, BuildPlan, build_export, publish_build
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.config import DeployConfig
from aidge_deploy.connections.local_process import (
    ProcessRun,
    describe_exit,
    run_captured,
    run_process,
)
from aidge_deploy.errors import BuildError, ConfigError, DeployError, ExecutionError, PreflightError
from aidge_deploy.profiling.native import ensure_launcher
from aidge_deploy.profiling.native.wrap import split_report, wrap_with_launcher
from aidge_deploy.results import (
    BuildResult,
    BuildStatus,
    DeployContext,
    ExecutionResult,
    Toolchain,
)
from aidge_deploy.runcontrol import cleanup_on_cancel

_log = logging.getLogger(__name__)
_PROBE_TIMEOUT_S = 120.0
_WHERE = "on this machine"


def _docker(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        return run_captured(argv, timeout_s=timeout_s)
    except FileNotFoundError:
        raise PreflightError(
            "The docker CLI is not installed on this machine (needed by docker_image)",
            hint="apt-get install docker.io, or unset docker_image to build and run natively.",
        ) from None
    except subprocess.TimeoutExpired:
        raise ExecutionError(
            f"`{' '.join(argv[:3])} …` did not answer within {timeout_s:g} s",
            hint="Check the Docker daemon (`docker info`, DOCKER_HOST).",
        ) from None


def _removed_if_interrupted(name: str) -> contextlib.AbstractContextManager[None]:
    """Remove container ``name`` if the block is interrupted or the run cancelled meanwhile
    (killing the docker CLI does not stop its container)."""

    def remove() -> None:
        try:
            _docker(["docker", "rm", "-f", name], 60.0)
        except DeployError as exc:
            _log.warning("Could not remove container %s: %s", name, exc.message)

    return cleanup_on_cancel(remove)


class LocalDocker:
    """One deploy's Docker build location (holds the image facts between build and run)."""

    def __init__(self, config: DeployConfig) -> None:
        if not config.docker.image:
            raise ConfigError("LocalDocker needs docker_image", hint="Set docker_image.")
        self.config = config
        self.image = str(config.docker.image)
        self.location = BuildLocation.LOCAL
        self.image_id: str | None = None
        self.launcher: Path | None = None
        self.launcher_unavailable: str | None = None

    def probe(self, log_dir: Path) -> None:
        """Check the image is here (unless pulls are allowed) and whether it can build."""
        choice = docker_build_choice(self.config)
        inspect = _docker(
            ["docker", "image", "inspect", "--format", "{{.Id}}", self.image], _PROBE_TIMEOUT_S
        )
        if inspect.returncode != 0:
            error = docker_failure(
                125 if "no such image" in inspect.stderr.lower() else inspect.returncode,
                inspect.stderr,
                image=self.image,
                where=_WHERE,
                doing="checking the image",
                log_path=None,
            )
            if error is None:
                error = ExecutionError(
                    f"`docker image inspect {self.image}` failed: {inspect.stderr.strip()[-500:]}",
                    hint="Check the Docker daemon (`docker info`, DOCKER_HOST).",
                )
            if not (self.config.docker.pull and "not present" in error.message):
                raise error
        self.image_id = inspect.stdout.strip() or self.image
        if choice == DockerBuildChoice.CONTAINER:
            self.location = BuildLocation.CONTAINER
        elif choice == DockerBuildChoice.AUTO:
            name = container_name()
            argv = docker_run_argv(
                self.image,
                TOOL_PROBE,
                mounts=(),
                workdir="/",
                name=name,
                pull=self.config.docker.pull,
                user=None,
            )
            with _removed_if_interrupted(name):
                probe = _docker(argv, _PROBE_TIMEOUT_S)
            (log_dir / "docker-probe.log").write_text(
                f"$ {' '.join(argv)}\nexit {probe.returncode}\n{probe.stdout}{probe.stderr}",
                encoding="utf-8",
            )
            if probe.returncode == 0:
                self.location = BuildLocation.CONTAINER

    # ----------------------------------------------------------------- build

    def build(self, ctx: DeployContext, outside_plan: BuildPlan) -> BuildResult:
        """Build in the container when it can, else on this machine (``outside_plan``)."""
        self.probe(ctx.log_dir)
        log_path = ctx.log_dir / "build.log"
        if self.location != BuildLocation.CONTAINER:
            result = build_export(
                ctx.artifact, outside_plan, log_path, keep_failed=self.config.keep_build_dir
            )
            return dataclasses.replace(
                result,
                log=f"aidge-deploy: built on this machine, runs in container {self.image} "
                f"(local)\n{result.log}",
            )
        digest = export_hash(ctx.artifact)
        key = image_key(str(self.image_id))
        build_dir = (self.config.build_dir or default_cache_root() / "builds") / (
            f"{ctx.export_dir.name}-{digest[:16]}-container-{key}"
        )
        build_dir.parent.mkdir(parents=True, exist_ok=True)
        plan = plan_remote_build(
            ctx.artifact,
            src="/work",
            build_dir="/build",
            export_hash=digest,
            location=f"container-{key}",
            jobs=self.config.build_jobs or os.cpu_count() or 1,
            check_paths=(str(build_dir), str(ctx.export_dir)),
        )
        artifact = build_dir / Path(plan.artifact).relative_to("/build")
        where = f"in container {self.image} (container)"
        check = run_captured(["sh", "-c", plan.check_line], timeout_s=30)
        if CACHED_MARK in check.stdout:
            log_path.write_text(f"# built {where}: cached\n", encoding="utf-8")
            return self._result(ctx, artifact, BuildStatus.CACHED, where, log_path, 0.0, build_dir)
        # the cache entry is shared by parallel runs: build in a private folder, rename it in
        shared = self.config.build_dir is None
        into = (
            Path(tempfile.mkdtemp(prefix=f".tmp-{build_dir.name}-", dir=build_dir.parent))
            if shared
            else build_dir
        )
        keep = False
        try:
            try:
                run = self._container_build(ctx, plan.build_line, into, log_path)
            except BuildError as exc:
                if shared and self.config.keep_build_dir:
                    keep = True
                    exc.hint = f"{exc.hint or ''} The failed build is kept in {into}.".strip()
                raise
            if shared:
                publish_build(into, build_dir)  # False: an identical build won the race
        finally:
            if shared and not keep:
                shutil.rmtree(into, ignore_errors=True)
        return self._result(
            ctx, artifact, BuildStatus.BUILT, where, log_path, run.duration_s, build_dir
        )

    def _container_build(
        self, ctx: DeployContext, build_line: str, build_dir: Path, log_path: Path
    ) -> ProcessRun:
        """Run ``build_line`` in the image with the export at /work and ``build_dir`` at /build."""
        where = f"in container {self.image} (container)"
        name = container_name()
        argv = docker_run_argv(
            self.image,
            build_line,
            mounts=(Mount(str(ctx.export_dir), "/work"), Mount(str(build_dir), "/build")),
            workdir="/work",
            name=name,
            pull=self.config.docker.pull,
            user=f"{os.getuid()}:{os.getgid()}",
        )
        with _removed_if_interrupted(name):
            run = run_process(
                argv,
                cwd=ctx.export_dir,
                timeout_s=BUILD_TIMEOUT_S,
                stdout_path=log_path,
                stderr_path=ctx.log_dir / "build.stderr.log",
            )
        if run.returncode != 0:
            error = docker_failure(
                run.returncode,
                run.stderr,
                image=self.image,
                where=_WHERE,
                doing="building the export",
                log_path=log_path,
            )
            if error is not None:
                raise error
            tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-25:])
            raise BuildError(
                f"Build {where} failed (exit {run.returncode}):\n{tail}"
                if not run.timed_out
                else f"Build {where} did not finish within {BUILD_TIMEOUT_S:.0f} s",
                hint="The compiler's last lines are above; the full log is on disk.",
                log_path=log_path,
            )
        return run

    def _result(
        self,
        ctx: DeployContext,
        artifact: Path,
        status: BuildStatus,
        where: str,
        log_path: Path,
        duration: float,
        build_dir: Path,
    ) -> BuildResult:
        return BuildResult(
            artifact_path=artifact,
            mem_peaks=memory_peaks(ctx.artifact),
            status=status,
            log=f"aidge-deploy: built {where}\n{log_path.read_text(errors='replace')}",
            log_path=log_path,
            build_dir=build_dir,
            duration_s=duration,
            toolchain=Toolchain(("cmake", "c++"), elsewhere=f"in container {self.image}"),
        )

    # ----------------------------------------------------------------- run

    def _ensure_launcher(self) -> None:
        if self.launcher is not None or self.launcher_unavailable is not None:
            return
        try:
            # static: the image's libc may differ from this machine's
            self.launcher = ensure_launcher(static=True)
        except DeployError as exc:
            self.launcher_unavailable = (
                f"the static perf_run launcher could not be built: {exc.message}"
            )
            _log.warning("Peak RSS unavailable: %s", self.launcher_unavailable)

    def execute(self, ctx: DeployContext, build: BuildResult, timeout_s: float) -> ExecutionResult:
        self._ensure_launcher()
        mounts = [
            Mount(str(ctx.export_dir), "/work"),
            Mount(str(build.artifact_path.parent), "/aidge-bin", read_only=True),
        ]
        launcher = None
        if self.launcher is not None:
            mounts.append(Mount(str(self.launcher.parent), "/aidge-tools", read_only=True))
            launcher = f"/aidge-tools/{self.launcher.name}"
        name = container_name()
        argv = docker_run_argv(
            self.image,
            wrap_with_launcher(launcher, f"/aidge-bin/{build.artifact_path.name}"),
            mounts=mounts,
            workdir="/work",
            name=name,
            pull=self.config.docker.pull,
            user=f"{os.getuid()}:{os.getgid()}",
        )
        started = time.perf_counter()
        with _removed_if_interrupted(name):
            run = run_process(
                argv,
                cwd=ctx.export_dir,
                timeout_s=timeout_s,
                stdout_path=ctx.log_dir / "run.log",
                stderr_path=ctx.log_dir / "run.stderr.log",
            )
        if run.timed_out or run.signal is not None:
            # killing the docker CLI does not stop the container: remove it by name
            _docker(["docker", "rm", "-f", name], 60.0)
        stderr, report = split_report(run.stderr)
        if report is None and not run.timed_out:
            error = docker_failure(
                run.returncode,
                stderr,
                image=self.image,
                where=_WHERE,
                doing="running the program",
                log_path=run.stdout_path,
            )
            if error is not None:
                raise error
        returncode, signal_number, peak = run.returncode, run.signal, None
        if report is not None:
            returncode, signal_number, peak = report.exit_code, report.signal, report.peak_rss_bytes
        final = ProcessRun(
            argv=run.argv,
            returncode=returncode,
            signal=signal_number,
            stdout=run.stdout,
            stderr=stderr,
            duration_s=run.duration_s,
            timed_out=run.timed_out,
            peak_rss_bytes=peak,
            stdout_path=run.stdout_path,
            stderr_path=run.stderr_path,
        )
        error = describe_exit(final, timeout_s)
        if error is not None:
            error.message = f"{error.message} (in container {self.image})"
            raise error
        return ExecutionResult(
            raw_output=run.stdout,
            exit_status=returncode,
            duration_s=time.perf_counter() - started,
            log_path=run.stdout_path,
            stderr=stderr,
            signal=signal_number,
            peak_rss_bytes=peak,
        )

    def notices(self) -> tuple[str, ...]:
        """What the result should say about where the export was built and measured."""
        where = (
            f"built in container {self.image} (container)"
            if self.location == BuildLocation.CONTAINER
            else f"built on this machine (local), run in container {self.image}"
        )
        extra = (
            (f"peak RSS unavailable: {self.launcher_unavailable}",)
            if self.launcher_unavailable
            else ()
        )
        return (where, *extra)


__all__ = ["LocalDocker"]
