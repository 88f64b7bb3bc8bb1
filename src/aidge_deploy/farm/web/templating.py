"""Jinja2 rendering of the dashboard's pages (templates ship as package data).

Autoescaping is on for every template: whatever users upload (model, board, user names,
error messages) is shown as text, never interpreted as markup. Pages carry no inline
script or style (the Content-Security-Policy forbids both); scripts are ``/static`` files.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.web.session import CSRF_FIELD, csrf_for, session_token
from aidge_deploy.report.svg import fmt_number

WEB_DIR = Path(str(resources.files("aidge_deploy.farm.web")))
TEMPLATES_DIR = WEB_DIR / "templates"
STATIC_DIR = WEB_DIR / "static"


def when(ts: float | None) -> str:
    if ts is None:
        return "—"
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def ago(ts: float | None) -> str:
    return "—" if ts is None else f"{duration(time.time() - float(ts))} ago"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=jinja2.select_autoescape(["html"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["ago"] = ago
    env.filters["duration"] = duration
    env.globals["fmt"] = fmt_number
    return env


ENV = _env()


def render(
    request: Request,
    name: str,
    who: Principal | None,
    *,
    status: int = 200,
    csrf: str | None = None,
    **context: Any,
) -> HTMLResponse:
    """Render template ``name`` for ``who`` (None: logged out)."""
    token = session_token(request)
    values = {
        "request": request,
        "user": who,
        "csrf_field": CSRF_FIELD,
        "csrf": csrf if csrf is not None else (csrf_for(token) if token and who else ""),
        "page": name.removesuffix(".html"),
        **context,
    }
    html = ENV.get_template(name).render(values)
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})


__all__ = ["ENV", "STATIC_DIR", "TEMPLATES_DIR", "ago", "duration", "render", "when"]
