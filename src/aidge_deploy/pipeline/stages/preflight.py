"""Preflight: check the config and the tools the target needs before touching anything,
and keep the target implementation the check resolved (``aidge_deploy.configcheck``):
the run builds it once."""

from __future__ import annotations

from aidge_deploy.artifact import check_target
from aidge_deploy.configcheck import check_deploy_config, check_run, timed_iterations
from aidge_deploy.errors import ConfigError, InternalError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.registry import DeployTarget


class PreflightStage:
    name = "Preflight"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        manifest = ctx.artifact.manifest
        target = check_target(ctx.config, manifest, ctx.artifact.manifest_path)
        app = manifest.application_config or {}
        if app.get("heterogeneous_deploy") or app.get("apss_linux"):
            raise ConfigError(
                f"{ctx.artifact.path} is a heterogeneous (two-core) export, and aidge-deploy "
                "builds and flashes one program on one core: it would run only part of it",
                hint="Export for one core (ExportApplication(heterogeneous_deploy=False, "
                "apss_linux=False)).",
            )
        implementation, _ = check_run(ctx.config, target, iterations=timed_iterations(manifest))
        if not isinstance(implementation, DeployTarget):  # deploy() hands those over first
            raise InternalError(
                f"backend {ctx.config.backend_kind!r} runs the whole deploy elsewhere, "
                "and reached the local pipeline"
            )
        ctx.target_name = target
        ctx.target = implementation


__all__ = ["PreflightStage", "check_deploy_config"]
