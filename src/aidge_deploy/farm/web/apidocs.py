"""``/api/docs``: the REST API's Swagger UI, served from the package (``swagger-ui-bundle``
ships its files): no CDN, so it works in a lab without internet, under a
Content-Security-Policy as strict as the pages' (scripts and styles from this site only,
no inline code: the page's one script is ``static/apidocs.js``)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from aidge_deploy.farm.web import PAGE_CSP
from aidge_deploy.farm.web.templating import ENV

router = APIRouter(include_in_schema=False)
ASSETS = "/api/docs/assets"


@router.get("/api/docs")
def api_docs() -> HTMLResponse:
    html = ENV.get_template("apidocs.html").render(assets=ASSETS)
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": PAGE_CSP,
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
        },
    )


def mount(app: FastAPI) -> None:
    from swagger_ui_bundle import swagger_ui_path

    app.include_router(router)
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="api-docs-assets")


__all__ = ["ASSETS", "mount", "router"]
