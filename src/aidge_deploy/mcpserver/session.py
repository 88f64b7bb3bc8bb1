"""One agent session: its rules, its budget, and how a tool call is answered.

Why this module exists: every tool goes through the same door. ``Session.answer`` checks the
policy (read-only mode) before anything runs, turns a refusal or a failure into a tool
error the agent reads (message and hint, never a traceback), and masks the session's
secrets in what it returns; ``Session.run`` does the same for a run on a board, which also
takes its share of the budget, is watched by it, and stops with every process of it when
the call is cancelled. Over stdio a server process serves one session; its budget is that
session's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from aidge_deploy.errors import DeployError
from aidge_deploy.mcpserver.budget import Budget, Limits, Ticket
from aidge_deploy.mcpserver.calls import run_blocking
from aidge_deploy.mcpserver.outputs import BudgetReport, Redactor
from aidge_deploy.mcpserver.policy import Access, SessionPolicy
from aidge_deploy.runcontrol import RunControl, RunInterrupted


@dataclass(frozen=True)
class FarmAccess:
    """The farm the session's farm tools talk to (the password or token come from the
    environment, as for the ``api`` backend, and are never shown)."""

    url: str
    username: str | None = None


@dataclass(frozen=True)
class SessionSettings:
    policy: SessionPolicy = field(default_factory=SessionPolicy)
    limits: Limits = field(default_factory=Limits)
    #: the results history runs are recorded in and queried from (None: not recorded)
    history: Path | None = None
    farm: FarmAccess | None = None
    #: the longest a run may take per program run on its target (s)
    max_run_timeout_s: float = 600.0


class Session:
    """The state of one session (policy, budget, redaction, farm jobs in flight)."""

    def __init__(self, settings: SessionSettings) -> None:
        self.settings = settings
        self.policy = settings.policy
        self.budget = Budget(settings.limits)
        self.redactor = Redactor.from_environment(_settings_secrets(settings))
        #: farm jobs this session submitted (their followers): see ``farmtools``
        self.farm_jobs: dict[int, Any] = {}
        #: the controls of the runs in progress (what a stop signal cancels)
        self.active: set[RunControl] = set()

    def stop_runs(self, reason: str) -> None:
        """Stop every run in progress (each returns once its processes are gone)."""
        for control in list(self.active):
            control.cancel(reason)

    def budget_report(self) -> BudgetReport:
        return BudgetReport.of(self.budget.state())

    def refuse(self, exc: DeployError) -> ToolError:
        """A tool error saying what went wrong and what to do (secrets masked)."""
        text = exc.message + (f" Hint: {exc.hint}" if exc.hint else "")
        if exc.log_path is not None:
            text += f" Log: {exc.log_path}"
        return ToolError(self.redactor.text(text))

    def clean[M: BaseModel](self, output: M) -> M:
        """``output`` with the session's secrets masked in every string."""
        data = self.redactor.data(output.model_dump(mode="json"))
        return type(output).model_validate(data)

    async def answer[M: BaseModel](self, tool: str, access: Access, work: Callable[[], M]) -> M:
        """Answer a call that runs nothing on a board (its work in a worker thread: reading
        the registries or a farm's answer must not hold up the server)."""
        try:
            self.policy.check_access(tool, access)
            output = await anyio.to_thread.run_sync(work)
        except DeployError as exc:
            raise self.refuse(exc) from None
        return self.clean(output)

    async def run[M: BaseModel](
        self,
        tool: str,
        what: str,
        check: Callable[[], Any],
        work: Callable[[Any, list[Ticket], RunControl], M],
        *,
        runs: int = 1,
    ) -> M:
        """Answer a call that runs on boards: the policy and the inputs are checked first
        (``check``, whose result ``work`` gets), then ``runs`` runs are taken from the
        budget, and ``work`` runs in a worker thread, watched by the budget and stopped
        with the call. ``work`` says when each run holds its board (``Ticket.hold_board``)."""
        try:
            self.policy.check_access(tool, Access.DESTRUCTIVE)
            checked = await anyio.to_thread.run_sync(check)
            tickets: list[Ticket] = []
            try:
                for _ in range(runs):
                    tickets.append(self.budget.reserve(what))
            except DeployError:
                for ticket in tickets:  # all or none: the runs taken are given back
                    self.budget.give_back(ticket)
                raise
        except DeployError as exc:
            raise self.refuse(exc) from None
        control = RunControl()

        def body(control: RunControl) -> M:
            with self.budget.watch(tickets, control):
                return work(checked, tickets, control)

        self.active.add(control)
        try:
            output = await run_blocking(body, control)
        except RunInterrupted as exc:
            stopped = next((t.stopped for t in tickets if t.stopped), None)
            where = f" Logs: {exc.log_path}." if exc.log_path else ""
            raise ToolError(
                self.redactor.text(
                    f"{stopped or str(exc)}; none of its processes is left running.{where} "
                    f"Budget: {self.budget.state().describe()}."
                )
            ) from None
        except DeployError as exc:
            raise self.refuse(exc) from None
        finally:
            self.active.discard(control)
        return self.clean(output)


def _settings_secrets(settings: SessionSettings) -> tuple[str, ...]:
    """Credentials the settings carry (a farm URL's user and password)."""
    if settings.farm is None:
        return ()
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.report.redact import secret_values

    return secret_values(DeployConfig(api_url=settings.farm.url))


__all__ = ["FarmAccess", "Session", "SessionSettings"]
