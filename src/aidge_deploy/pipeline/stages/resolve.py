"""ResolveTarget: the runtime settings the manifest implies for the target Preflight
resolved (iterations, warm-up, validation: ``artifact.hydrate_runtime``)."""

from __future__ import annotations

from aidge_deploy.artifact import hydrate_runtime
from aidge_deploy.pipeline.context import PipelineContext


class ResolveTargetStage:
    name = "ResolveTarget"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        ctx.runtime = hydrate_runtime(ctx.config, ctx.artifact.manifest)
