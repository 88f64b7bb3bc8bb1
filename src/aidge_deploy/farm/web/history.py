"""``/history``: the farm's results history, one page per model x board.

The records are the farm's own (``farm.jobhistory``: one per finished job, in the farm's
database); a user sees those of their own jobs, an admin all. ``/history`` lists the
model x board series; ``/history/series?model=M&board=B`` charts every figure of that
series across its jobs with ``history.chart`` (the same charts as ``aidge-deploy history
chart``, steps marked) and lists the jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from sqlalchemy import select

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import Job
from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.jobhistory import SOURCE, job_of, job_ref
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.web.params import ModelQuery, NameQuery
from aidge_deploy.farm.web.session import PageUser
from aidge_deploy.farm.web.templating import render
from aidge_deploy.history.chart import chart_svg
from aidge_deploy.history.series import by_identity, series_of, steps_by_record
from aidge_deploy.history.store import HistoryRecord

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class SeriesRow:
    """One model x board series of the history page's list."""

    model: str
    board: str
    target: str
    kind: str
    runs: int
    last: float
    stepped: int


def _visible(state: FarmState, who: Principal) -> list[HistoryRecord]:
    refs = None
    if not who.is_admin:
        with state.db.session() as s:
            ids = s.scalars(select(Job.id).where(Job.user_id == who.user_id)).all()
        refs = [job_ref(i) for i in ids]
    return state.history.records(source=SOURCE, refs=refs)


def _rows(records: list[HistoryRecord]) -> list[SeriesRow]:
    rows = []
    for identity, recs in by_identity(records).items():
        stepped = steps_by_record(series_of(identity, recs))
        rows.append(
            SeriesRow(
                identity.name,
                identity.board or "",
                identity.target,
                f"{identity.kind} {identity.dtype}",
                len(recs),
                recs[-1].recorded_at,
                len(stepped),
            )
        )
    return sorted(rows, key=lambda r: (r.model, r.board, r.kind))


@router.get("/history")
async def history_page(request: Request, who: PageUser, state: StateDep) -> HTMLResponse:
    records = await run_in_threadpool(_visible, state, who)
    return render(request, "history.html", who, rows=_rows(records), series=None)


def _series(state: FarmState, who: Principal, model: str, board: str) -> dict[str, Any]:
    records = [
        r
        for r in _visible(state, who)
        if r.identity.name == model and (r.identity.board or "") == board
    ]
    charts = []
    jobs = []
    for identity, recs in by_identity(records).items():
        all_series = series_of(identity, recs)
        stepped = steps_by_record(all_series)
        charts.append(
            {
                "title": identity.describe(),
                "charts": [
                    {
                        "metric": s.metric,
                        "unit": s.unit,
                        "provenance": s.provenance,
                        "steps": [st.describe() for st in s.steps],
                        "svg": chart_svg(s),
                    }
                    for s in all_series
                ],
            }
        )
        for r in recs:
            jobs.append(
                {
                    "job": job_of(r.ref),
                    "recorded_at": r.recorded_at,
                    "kind": f"{identity.kind} {identity.dtype}",
                    "stepped": ", ".join(s.describe() for s in stepped.get(r.id, [])),
                }
            )
    return {"charts": charts, "jobs": jobs}


@router.get("/history/series")
async def series_page(
    request: Request,
    who: PageUser,
    state: StateDep,
    model: ModelQuery,
    board: NameQuery = "",
) -> HTMLResponse:
    found = await run_in_threadpool(_series, state, who, model, board)
    return render(request, "history.html", who, rows=None, series=found, model=model, board=board)
