"""Flash: program the firmware into the device, for targets that need it (``caps.flashes``)."""

from __future__ import annotations

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.targetcaps import flashing, target_caps


class FlashStage:
    name = "Flash"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return ctx.target is None or not target_caps(ctx.target).flashes

    def run(self, ctx: PipelineContext) -> None:
        target = flashing(ctx.resolved_target)
        if target is not None:
            target.flash(ctx.prepared_context, ctx.built)
            ctx.flashed = True
