"""``/compare``: two finished jobs side by side, as ``aidge-deploy compare`` sees them.

The comparison is ``report.compare`` on the two jobs' result bundles (verified against their
manifests), the verdict is the CLI's — not comparable (exit 3), bad input (2), or the
thresholds' pass/warn/fail (0/1/4), pass when no thresholds are given — and the thresholds
file is the CLI's format (``schemas/thresholds.schema.json``), uploaded with the form.
Per-layer deltas are charted (``charts.delta_chart``) and tabled.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from starlette.datastructures import UploadFile

from aidge_deploy.errors import DeployError, ReportError
from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.jobs import job_for
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.states import JobState
from aidge_deploy.farm.web.bundles import bundle_dir
from aidge_deploy.farm.web.charts import delta_chart
from aidge_deploy.farm.web.forms import CompareForm, parse_form
from aidge_deploy.farm.web.params import JobIdQuery
from aidge_deploy.farm.web.queries import finished_jobs
from aidge_deploy.farm.web.session import PageUser, check_csrf
from aidge_deploy.farm.web.templating import render
from aidge_deploy.report.compare import (
    EXIT_ERROR,
    EXIT_NOT_COMPARABLE,
    EXIT_PASS,
    Comparison,
    Evaluation,
    compare_bundles,
    evaluate,
    not_comparable_message,
    parse_thresholds,
)

router = APIRouter(include_in_schema=False)

MAX_THRESHOLDS_BYTES = 256 * 1024
#: per-layer changes shown per figure (the CLI's ``--top`` default is 10; the chart shows all)
TABLE_TOP = 10


@dataclass
class Outcome:
    """What ``aidge-deploy compare`` would say, and its exit code."""

    verdict: str  # pass | warn | fail | not comparable | error
    exit_code: int
    message: str = ""
    comparison: Comparison | None = None
    evaluation: Evaluation | None = None
    thresholds_sha256: str | None = None
    charts: dict[str, str] = field(default_factory=dict)


def _bundle(state: FarmState, who: Principal, job_id: int) -> Any:
    with state.db.session() as s:
        job = job_for(s, who, job_id)
        if job.job_state != JobState.DONE:
            raise FarmRequestError(
                409, f"job {job_id} is {job.state}: only finished jobs can be compared"
            )
    folder = bundle_dir(state.job_dir(job_id))
    if folder is None:
        raise FarmRequestError(404, f"job {job_id} has no result bundle")
    return folder


def compare_jobs(
    state: FarmState, who: Principal, base: int, cand: int, thresholds: bytes | None
) -> Outcome:
    base_dir = _bundle(state, who, base)
    cand_dir = _bundle(state, who, cand)
    try:
        comparison = compare_bundles(base_dir, cand_dir)
        rules = None
        if thresholds is not None:
            try:
                doc = json.loads(thresholds)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ReportError(
                    f"cannot read the thresholds file: {exc}",
                    hint="Upload a JSON file matching schemas/thresholds.schema.json.",
                ) from None
            rules = parse_thresholds(doc, sha256=hashlib.sha256(thresholds).hexdigest())
    except DeployError as exc:
        message = exc.message + (f" — {exc.hint}" if exc.hint else "")
        return Outcome("error", EXIT_ERROR, message)
    charts = {
        key: delta_chart(deltas, chart_id=f"delta-{key}")
        for key, deltas in comparison.layer_deltas.items()
    }
    if not comparison.comparable:
        return Outcome(
            "not comparable",
            EXIT_NOT_COMPARABLE,
            not_comparable_message(comparison.blocking),
            comparison,
            charts=charts,
        )
    if rules is None:
        return Outcome(
            "pass", EXIT_PASS, "comparable; no thresholds given", comparison, charts=charts
        )
    evaluation = evaluate(comparison, rules)
    return Outcome(
        evaluation.verdict.value,
        evaluation.exit_code,
        "",
        comparison,
        evaluation,
        rules.sha256,
        charts,
    )


def _page(
    request: Request,
    who: Principal,
    state: FarmState,
    outcome: Outcome | None,
    base: int | None,
    cand: int | None,
) -> HTMLResponse:
    with state.db.session() as s:
        jobs = finished_jobs(s, who)
    return render(
        request,
        "compare.html",
        who,
        jobs=jobs,
        base=base,
        cand=cand,
        outcome=outcome,
        top=TABLE_TOP,
    )


@router.get("/compare")
async def compare_page(
    request: Request,
    who: PageUser,
    state: StateDep,
    base: JobIdQuery = None,
    cand: JobIdQuery = None,
) -> HTMLResponse:
    outcome = None
    if base is not None and cand is not None:
        outcome = await run_in_threadpool(compare_jobs, state, who, base, cand, None)
    return await run_in_threadpool(_page, request, who, state, outcome, base, cand)


@router.post("/compare")
async def compare_with_thresholds(request: Request, who: PageUser, state: StateDep) -> HTMLResponse:
    form = await request.form(max_files=1, max_fields=10, max_part_size=MAX_THRESHOLDS_BYTES)
    check_csrf(request, form)
    if not form.get("base") or not form.get("cand"):
        raise FarmRequestError(422, "choose two finished jobs", "Pick one in each list.")
    chosen = parse_form(CompareForm, form)
    base, cand = chosen.base, chosen.cand
    upload = form.get("thresholds")
    raw = None
    if isinstance(upload, UploadFile) and upload.filename:
        raw = await upload.read(MAX_THRESHOLDS_BYTES + 1)
        if len(raw) > MAX_THRESHOLDS_BYTES:
            raise FarmRequestError(413, "the thresholds file is larger than 256 KiB")
    outcome = await run_in_threadpool(compare_jobs, state, who, base, cand, raw)
    return await run_in_threadpool(_page, request, who, state, outcome, base, cand)


__all__ = ["Outcome", "compare_jobs", "router"]
