"""``/api/docs``: the REST API's Swagger UI (5, for the OpenAPI 3.1 FastAPI writes), served
from the package (``swagger-ui-py`` ships its files; read, never imported): no CDN, so it works in a lab without internet, under a
Content-Security-Policy as strict as the pages' (scripts and styles from this site only,
no inline code: the page's one script is ``static/apidocs.js``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from aidge_deploy.errors import ConfigError
from aidge_deploy.farm.web.policy import PAGE_HEADERS
from aidge_deploy.farm.web.templating import ENV

router = APIRouter(include_in_schema=False)
ASSETS = "/api/docs/assets"


@router.get("/api/docs")
def api_docs() -> HTMLResponse:
    html = ENV.get_template("apidocs.html").render(assets=ASSETS)
    return HTMLResponse(
        html,
        headers=dict(PAGE_HEADERS),
    )


def swagger_ui_files() -> Path:
    """The folder of Swagger UI's files in the installed ``swagger-ui-py`` distribution."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or spec.origin is None:
        raise ConfigError(
            "Swagger UI's files are not installed (the swagger-ui-py package)",
            hint="pip install aidge-deploy[farm], or serve with --no-api-docs.",
        )
    return Path(spec.origin).parent / "static"


def mount(app: FastAPI) -> None:
    app.include_router(router)
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_files()), name="api-docs-assets")


__all__ = ["ASSETS", "mount", "router", "swagger_ui_files"]
