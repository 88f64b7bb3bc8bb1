"""The farm's tools: submit a profile job, follow its status, cancel it.

Why this module exists: a farm job runs elsewhere, so the session follows it itself. A
submit checks what ``profile`` checks (with the ``api`` backend: the farm's address and
credentials, from the server's settings and environment, never from the agent), exports
through the same cache, uploads and queues the job (``farm.remote.submit_export``) and
returns at once. A follower thread then charges the job's time on its board to the budget
while it runs, and cancels the job when the session's board-minutes are spent or the
session ends (a job must not run on for nobody). Status and cancel act on the session's
own jobs; a finished job's figures come back as ``profile``'s do.
"""

# no `from __future__ import annotations`: the SDK evaluates the tools' annotations,
# some of which name the session's limits
import contextlib
import threading
import time
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.mcpserver.budget import Ticket
from aidge_deploy.mcpserver.lab import READ_ONLY
from aidge_deploy.mcpserver.outputs import BudgetReport, RunFigures, run_figures
from aidge_deploy.mcpserver.policy import Access
from aidge_deploy.mcpserver.runs import RUNS, Dtype, check_profile_call
from aidge_deploy.mcpserver.session import Session

#: a cancel stops a job: destructive, and the same call twice is the same as once
CANCELS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
#: how long a follower waits for the farm's next event (s)
FOLLOW_WAIT_S = 1.0


class JobFailure(BaseModel):
    message: str
    hint: str
    kind: str | None = Field(description="the farm's failure kind (deploy, agent_lost, ...)")
    type: str | None = Field(description="the error's type on the board host")
    failure_class: str | None = Field(
        default=None,
        description="whose failure: infrastructure (the lab's; the farm retried it on "
        "another board) or user (the job's own; never retried)",
    )
    attempts: int = Field(default=1, description="runs of the job on boards")


class FarmJobOutput(BaseModel):
    job: int
    state: str = Field(description="queued, reserved, building, flashing, running, ... done")
    target: str
    board: str | None
    queue_position: int | None
    board_seconds: float = Field(description="time on its board so far, s (host wall time)")
    failure: JobFailure | None = None
    stopped_by_budget: str | None = None
    run: RunFigures | None = Field(default=None, description="the figures, once done")
    budget: BudgetReport


def board_seconds(view: Any) -> float:
    """A job's time on its boards: its earlier runs (retried after an infrastructure
    failure), then from its current run's first on-board state to its end (or now)."""
    from aidge_deploy.farm.states import ON_BOARD, ORDER, TERMINAL

    earlier = sum(
        max(0.0, a.ended_at - a.started_at)
        for a in getattr(view, "attempts", None) or ()
        if a.retried and a.started_at is not None
    )
    held = [view.times[s.value] for s in ORDER if s in ON_BOARD and s.value in view.times]
    if not held:
        return earlier
    ended = [view.times[s.value] for s in TERMINAL if s.value in view.times]
    return earlier + max(0.0, (min(ended) if ended else time.time()) - min(held))


