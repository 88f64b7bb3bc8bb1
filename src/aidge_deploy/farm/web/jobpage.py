"""``/jobs/{id}``: stage progress, the log as it grows, then the result.

Stages are named as the CLI names them (the default pipeline's stage names, as the agent
streams them). The result is the bundle's own ``report.html`` — the page a local
``--report`` writes, rendered on the board host by ``report.html`` — shown in a sandboxed
frame with a policy that runs no script at all. Downloads: result JSON, bundle (zip or
tar.gz) and log. A user opens only their own jobs (an admin all): anyone else gets the
same "no job N" as for a job that does not exist, page, log, bundle or report alike.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse

from aidge_deploy.farm.archive import ArchiveError
from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.follow import follow_job, read_events_page
from aidge_deploy.farm.jobs import job_for, load_config
from aidge_deploy.farm.models import EventsPage
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.states import TERMINAL, JobState
from aidge_deploy.farm.web.bundles import bundle_zip, report_file
from aidge_deploy.farm.web.params import EventIdQuery, JobIdPath, NameQuery, WaitQuery
from aidge_deploy.farm.web.queries import job_model
from aidge_deploy.farm.web.session import PageUser
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)

#: the end of the log a page shows (bytes); the whole log is a download
LOG_TAIL = 256 * 1024
#: what the report frame may do: show its inline styles and SVG, nothing else
REPORT_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'; sandbox"
)
DOWNLOADS = {
    "result.json": ("result.json", "application/json"),
    "bundle.tar.gz": ("bundle.tar.gz", "application/gzip"),
    "log.txt": ("log.txt", "text/plain; charset=utf-8"),
}


@cache
def stage_names() -> tuple[str, ...]:
    """The default pipeline's stages, in order: the names the CLI shows."""
    from aidge_deploy.pipeline.default import build_default_pipeline

    return tuple(stage.name for stage in build_default_pipeline().stages)


@dataclass
class StageRow:
    name: str
    status: str = "pending"  # pending | running | done | skipped | failed
    message: str = ""


def stage_rows(events: list[dict[str, Any]], job_state: str) -> list[StageRow]:
    rows = {name: StageRow(name) for name in stage_names()}
    order = list(stage_names())
    for ev in events:
        name = ev.get("stage")
        if ev.get("kind") != "stage" or not name:
            continue
        if name not in rows:  # a stage this service's pipeline does not have
            rows[name] = StageRow(name)
            order.append(name)
        kind, _, message = str(ev.get("message") or "").partition(" ")
        row = rows[name]
        if kind == "start":
            row.status = "running"
        elif kind == "done":
            row.status = "done"
        elif kind == "skip":
            row.status = "skipped"
        if message:
            row.message = message
    if job_state in (JobState.FAILED.value, JobState.CANCELLED.value):
        for row in rows.values():
            if row.status == "running":
                row.status = "failed" if job_state == JobState.FAILED.value else "cancelled"
    return [rows[name] for name in order]


def log_tail(path: Path) -> tuple[str, str, bool]:
    """The log's version (size and time: changes when the agent sends a new one), its last
    ``LOG_TAIL`` bytes as text, and whether older text was left out."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            f.seek(max(0, size - LOG_TAIL))
            data = f.read(LOG_TAIL)
    except FileNotFoundError:
        return "", "", False
    truncated = size > LOG_TAIL
    if truncated:  # start on a whole line
        data = data[data.find(b"\n") + 1 :]
    return f"{size}-{st.st_mtime_ns}", data.decode("utf-8", errors="replace"), truncated


def _page_context(state: FarmState, who: Principal, job_id: int) -> dict[str, Any]:
    with state.db.session() as s:
        job = job_for(s, who, job_id)
        model = job_model(s, job)
        config = load_config(job)
    data = _plain(read_events_page(state, who, job_id, 0))
    view = data["job"]
    folder = state.job_dir(job_id)
    log_version, log_text, log_truncated = log_tail(folder / "log.txt")
    report = None
    error = ""
    if view["state"] == JobState.DONE.value:
        try:
            report = report_file(folder)
        except ArchiveError as exc:  # a damaged bundle: the rest of the page still works
            error = exc.message
    return {
        "job": view,
        "model": model,
        "config": json.dumps(config, indent=1, sort_keys=True) if config else "",
        "stages": stage_rows(data["events"], view["state"]),
        "events": data["events"],
        "last_event": data["events"][-1]["id"] if data["events"] else 0,
        "log_text": log_text,
        "log_version": log_version,
        "log_truncated": log_truncated,
        "has_report": report is not None,
        "bundle_error": error,
        "files": {name: (folder / name).is_file() for name in DOWNLOADS},
        "terminal": view["state"] in {s.value for s in TERMINAL},
        "can_cancel": view["state"] not in {s.value for s in TERMINAL},
    }


def _plain(page: EventsPage) -> dict[str, Any]:
    """The page's data as the templates and scripts read it (JSON values)."""
    return page.model_dump(mode="json")


