"""ResolveTarget: pick the deploy implementation and hydrate runtime defaults."""

from __future__ import annotations

from aidge_deploy.artifact import check_target, hydrate_runtime
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.registry import get_pipeline_target


class ResolveTargetStage:
    name = "ResolveTarget"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        manifest = ctx.artifact.manifest
        ctx.target_name = check_target(ctx.config, manifest, ctx.artifact.manifest_path)
        ctx.target = get_pipeline_target(ctx.target_name, ctx.config.backend_kind, ctx.config)
        ctx.runtime = hydrate_runtime(ctx.config, manifest)
