"""The read-only tools: targets, doctor, compare, the results history, the budget.

Why this module exists: what an agent reads before it spends anything, from the same API
the CLI prints (``catalog``, ``checkup``, ``report.compare``, ``history.query``); nothing is
run on a board and none of them takes from the budget.
"""

# no `from __future__ import annotations`: the SDK evaluates the tools' annotations,
# some of which name the session's limits
import dataclasses
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from aidge_deploy.errors import ConfigError
from aidge_deploy.mcpserver.outputs import BudgetReport, Figure
from aidge_deploy.mcpserver.policy import Access
from aidge_deploy.mcpserver.session import Session

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class TargetInfo(BaseModel):
    target: str
    backend: str
    kind: str
    cpu: str
    clock: str
    memories: str
    build_system: str
    description: str
    sources: str = Field(description="where the clock and memory figures come from")
    allowed: bool = Field(description="this session may run on it")


class Policy(BaseModel):
    read_only: bool
    targets: list[str] | None = Field(description="the allowlist of targets (None: any)")
    boards: list[str] | None = Field(description="the allowlist of farm boards (None: any)")


class TargetsOutput(BaseModel):
    targets: list[TargetInfo]
    policy: Policy


class Readiness(BaseModel):
    subject: str
    ready: bool
    status: str
    how_to_get_it: str
    a_run_needs: list[str]


class DoctorOutput(BaseModel):
    """What each registered thing needs on the server's machine."""

    packages: list[Readiness]
    targets: list[Readiness]
    exports: list[Readiness]
    flashers: list[Readiness]
    counters: list[Readiness]
    monitors: list[Readiness]
    protocols: list[str]
    not_ready: int = Field(description="ways of running or exporting for a target not ready")


class CompareOutput(BaseModel):
    """``aidge-deploy compare --json``: totals and per-layer deltas with units."""

    comparable: bool
    verdict: str | None = Field(description="pass, warn or fail with thresholds, else None")
    exit_code: int = Field(description="as the CLI's: 0 pass, 1 warn, 3 not comparable, 4 fail")
    comparison: dict[str, Any]


class HistoryRun(BaseModel):
    id: int
    recorded_at: float = Field(description="UNIX time, s")
    source: str
    accepted: bool
    identity: dict[str, Any]
    commit: str | None
    branch: str | None
    bundle: str | None
    figures: dict[str, Figure]
    stepped: list[dict[str, Any]]


class HistoryOutput(BaseModel):
    history: str
    runs: list[HistoryRun]


def _readiness(rows: Any) -> list[Readiness]:
    return [
        Readiness(
            subject=r.subject,
            ready=r.ready,
            status=r.status,
            how_to_get_it=r.how,
            a_run_needs=list(r.run_needs),
        )
        for r in rows
    ]


def targets(session: Session) -> TargetsOutput:
    from aidge_deploy.catalog import target_rows

    policy = session.policy
    return TargetsOutput(
        targets=[
            TargetInfo(**dataclasses.asdict(r), allowed=policy.target_allowed(r.target))
            for r in target_rows()
        ],
        policy=Policy.model_validate(policy.describe()),
    )


def doctor() -> DoctorOutput:
    from aidge_deploy.checkup import checkup

    report = checkup()
    packages = [
        Readiness(
            subject=c.name,
            ready=c.ok,
            status=c.detail,
            how_to_get_it=c.hint or "",
            a_run_needs=[],
        )
        for c in report.packages
    ]
    return DoctorOutput(
        packages=packages,
        targets=_readiness(report.targets),
        exports=_readiness(report.exports),
        flashers=_readiness(report.flashers),
        counters=_readiness(report.counters),
        monitors=_readiness(report.monitors),
        protocols=list(report.protocols),
        not_ready=report.missing,
    )


def compare(base: Path, candidate: Path, thresholds: Path | None, top: int) -> CompareOutput:
    from aidge_deploy.report.compare import compare_with_thresholds

    outcome = compare_with_thresholds(base, candidate, thresholds)
    return CompareOutput(
        comparable=outcome.comparison.comparable,
        verdict=None if outcome.evaluation is None else outcome.evaluation.verdict.value,
        exit_code=outcome.exit_code,
        comparison=outcome.as_dict(top),
    )


