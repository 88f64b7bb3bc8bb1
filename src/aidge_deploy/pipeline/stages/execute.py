"""Execute: run the artifact on the target and capture its output (kept on disk)."""

from __future__ import annotations

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.progress import ProgressKind


class ExecuteStage:
    name = "Execute"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        ctx.report(self.name, ProgressKind.STATUS, f"running on {ctx.resolved_target_name}")
        ctx.execution = ctx.resolved_target.execute(ctx.prepared_context, ctx.built)
