"""Prepare: fix the build location and log folder, then let the target get ready."""

from __future__ import annotations

from pathlib import Path

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.results import DeployContext


class PrepareStage:
    name = "Prepare"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        artifact = ctx.artifact
        build_dir = ctx.config.build_dir or Path(artifact.path)
        deploy_ctx = DeployContext(
            artifact=artifact,
            export_dir=Path(artifact.path),
            target=ctx.resolved_target_name,
            backend=ctx.config.backend_kind,
            build_dir=build_dir,
            log_dir=ctx.work_dir,
            keep_build_dir=ctx.config.keep_build_dir,
            progress=ctx.progress,  # targets report upload/build/run progress
        )
        ctx.resolved_target.prepare(deploy_ctx)
        ctx.deploy_context = deploy_ctx
