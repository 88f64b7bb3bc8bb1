"""``/submit``: upload an export archive (or an ONNX model, exported here with the options
``profile`` takes), choose a board or a target, submit; the browser then follows the job.

The upload goes through the same store as ``POST /api/exports`` (size limit while it
streams, every archive member checked, the manifest validated) and the job through the
API's own submit (board/target checks, did-you-mean), so the page refuses what the API
refuses, with the same message.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy import select
from starlette.datastructures import UploadFile

from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.farm.actions import submit as submit_job
from aidge_deploy.farm.archive import ArchiveTooLarge, pack_export
from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import Board
from aidge_deploy.farm.deps import StateDep
from aidge_deploy.farm.jobconfig import JobConfig, problems
from aidge_deploy.farm.jobs import record_export
from aidge_deploy.farm.models import SubmitRequest
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.store import StoredExport, UploadTooLarge
from aidge_deploy.farm.web.forms import SubmitForm, parse_form
from aidge_deploy.farm.web.onnxexport import OnnxOptions, export_onnx
from aidge_deploy.farm.web.session import PageUser, check_csrf
from aidge_deploy.farm.web.templating import render

router = APIRouter(include_in_schema=False)

_CHUNK = 1024 * 1024


def _destinations(state: FarmState) -> dict[str, Any]:
    with state.db.session() as s:
        boards = [
            (b.name, b.target, b.drained) for b in s.scalars(select(Board).order_by(Board.name))
        ]
    return {"boards": boards, "targets": sorted({t for _, t, _ in boards})}


def _form_page(
    request: Request,
    who: Principal,
    state: FarmState,
    *,
    error: str = "",
    hint: str = "",
    values: dict[str, str] | None = None,
    status: int = 200,
) -> HTMLResponse:
    return render(
        request,
        "submit.html",
        who,
        status=status,
        error=error,
        hint=hint,
        values=values or {},
        max_mb=state.settings.max_upload_bytes // 2**20,
        **_destinations(state),
    )


@router.get("/submit")
def submit_page(request: Request, who: PageUser, state: StateDep) -> HTMLResponse:
    return _form_page(request, who, state)


def _save(upload: UploadFile, state: FarmState, dest: Path) -> None:
    """Copy an upload to ``dest`` under the service's size limit."""
    written = 0
    with open(dest, "wb") as out:
        while chunk := upload.file.read(_CHUNK):
            written += len(chunk)
            state.store.check_size(written)
            out.write(chunk)


def _store_archive(state: FarmState, upload: UploadFile) -> StoredExport:
    fd, path = state.store.new_upload()
    os.close(fd)
    try:
        _save(upload, state, path)
        return state.store.ingest(path)
    finally:
        path.unlink(missing_ok=True)


def _store_onnx(
    state: FarmState, upload: UploadFile, target: str, options: OnnxOptions
) -> StoredExport:
    work = Path(tempfile.mkdtemp(prefix="onnx-", dir=state.store.tmp))
    try:
        model = work / "model.onnx"
        _save(upload, state, model)
        export_dir = export_onnx(model, target, options, work)
        fd, path = state.store.new_upload()
        with os.fdopen(fd, "wb") as f:
            f.write(pack_export(export_dir))
        try:
            return state.store.ingest(path)
        finally:
            path.unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _destination(state: FarmState, value: str) -> tuple[str | None, str | None, str]:
    """(board, target, the target to export for) from the form's ``board:X``/``target:Y``."""
    kind, _, name = value.partition(":")
    with state.db.session() as s:
        boards = {b.name: b.target for b in s.scalars(select(Board))}
    if kind == "board" and name:
        return name, None, boards.get(name, "")
    if kind == "target" and name:
        return None, name, name
    raise ConfigError("choose a board or a target", hint="Pick one in the list.")


@router.post("/submit")
async def submit(request: Request, who: PageUser, state: StateDep) -> Response:
    limit = state.store.max_upload_bytes + _CHUNK
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:  # refused before reading the body
        try:
            state.store.check_size(int(length))
        except UploadTooLarge as exc:
            return _form_page(
                request, who, state, error=exc.message, hint=exc.hint or "", status=413
            )
    form = await request.form(max_files=1, max_fields=20, max_part_size=64 * 1024)
    check_csrf(request, form)
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    upload = form.get("file")
    try:
        fields = parse_form(SubmitForm, form)
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise ConfigError("choose a file to upload", hint="An export archive or an ONNX model.")
        board, target, export_target = _destination(state, fields.destination)
        name = Path(upload.filename).name[:200]
        if fields.kind == "onnx":
            if not export_target:
                raise FarmRequestError(404, f"the farm has no board {board!r}")
            options = OnnxOptions(
                dtype=fields.dtype,
                iterations=10 if fields.iterations is None else fields.iterations,
                warmup=2 if fields.warmup is None else fields.warmup,
            ).checked()
            stored = await run_in_threadpool(_store_onnx, state, upload, export_target, options)
        else:
            stored = await run_in_threadpool(_store_archive, state, upload)
        try:
            body = SubmitRequest(
                export=stored.content_hash,
                board=board,
                target=target,
                config=JobConfig(run_timeout=fields.run_timeout),
            )
        except ValidationError as exc:
            raise FarmRequestError(422, f"invalid submission: {problems(exc)}") from None

        def create() -> int:
            with state.db.session() as s:
                record_export(s, stored, who, name)
            return submit_job(state, who, body).id

        job_id = await run_in_threadpool(create)
    except DeployError as exc:
        status = 413 if isinstance(exc, ArchiveTooLarge) else 400
        return _form_page(
            request,
            who,
            state,
            error=exc.message,
            hint=exc.hint or "",
            values=values,
            status=status,
        )
    except FarmRequestError as exc:
        return _form_page(
            request, who, state, error=exc.message, hint=exc.hint, values=values, status=exc.status
        )
    finally:
        if isinstance(upload, UploadFile):
            await upload.close()
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)


__all__ = ["router"]