@router.get("/jobs/{job_id}")
async def job_page(
    job_id: JobIdPath, request: Request, who: PageUser, state: StateDep
) -> HTMLResponse:
    context = await run_in_threadpool(_page_context, state, who, job_id)
    return render(request, "job.html", who, **context)


@router.get("/jobs/{job_id}/progress")
async def job_progress(
    job_id: JobIdPath,
    request: Request,
    who: PageUser,
    state: StateDep,
    after: EventIdQuery = 0,
    log: NameQuery = "",
    wait: WaitQuery = 0.0,
) -> dict[str, Any]:
    """Events after event ``after``, the stages, and the log's tail when its version is not
    ``log``; waits up to ``wait`` s for a change (the API's long poll, ``follow_job``: an
    event wakes it at once, a new log within a second)."""
    path = state.job_dir(job_id) / "log.txt"
    await follow_job(
        state,
        who,
        job_id,
        after=after,
        wait=wait,
        request=request,
        changed=lambda: log_tail(path)[0] != log,
    )
    data = _plain(await run_in_threadpool(read_events_page, state, who, job_id, 0))
    version, text, truncated = await run_in_threadpool(log_tail, path)
    return {
        "job": data["job"],
        "events": [e for e in data["events"] if e["id"] > after],
        "stages": [vars(r) for r in stage_rows(data["events"], data["job"]["state"])],
        "log": None
        if version == log
        else {"version": version, "text": text, "truncated": truncated},
        "terminal": JobState(data["job"]["state"]) in TERMINAL,
    }


@router.get("/jobs/{job_id}/report")
async def job_report(job_id: JobIdPath, who: PageUser, state: StateDep) -> HTMLResponse:
    """The bundle's own HTML report, to show in the job page's frame."""

    def read() -> str:
        with state.db.session() as s:
            job_for(s, who, job_id)
        report = report_file(state.job_dir(job_id))
        if report is None:
            raise FarmRequestError(404, f"job {job_id} has no report (yet)")
        return report.read_text(encoding="utf-8", errors="replace")

    html = await run_in_threadpool(read)
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": REPORT_CSP,
            "X-Frame-Options": "SAMEORIGIN",
            "Cache-Control": "no-store",
        },
    )


#: the log of an earlier run of a retried job (``routes_agent._keep_attempt_log``)
ATTEMPT_LOG = re.compile(r"log\.attempt-[1-9][0-9]{0,2}\.txt")


def _download(state: FarmState, who: Principal, job_id: int, name: str) -> FileResponse:
    with state.db.session() as s:
        job_for(s, who, job_id)
    folder = state.job_dir(job_id)
    if name == "bundle.zip":
        path, media = bundle_zip(folder), "application/zip"
    elif name in DOWNLOADS:
        file_name, media = DOWNLOADS[name]
        path = folder / file_name
        path = path if path.is_file() else None
    elif ATTEMPT_LOG.fullmatch(name):  # an earlier run's log (the job was retried)
        path, media = folder / name, "text/plain; charset=utf-8"
        path = path if path.is_file() else None
    else:
        raise FarmRequestError(404, f"no download {name!r}")
    if path is None:
        raise FarmRequestError(404, f"job {job_id} has no {name}")
    return FileResponse(path, media_type=media, filename=f"job{job_id}-{name}")


@router.get("/jobs/{job_id}/files/{name}")
async def job_file(
    job_id: JobIdPath,
    name: Annotated[str, PathParam(max_length=64)],
    who: PageUser,
    state: StateDep,
) -> FileResponse:
    return await run_in_threadpool(_download, state, who, job_id, name)


__all__ = ["router", "stage_names", "stage_rows"]
