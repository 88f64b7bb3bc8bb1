"""Runs the flat, ordered list of stages over one ``PipelineContext``."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from aidge_deploy import runcontrol
from aidge_deploy.bugreport import keep_traceback
from aidge_deploy.errors import DeployError, InternalError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.progress import ProgressKind

log = logging.getLogger("aidge_deploy")


@runtime_checkable
class Stage(Protocol):
    """A step of the pipeline: skips itself when irrelevant, else writes its own fields."""

    name: str

    def should_skip(self, ctx: PipelineContext) -> bool: ...

    def run(self, ctx: PipelineContext) -> None: ...


class PipelineRunner:
    """Execute stages in order; stop at the first error and report it typed, with its stage."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = list(stages)

    def run(self, ctx: PipelineContext) -> PipelineContext:
        for stage in self.stages:
            if stage.should_skip(ctx):
                log.debug("[skip] %s", stage.name)
                ctx.report(stage.name, ProgressKind.SKIP)
                continue
            log.debug("[start] %s", stage.name)
            ctx.report(stage.name, ProgressKind.START)
            started = time.perf_counter()
            try:
                stage.run(ctx)
                runcontrol.checkpoint()  # cancelled from another thread during the stage
            except KeyboardInterrupt:  # also RunInterrupted (signals, cancellation)
                raise
            except Exception as exc:
                control = runcontrol.current()
                if control is not None and control.cancelled:
                    # the failure is the cancellation's doing (its processes were killed)
                    raise control.interruption() from exc
                if isinstance(exc, InternalError):
                    exc.stage = exc.stage or stage.name
                    exc.log_path = exc.log_path or keep_traceback(exc, _context(ctx, stage))
                    raise
                if isinstance(exc, DeployError):
                    if exc.stage is None:
                        exc.stage = stage.name
                    raise
                bug = InternalError(
                    f"Unexpected error in stage {stage.name}: {type(exc).__name__}: {exc}",
                    stage=stage.name,
                )
                bug.__cause__ = exc
                bug.log_path = keep_traceback(bug, _context(ctx, stage))
                raise bug from exc
            finally:
                ctx.stage_durations_ms[stage.name] = (time.perf_counter() - started) * 1000.0
            ctx.report(stage.name, ProgressKind.DONE)
            log.debug("[done] %s", stage.name)
        return ctx


def _context(ctx: PipelineContext, stage: Stage) -> str:
    """The header of a kept traceback: where it happened and where the run's logs are."""
    return (
        f"aidge-deploy internal error in stage {stage.name}\n"
        f"target: {ctx.config.target} / {ctx.config.backend_kind}\n"
        f"run logs: {ctx.work_dir}"
    )
