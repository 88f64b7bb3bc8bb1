"""Build: compile locally (``build``) or on the remote machine (``build_remote``)."""

from __future__ import annotations

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.progress import ProgressKind
from aidge_deploy.targetcaps import building_remotely


class BuildStage:
    name = "Build"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        dctx = ctx.prepared_context
        remote = building_remotely(target)
        if remote is not None:
            ctx.report(self.name, ProgressKind.STATUS, "building on the remote machine")
            ctx.build_result = remote.build_remote(dctx)
        else:
            ctx.build_result = target.build(dctx)
        ctx.report(self.name, ProgressKind.STATUS, ctx.built.status.value)
