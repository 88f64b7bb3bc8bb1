"""The host target reached locally: build the export here, run it here, read its stdout.

With ``docker_image`` set, the same build and run happen inside that image instead (the
export mounted, never copied into the image) — see ``boards.host.docker``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from aidge_deploy.backendoptions import DockerOptions
from aidge_deploy.buildsys import BuildPlan, build_export, plan_build
from aidge_deploy.connections.local_process import describe_exit
from aidge_deploy.power.capability import RepeatedRunPower
from aidge_deploy.profiling.perf_linux import run_with_counters
from aidge_deploy.protocols.base import ProtocolResult
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.readiness import ToolCheck, apt_program_check
from aidge_deploy.registry import DeployTarget, register_deploy_target
from aidge_deploy.results import BuildResult, DeployContext, ExecutionResult, Provenance
from aidge_deploy.targetspec import BackendCaps, TargetKind

if TYPE_CHECKING:
    from aidge_deploy.boards.host.docker import LocalDocker


@register_deploy_target("host", "local")
class HostLocalTarget(DeployTarget, RepeatedRunPower):
    """Build with CMake in a content-keyed cache and run the program with a timeout."""

    target_kind: ClassVar[TargetKind] = TargetKind.HOST
    #: a process of this machine
    reach: ClassVar[BackendCaps] = BackendCaps(runs_here=True, options=(DockerOptions,))
    timing_provenance: ClassVar[Provenance] = Provenance.HOST
    counter_provenance: ClassVar[Provenance] = Provenance.HOST
    counts_with: ClassVar[str | None] = "linux-perf"
    description: ClassVar[str] = "native build + run"
    fixed_memories: ClassVar[bool] = False  # a Linux process: sized by the OS, not the model
    _docker_location: LocalDocker | None = None

    def preflight(self) -> list[ToolCheck]:
        if self.config.docker.image:  # Docker build location: the image may hold the tools
            return [apt_program_check("docker", "docker.io")]
        return [
            apt_program_check("cmake", "cmake"),
            apt_program_check("c++", "g++"),
            apt_program_check("make", "make"),
        ]

    def run_needs(self) -> list[str]:
        if self.config.docker.image:
            return [
                "a running Docker daemon with the image (--docker-image; --docker-pull to pull it)",
                "cmake and a C++ compiler in the image, or on this machine",
            ]
        return []

    @classmethod
    def variants(cls) -> dict[str, dict[str, Any]]:
        return {"": {}, "--docker-image IMAGE": {"docker_image": "IMAGE"}}

    # --- Docker build location (boards.host.docker): with docker_image set, build and run
    # --- happen inside that image; these three hooks are the whole delegation.
    def _docker(self) -> LocalDocker | None:
        if not self.config.docker.image:
            return None
        if self._docker_location is None:
            from aidge_deploy.boards.host.docker import LocalDocker

            self._docker_location = LocalDocker(self.config)
        return self._docker_location

    def prepare(self, ctx: DeployContext) -> None:
        ctx.log_dir.mkdir(parents=True, exist_ok=True)

    def build_plan(self, ctx: DeployContext) -> BuildPlan:
        return plan_build(ctx.artifact, self.config.build_dir, jobs=self.config.build_jobs)

    def build(self, ctx: DeployContext) -> BuildResult:
        docker = self._docker()
        if docker is not None:
            return docker.build(ctx, self.build_plan(ctx))
        return build_export(
            ctx.artifact,
            self.build_plan(ctx),
            ctx.log_dir / "build.log",
            keep_failed=self.config.keep_build_dir,
        )

    def execute(self, ctx: DeployContext, build: BuildResult) -> ExecutionResult:
        timeout = float(self.config.run_timeout)
        docker = self._docker()
        if docker is not None:
            return docker.execute(ctx, build, timeout)
        # The program runs under the small perf_run launcher: forked from it, its ru_maxrss
        # is its own (a child of this big Python process would inherit our peak RSS).
        run = run_with_counters(
            [str(build.artifact_path)],
            (),
            cwd=ctx.export_dir,
            timeout_s=timeout,
            stdout_path=ctx.log_dir / "run.log",
            stderr_path=ctx.log_dir / "run.stderr.log",
        ).run
        error = describe_exit(run, timeout)
        if error is not None:
            raise error
        return ExecutionResult(
            raw_output=run.stdout,
            exit_status=run.returncode,
            duration_s=run.duration_s,
            log_path=run.stdout_path,
            stderr=run.stderr,
            signal=run.signal,
            peak_rss_bytes=run.peak_rss_bytes,
        )

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        protocol = get_protocol(ctx.artifact.manifest.protocol)
        try:
            parsed = protocol.parse(execution.raw_output, ctx.artifact.manifest)
        except Exception as exc:
            if getattr(exc, "log_path", "") is None:
                exc.log_path = execution.log_path  # type: ignore[attr-defined]
            raise
        docker = self._docker()
        if docker is not None:  # say where it was built and why peak RSS may be missing
            return dataclasses.replace(parsed, notices=(*parsed.notices, *docker.notices()))
        return parsed
