"""``/boards/<name>/health``: a board's health checks (``farm.health``), newest first — time,
trigger, outcome, figure against its reference and band, reason, what it did to the board
— and ``/boards/<name>/health/<run>/log``, the board host's logs of a run's golden jobs (the
farm's own model: any logged-in user may read them, like the boards page)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, PlainTextResponse

from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.fields import MAX_ID
from aidge_deploy.farm.health import golden_run_log, history
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.web.params import NamePath
from aidge_deploy.farm.web.queries import board_rows
from aidge_deploy.farm.web.session import PageUser
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)

RunIdPath = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.get("/boards/{name}/health")
def board_health_page(
    name: NamePath, request: Request, who: PageUser, state: StateDep
) -> HTMLResponse:
    with state.db.session() as s:
        rows = [r.as_dict(who) for r in board_rows(s, state.dispatcher.held_outside())]
        board = next((r for r in rows if r["name"] == name), None)
        if board is None:
            raise FarmRequestError(404, f"the farm has no board {name!r}")
        runs = [r.as_dict() | {"log_job": r.log_job} for r in history(s, name, 200)]
    return render(
        request,
        "boardhealth.html",
        who,
        board=board,
        runs=runs,
        conf=state.health.conf,
        golden_error=state.health.golden.errors.get(str(board["target"])),
    )


@router.get("/boards/{name}/health/{run_id}/log", response_class=PlainTextResponse)
def board_health_log(name: NamePath, run_id: RunIdPath, who: PageUser, state: StateDep) -> str:
    with state.db.session() as s:
        return golden_run_log(s, state.settings.jobs_dir, name, run_id)


__all__ = ["router"]
