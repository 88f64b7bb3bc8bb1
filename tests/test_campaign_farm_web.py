"""The farm dashboard's ``/campaigns``: a campaign's farm cells, as its live view shows them.

A real labgrid coordinator and farm service on loopback; jobs never reach a board: a
test-controlled agent claims and ends them (one done, one failed, and the first of a
cell's two jobs — its run, its accuracy run to come — done), a fourth stays queued. Each job
is submitted with its campaign tag, as ``aidge-deploy campaign`` does for its farm cells (the whole flow on ``farm up`` is in ``test_campaign_e2e.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser import screenshot
from farmkit import ALICE, BOB, Farm, make_farm, needs_farm
from farmweb import browser_login, job_state, wait_for, web_client
from test_farm_service import _register_boards

pytestmark = [needs_farm(), pytest.mark.browser]

BOARDS = {"an386-a": "mps2-an386", "an547-a": "mps3-an547"}
CAMPAIGN = {"id": "kws-variants-0123456789", "name": "kws-variants", "cells": 5}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = make_farm(tmp_path_factory.mktemp("farm-campaigns"))
    agent = _register_boards(farm, BOARDS)
    farm.idle_agent = agent  # type: ignore[attr-defined]
    try:
        yield farm
    finally:
        agent.close()
        farm.stop_all()


def _submit(farm: Farm, export: Any, board: str, cell: str, step: int = 1, steps: int = 1) -> int:
    from aidge_deploy.farm.archive import pack_export
    from aidge_deploy.farm.client import FarmClient
    from aidge_deploy.farm.models import CampaignTag

    with FarmClient(farm.url) as client:
        client.login(*ALICE)
        up = client.upload_export(pack_export(Path(export.path)), name="kws")
        job = client.submit(
            up.id,
            board=board,
            target=None,
            config={},
            campaign=CampaignTag(cell=cell, step=step, steps=steps, **CAMPAIGN),
        )
    return int(job.id)


def _end(farm: Farm, job_id: int, state: str) -> None:
    wait_for(lambda: job_state(farm, job_id, ALICE) == "reserved", 30, "reserved")
    agent: httpx.Client = farm.idle_agent  # type: ignore[attr-defined]
    lease = agent.post(f"/api/agent/jobs/{job_id}/claim").json()["lease"]
    end: dict[str, Any] = {"lease": lease, "state": state}
    if state == "failed":
        end["error"] = "region FLASH overflowed"
    assert agent.post(f"/api/agent/jobs/{job_id}/finish", json=end).status_code == 200


@pytest.fixture(scope="module")
def cells(farm: Farm, export_factory: Any) -> dict[str, int]:
    export = export_factory("output", target="mps2-an386")
    done = _submit(farm, export, "an386-a", "kws · farm:mps2-an386 · float32")
    _end(farm, done, "done")
    failed = _submit(farm, export, "an386-a", "kws <b>big</b> · farm:mps2-an386 · int8")
    _end(farm, failed, "failed")
    # a cell validated on a labelled set: its run is done, its accuracy run is to come
    first = _submit(farm, export, "an386-a", "kws · farm:mps2-an386 · int8 val", 1, 2)
    _end(farm, first, "done")
    queued = _submit(farm, export, "an386-a", "kws · farm:mps2-an386 · int8 h-cost")
    return {"done": done, "failed": failed, "first": first, "queued": queued}


def test_the_campaigns_page_counts_its_farm_cells(farm: Farm, cells: dict[str, int]) -> None:
    with web_client(farm, ALICE) as alice:
        page = alice.get("/campaigns").text
        detail = alice.get(f"/campaigns/{CAMPAIGN['id']}").text
    assert f'data-campaign="{CAMPAIGN["id"]}"' in page and ">kws-variants<" in page
    flat = " ".join(page.split())
    for count in ("5</b> farm cells", "1</b> queued", "1</b> running", "1</b> done",
                  "1</b> failed", "1</b> not submitted yet"):  # fmt: skip
        assert count in flat, count
    assert "cells/min" in flat and "left" in flat  # a rate, and the time left at that rate
    assert '<meta http-equiv="refresh"' in page  # cells still to finish: the page reloads
    for state, job in cells.items():
        # a waiting job is queued, or reserved once labgrid has given it the idle board
        states = {"queued": ("queued", "reserved"), "first": ("done",)}.get(state, (state,))
        assert any(f'data-job="{job}" data-state="{st}"' in detail for st in states), state
    assert "kws &lt;b&gt;big&lt;/b&gt;" in detail and "<b>big</b>" not in detail
    # another user sees none of alice's campaigns, and not its page
    with web_client(farm, BOB) as bob:
        assert CAMPAIGN["id"] not in bob.get("/campaigns").text
        assert bob.get(f"/campaigns/{CAMPAIGN['id']}").status_code == 404


def test_the_campaign_page_renders(farm: Farm, cells: dict[str, int], chromium: Any) -> None:
    page = browser_login(chromium, farm, ALICE, f"/campaigns/{CAMPAIGN['id']}")
    assert page.locator("#cells tbody tr").count() == 4
    assert page.locator("#cells [data-step]").inner_text() == "step 1 of 2"
    assert page.locator("nav a[aria-current=page]").inner_text() == "Campaigns"
    screenshot(page, "farm-campaign-page")
    page.context.close()
