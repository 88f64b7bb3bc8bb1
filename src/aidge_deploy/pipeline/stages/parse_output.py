"""ParseOutput: check which program ran, then read its output with the manifest's protocol.

The program's identity comes first (``firmwareid``): a firmware that printed the hash of
another export (a stale image, a wrong board) fails the run with both hashes before any of
its numbers is read; one that printed none is parsed, with a notice saying so.
"""

from __future__ import annotations

import dataclasses

from aidge_deploy.artifact import export_hash
from aidge_deploy.errors import DeployError
from aidge_deploy.firmwareid import UNVERIFIED, check_identity
from aidge_deploy.pipeline.context import PipelineContext


class ParseOutputStage:
    name = "ParseOutput"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        execution = ctx.executed
        try:
            identity = check_identity(
                execution.raw_output,
                export_hash(ctx.artifact),
                log_path=execution.log_path,
                where=ctx.resolved_target_name,
            )
            parsed = ctx.resolved_target.parse_output(
                ctx.prepared_context, dataclasses.replace(execution, raw_output=identity.output)
            )
        except DeployError as exc:
            if exc.log_path is None:
                exc.log_path = execution.log_path
            raise
        if not identity.verified:
            parsed = dataclasses.replace(parsed, notices=(*parsed.notices, UNVERIFIED))
        ctx.parsed = parsed
