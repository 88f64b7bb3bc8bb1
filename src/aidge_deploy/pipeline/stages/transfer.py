"""Transfer: copy the artifact (or export) to the remote board, for targets that need it."""

from __future__ import annotations

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.registry import TransferableTarget


class TransferStage:
    name = "Transfer"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return not isinstance(ctx.target, TransferableTarget)

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        if isinstance(target, TransferableTarget):
            target.transfer(ctx.prepared_context, ctx.built)
            ctx.transferred = True
