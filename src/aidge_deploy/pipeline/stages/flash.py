"""Flash: program the firmware into the device, for targets that need it."""

from __future__ import annotations

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.registry import FlashableTarget


class FlashStage:
    name = "Flash"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return not isinstance(ctx.target, FlashableTarget)

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        if isinstance(target, FlashableTarget):
            target.flash(ctx.prepared_context, ctx.built)
            ctx.flashed = True
