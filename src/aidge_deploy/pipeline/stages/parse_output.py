"""ParseOutput: read the captured output with the manifest's protocol parser."""

from __future__ import annotations

from aidge_deploy.errors import DeployError
from aidge_deploy.pipeline.context import PipelineContext


class ParseOutputStage:
    name = "ParseOutput"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        execution = ctx.executed
        try:
            ctx.parsed = ctx.resolved_target.parse_output(ctx.prepared_context, execution)
        except DeployError as exc:
            if exc.log_path is None:
                exc.log_path = execution.log_path
            raise
