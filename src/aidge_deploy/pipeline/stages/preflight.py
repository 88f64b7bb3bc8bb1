"""Preflight: check the config and the tools the target needs before touching anything,
and keep the target implementation the check resolved (``aidge_deploy.configcheck``):
the run builds it once."""

from __future__ import annotations

from aidge_deploy.artifact import check_target
from aidge_deploy.configcheck import check_deploy_config, check_run, timed_iterations
from aidge_deploy.errors import ConfigError, InternalError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.registry import DeployTarget, hardware_model_of


class PreflightStage:
    name = "Preflight"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        manifest = ctx.artifact.manifest
        target = check_target(
            ctx.config,
            manifest,
            ctx.artifact.manifest_path,
            hardware_model_of(ctx.config.target) if ctx.config.target else None,
        )
        app = manifest.application_config or {}
        if app.get("apss_linux"):
            raise ConfigError(
                f"{ctx.artifact.path} is an APSS Linux export (apss_linux), and aidge-deploy "
                "builds no Cortex-A Linux image: it would run only the M55 part of it",
                hint="Export without apss_linux (a heterogeneous_deploy export of the M55 "
                "cores runs).",
            )
        implementation, _ = check_run(ctx.config, target, iterations=timed_iterations(manifest))
        if not isinstance(implementation, DeployTarget):  # deploy() hands those over first
            raise InternalError(
                f"backend {ctx.config.backend_kind!r} runs the whole deploy elsewhere, "
                "and reached the local pipeline"
            )
        if app.get("heterogeneous_deploy") and not implementation.runs_heterogeneous:
            raise ConfigError(
                f"{ctx.artifact.path} is a heterogeneous (two-core) export, and {target} "
                f"({type(implementation).__name__}) runs one program on one core: it would "
                "run only part of it",
                hint="Deploy it to a board that runs one program per core (mps2-an521, "
                "ake7), or export for one core (heterogeneous_deploy=False).",
            )
        ctx.target_name = target
        ctx.target = implementation


__all__ = ["PreflightStage", "check_deploy_config"]