def history_listing(
    session: Session, location: str | None, which: Any, limit: int
) -> HistoryOutput:
    from aidge_deploy.history.query import list_records, record_dict

    where = location or (
        None if session.settings.history is None else str(session.settings.history)
    )
    if where is None:
        raise ConfigError(
            "no results history: this server records none and the call named none",
            hint="Pass history=FILE (a SQLite file or a database URL), or start the server "
            "with --history FILE.",
        )
    listing = list_records(where, which, limit=limit)
    runs = []
    for record in listing.records:
        entry = record_dict(record, listing.steps.get(record.id, []))
        runs.append(
            HistoryRun(
                id=entry["id"],
                recorded_at=entry["recorded_at"],
                source=entry["source"],
                accepted=entry["accepted"],
                identity=entry["identity"],
                commit=entry["commit"],
                branch=entry["branch"],
                bundle=entry["bundle"],
                figures={k: Figure.of_dict(v) for k, v in entry["figures"].items()},
                stepped=entry["stepped"],
            )
        )
    return HistoryOutput(history=where, runs=runs)


def register(server: MCPServer, session: Session) -> None:
    """The read-only tools, on ``server``."""

    @server.tool(name="targets", annotations=READ_ONLY, title="Deploy targets")
    async def list_targets() -> TargetsOutput:
        """The registered deploy targets (hardware facts, backends) and whether this session
        may run on each."""
        return await session.answer("targets", Access.READ_ONLY, lambda: targets(session))

    @server.tool(name="doctor", annotations=READ_ONLY, title="What works on this machine")
    async def doctor_report() -> DoctorOutput:
        """Whether each registered target, flasher, counter source and power monitor works on
        the server's machine, what is missing and how to get it."""
        return await session.answer("doctor", Access.READ_ONLY, doctor)

    @server.tool(name="compare", annotations=READ_ONLY, title="Compare two result bundles")
    async def compare_bundles(
        base: Annotated[str, Field(description="baseline result bundle (folder)")],
        candidate: Annotated[str, Field(description="candidate result bundle (folder)")],
        thresholds: Annotated[
            str | None, Field(description="regression thresholds (JSON file)")
        ] = None,
        top: Annotated[int, Field(ge=1, le=100, description="per-layer changes per figure")] = 10,
    ) -> CompareOutput:
        """Diff two result bundles (totals and per-layer), optionally gated on thresholds."""
        return await session.answer(
            "compare",
            Access.READ_ONLY,
            lambda: compare(
                Path(base), Path(candidate), None if thresholds is None else Path(thresholds), top
            ),
        )

    @server.tool(name="history", annotations=READ_ONLY, title="Results history")
    async def history_runs(
        history: Annotated[
            str | None,
            Field(description="SQLite file or database URL (default: the server's --history)"),
        ] = None,
        name: Annotated[str | None, Field(description="run name prefix")] = None,
        target: str | None = None,
        board: str | None = None,
        branch: str | None = None,
        source: Annotated[
            str | None, Field(description="pytest, profile, run, validate, farm, mcp...")
        ] = None,
        commit: Annotated[str | None, Field(description="commit prefix")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="the newest N runs")] = 20,
    ) -> HistoryOutput:
        """Recorded runs, oldest first: every figure with unit and provenance, and where
        each series stepped."""
        from aidge_deploy.history.query import RecordFilter

        which = RecordFilter(
            name=name, target=target, board=board, branch=branch, source=source, commit=commit
        )
        return await session.answer(
            "history", Access.READ_ONLY, lambda: history_listing(session, history, which, limit)
        )

    @server.tool(name="budget", annotations=READ_ONLY, title="Session budget")
    async def budget_left() -> BudgetReport:
        """Runs and board-minutes this session has used and has left."""
        return await session.answer("budget", Access.READ_ONLY, session.budget_report)


__all__ = ["READ_ONLY", "register"]
