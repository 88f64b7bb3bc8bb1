"""InspectBinary: sizes of the built program against the target's memories.

Runs before anything is transferred or flashed, so an export that cannot fit fails here
with the numbers, not later as a hard fault.
"""

from __future__ import annotations

from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.profiling.binary import inspect_binary


class InspectBinaryStage:
    name = "InspectBinary"

    def should_skip(self, ctx: PipelineContext) -> bool:
        # a remote build leaves the artifact on the remote machine: nothing local to inspect
        return ctx.build_result is None or not ctx.build_result.artifact_path.is_file()

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        info = inspect_binary(ctx.built.artifact_path, target.memory_capacities())
        info.check_fits(target.target_name)
        ctx.binary_info = info
