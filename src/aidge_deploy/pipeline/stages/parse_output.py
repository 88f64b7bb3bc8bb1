"""ParseOutput: read the captured output with the manifest's protocol parser."""

from __future__ import annotations

from aidge_deploy.errors import DeployError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.registry import RemoteResultTarget


class ParseOutputStage:
    name = "ParseOutput"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return isinstance(ctx.target, RemoteResultTarget)  # the farm parsed it

    def run(self, ctx: PipelineContext) -> None:
        execution = ctx.executed
        try:
            ctx.parsed = ctx.resolved_target.parse_output(ctx.prepared_context, execution)
        except DeployError as exc:
            if exc.log_path is None:
                exc.log_path = execution.log_path
            raise