class FarmJob:
    """A job this session submitted, and the thread that follows it."""

    def __init__(self, session: Session, job_id: int, config: Any, ticket: Ticket) -> None:
        self.session = session
        self.id = job_id
        self.config = config
        self.ticket = ticket
        self.view: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"farm-job-{job_id}", daemon=True)

    def start(self, view: Any) -> None:
        self.view = view
        self.ticket.charge_with(lambda: board_seconds(self.view))
        self._thread.start()

    def _follow(self) -> None:
        from aidge_deploy.farm.remote import open_farm

        try:
            with open_farm(self.config) as farm:
                after = 0
                while True:
                    page = farm.events(self.id, after=after, wait=FOLLOW_WAIT_S)
                    self.view = page.job
                    after = max([after, *(e.id for e in page.events)])
                    if page.job.state.terminal:
                        return
                    if self.ticket.exhausted() and self.ticket.stopped is None:
                        self.ticket.stopped = self.session.budget.exhausted_message(
                            f"farm job {self.id}"
                        )
                        with contextlib.suppress(DeployError):
                            farm.cancel(self.id)
                    if self._stop.is_set():
                        with contextlib.suppress(DeployError):
                            farm.cancel(self.id)
                        return
        except DeployError:
            pass  # the farm went away: the job is charged what was seen of it
        finally:
            self.ticket.release()

    def observe(self, view: Any) -> None:
        """A tool saw the job at ``view``: once it has ended, its board time is charged for
        good and it is no longer in progress, whether or not the follower has seen it yet
        (the budget a tool reports after a job's end never still counts it)."""
        if view.state.terminal:
            self.view = view
            self.ticket.release()

    def close(self) -> None:
        """The session ends: cancel the job if it still runs, and stop following it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)


def _farm_values(session: Session, board: str | None, timeout_s: float) -> dict[str, Any]:
    farm = session.settings.farm
    if farm is None:
        raise ConfigError(
            "this server knows no farm",
            hint="Start it with --farm-url URL (and --farm-user, with AIDGE_DEPLOY_API_PASSWORD "
            "or AIDGE_DEPLOY_API_TOKEN in its environment).",
        )
    return {
        "backend": "api",
        "api_url": farm.url,
        "api_username": farm.username,
        "api_board_name": board,
        "run_timeout": timeout_s,
    }


def _job(session: Session, job_id: int) -> FarmJob:
    job = session.farm_jobs.get(job_id)
    if job is None:
        mine = ", ".join(str(j) for j in session.farm_jobs) or "none yet"
        raise ConfigError(
            f"farm job {job_id} was not submitted by this session",
            hint=f"This session's jobs: {mine}.",
        )
    return job


def job_output(session: Session, job: FarmJob, view: Any, farm: Any = None) -> FarmJobOutput:
    from aidge_deploy.farm.resultcodec import decode_result
    from aidge_deploy.farm.states import JobState

    job.observe(view)
    run = None
    if view.state == JobState.DONE and farm is not None:
        result = decode_result(farm.result(view.id))
        result.farm_job_id, result.farm_board = view.id, view.board
        run = run_figures(result)
    error = view.error
    return FarmJobOutput(
        job=view.id,
        state=view.state.value,
        target=view.target,
        board=view.board or view.requested_board,
        queue_position=view.queue_position,
        board_seconds=round(board_seconds(view), 3),
        failure=None
        if error is None
        else JobFailure(
            message=error.message,
            hint=error.hint,
            kind=error.kind,
            type=error.type,
            failure_class=None if view.failure_class is None else str(view.failure_class),
            attempts=view.attempt,
        ),
        stopped_by_budget=job.ticket.stopped,
        run=run,
        budget=session.budget_report(),
    )


def submit(session: Session, checked: Any, tickets: list[Ticket]) -> FarmJobOutput:
    from aidge_deploy.api import new_run_dir
    from aidge_deploy.farm.remote import open_farm, submit_export
    from aidge_deploy.modelprofile import export_checked

    (ticket,) = tickets
    request = checked.request
    run_dir = new_run_dir(request.target)
    export = export_checked(checked, run_dir / "export.log")
    with open_farm(checked.config) as farm:
        view = submit_export(farm, Path(export.path), checked.config, request.target)
    job = FarmJob(session, view.id, checked.config, ticket)
    session.farm_jobs[view.id] = job
    ticket.handed_over = True  # the follower charges the job's board time, and releases it
    job.start(view)
    return job_output(session, job, view)


def register(server: MCPServer, session: Session) -> None:
    """``farm_submit``, ``farm_status`` and ``farm_cancel``, on ``server``."""
    limit = session.settings.max_run_timeout_s

    @server.tool(name="farm_submit", annotations=RUNS, title="Queue a profile job on the farm")
    async def farm_submit(
        model: Annotated[str, Field(description="ONNX model file (on the server's machine)")],
        target: Annotated[str, Field(description="the farm target, e.g. mps2-an386")],
        board: Annotated[
            str | None, Field(description="a farm board by name (default: any of the target)")
        ] = None,
        dtype: Dtype = "float32",
        iterations: Annotated[int, Field(ge=1, le=100_000)] = 10,
        warmup: Annotated[int, Field(ge=0, le=10_000)] = 2,
        timeout_s: Annotated[
            float, Field(gt=0, le=limit, description="timeout of each program run, s")
        ] = min(300.0, limit),
    ) -> FarmJobOutput:
        """Export MODEL for TARGET and queue its profile job on the farm; returns at once
        with the job's id (follow it with farm_status). Takes one run of the budget; its
        time on the board is charged while it runs, and it is cancelled when the session's
        board-minutes are spent or the session ends."""
        path = Path(model)

        def check() -> Any:
            session.policy.check_target(target)
            session.policy.check_board(board, target)
            return check_profile_call(
                session,
                path,
                target,
                dtype,
                iterations,
                warmup,
                None,
                timeout_s,
                _farm_values(session, board, timeout_s),
            )

        return await session.run(
            "farm_submit",
            f"farm job of {path.name} on {board or target}",
            check,
            lambda checked, tickets, _control: submit(session, checked, tickets),
        )

    @server.tool(name="farm_status", annotations=READ_ONLY, title="A farm job's status")
    async def farm_status(job: Annotated[int, Field(description="the job's id")]) -> FarmJobOutput:
        """The state of a job this session submitted; once done, its figures (units and
        provenance), once failed, why."""
        from aidge_deploy.farm.remote import open_farm

        def work() -> FarmJobOutput:
            followed = _job(session, job)
            with open_farm(followed.config) as farm:
                return job_output(session, followed, farm.job(job), farm)

        return await session.answer("farm_status", Access.READ_ONLY, work)

    @server.tool(name="farm_cancel", annotations=CANCELS, title="Cancel a farm job")
    async def farm_cancel(job: Annotated[int, Field(description="the job's id")]) -> FarmJobOutput:
        """Cancel a job this session submitted (queued or running)."""
        from aidge_deploy.farm.remote import open_farm

        def work() -> FarmJobOutput:
            followed = _job(session, job)
            with open_farm(followed.config) as farm:
                return job_output(session, followed, farm.cancel(job), farm)

        return await session.answer("farm_cancel", Access.DESTRUCTIVE, work)


def close_jobs(session: Session) -> None:
    """The session ends: every job of it that still runs is cancelled."""
    for job in list(session.farm_jobs.values()):
        job.close()


__all__ = ["CANCELS", "FarmJob", "board_seconds", "close_jobs", "register"]
