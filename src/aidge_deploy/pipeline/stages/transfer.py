"""Transfer: copy the artifact (or export) to the remote board, for targets that need it
(``caps.transfers``)."""

from __future__ import annotations

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.targetcaps import target_caps, transferring


class TransferStage:
    name = "Transfer"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return ctx.target is None or not target_caps(ctx.target).transfers

    def run(self, ctx: PipelineContext) -> None:
        target = transferring(ctx.resolved_target)
        if target is not None:
            target.transfer(ctx.prepared_context, ctx.built)
            ctx.transferred = True
