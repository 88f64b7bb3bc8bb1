"""What the tools return: typed structured output, every figure with unit and provenance.

Why this module exists: an agent reads figures, so each one carries what the CLI and the
bundle say of it — value, unit, provenance (silicon, host, emulated, estimated, static),
the resolution of its timer, or why it is unavailable (never 0, never borrowed) — and where
it came from (the run's folder, bundle and record). The models are the tools' output
schemas (the SDK publishes them in ``tools/list``). Nothing here carries a secret: results
are converted field by field (no config snapshot, no environment), and ``Redactor`` masks
the session's secrets in every string that leaves the server, error messages included.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from aidge_deploy.mcpserver.budget import BudgetState
from aidge_deploy.metrics import Metric
from aidge_deploy.report.redact import Scrubber, sanitize


class Figure(BaseModel):
    """One figure: a value with its unit and provenance, or why there is none."""

    value: float | None = Field(description="None when unavailable (see unavailable_reason)")
    unit: str
    provenance: str = Field(description="silicon, host, emulated, estimated or static")
    resolution: float | None = Field(
        default=None, description="step of the timer or counter behind it, in its unit"
    )
    unavailable_reason: str | None = None
    description: str = ""

    @classmethod
    def of(cls, metric: Metric) -> Figure:
        return cls(
            value=None if metric.value is None else float(metric.value),
            unit=metric.unit,
            provenance=metric.provenance.value,
            resolution=metric.resolution,
            unavailable_reason=metric.unavailable_reason,
            description=metric.description,
        )

    @classmethod
    def of_dict(cls, data: dict[str, Any]) -> Figure:
        value = data.get("value")
        return cls(
            value=None if value is None else float(value),
            unit=str(data["unit"]),
            provenance=str(data["provenance"]),
            resolution=data.get("resolution"),
            unavailable_reason=data.get("unavailable_reason"),
            description=str(data.get("description") or ""),
        )


class Issue(BaseModel):
    code: str
    severity: str
    message: str


class Layer(BaseModel):
    name: str
    figures: dict[str, Figure]


class Provenance(BaseModel):
    """Where a run's figures come from."""

    target: str | None
    backend: str | None
    protocol: str | None
    provenance: str = Field(description="what the run's counts are: silicon, host, emulated")
    timing: str | None = Field(description="which clock timed it, and its resolution")
    log_dir: str | None
    bundle: str | None = Field(description="the result bundle (summary.json, report.html)")
    farm_job: int | None = None
    farm_board: str | None = None
    history_record: int | None = None


class RunFigures(BaseModel):
    """A run's figures, layers and validity."""

    source: Provenance
    figures: dict[str, Figure]
    layers: list[Layer]
    validity: str = Field(description="valid, degraded or invalid")
    issues: list[Issue]
    power_invalid: str | None = Field(
        default=None, description="why the power capture is invalid (none of its figures)"
    )


class BudgetReport(BaseModel):
    """The session's budget after the call."""

    runs_used: int
    runs_limit: int | None
    runs_left: int | None
    board_minutes_used: float
    board_minutes_limit: float | None
    board_minutes_left: float | None
    runs_in_progress: int
    summary: str

    @classmethod
    def of(cls, state: BudgetState) -> BudgetReport:
        return cls(
            runs_used=state.runs_used,
            runs_limit=state.limits.max_runs,
            runs_left=state.runs_left,
            board_minutes_used=round(state.board_minutes_used, 6),
            board_minutes_limit=state.limits.max_board_minutes,
            board_minutes_left=None
            if state.board_minutes_left is None
            else round(state.board_minutes_left, 6),
            runs_in_progress=state.runs_in_progress,
            summary=state.describe(),
        )


def run_figures(result: Any, *, history_record: int | None = None) -> RunFigures:
    """A ``DeployResult`` as figures with units and provenance (its validity assessed as
    the bundle's is)."""
    from aidge_deploy.profiling.layer_table import layer_table
    from aidge_deploy.report.assess import assess
    from aidge_deploy.report.summary import headline_metrics

    validity = assess(result, requested_counters=tuple(result.metrics.get("counters") or ()))
    layers = [
        Layer(name=row.name, figures={k: Figure.of(m) for k, m in row.cells.items()})
        for row in layer_table(result).rows
    ]
    timing = result.timing
    return RunFigures(
        source=Provenance(
            target=result.target,
            backend=result.backend,
            protocol=result.protocol,
            provenance=str(result.metrics.get("provenance") or ""),
            timing=None if timing is None else str(timing.source),
            log_dir=None if result.log_path is None else str(result.log_path.parent),
            bundle=None if result.report_dir is None else str(result.report_dir),
            farm_job=result.farm_job_id,
            farm_board=result.farm_board,
            history_record=history_record,
        ),
        figures={m.name: Figure.of(m) for m in headline_metrics(result)},
        layers=layers,
        validity=validity.status.value,
        issues=[
            Issue(code=i.code.value, severity=str(i.severity), message=i.message)
            for i in validity.issues
        ],
        power_invalid=None if result.power is None else result.power.invalid_reason,
    )


class Redactor:
    """Masks the session's secrets (farm password and token, credentials in URLs) in the
    strings of a tool's output and in its error messages."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._scrub = Scrubber(secrets)

    @classmethod
    def from_environment(cls, extra: Iterable[str] = ()) -> Redactor:
        from aidge_deploy.farm.client import PASSWORD_ENV, TOKEN_ENV

        names = (*PASSWORD_ENV, TOKEN_ENV, "AIDGE_FARM_DATABASE_URL")
        found = [os.environ[n] for n in names if os.environ.get(n)]
        return cls([*found, *extra])

    def text(self, value: str) -> str:
        return self._scrub(value.encode()).decode()

    def data(self, value: Any) -> Any:
        """JSON-like data: secret-named keys masked, URL credentials removed, known
        secrets masked in free text."""
        return self._scrub.json(sanitize(value))


__all__ = [
    "BudgetReport",
    "Figure",
    "Issue",
    "Layer",
    "Provenance",
    "Redactor",
    "RunFigures",
    "run_figures",
]
