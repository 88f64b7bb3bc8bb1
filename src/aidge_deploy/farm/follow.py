"""Following a job: its view and new events, waiting for them (the one long poll of a job,
used by the REST API's events and the job page's progress)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.jobviews import job_events_page
from aidge_deploy.farm.models import EventsPage
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.states import TERMINAL


def read_events_page(state: FarmState, who: Principal, job_id: int, after: int) -> EventsPage:
    with state.db.reading() as conn:
        return job_events_page(conn, who, job_id, after)


async def follow_job(
    state: FarmState,
    who: Principal,
    job_id: int,
    *,
    after: int,
    wait: float,
    request: Request | None = None,
    changed: Callable[[], bool] | None = None,
) -> EventsPage:
    """The job and its events after event id ``after`` (``jobviews.job_events_page``),
    waiting up to ``wait`` s (capped by ``long_poll_max``) until there is one, the job has
    ended, or ``changed()`` (run in the thread pool) says something else the caller shows
    changed. Stops waiting as soon as the client of ``request`` is gone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, min(wait, state.settings.long_poll_max))
    while True:
        page = await run_in_threadpool(read_events_page, state, who, job_id, after)
        remaining = deadline - loop.time()
        if page.events or remaining <= 0 or page.job.state in TERMINAL:
            return page
        if changed is not None and await run_in_threadpool(changed):
            return page
        if request is not None and await request.is_disconnected():
            return page
        await state.notifier.wait(f"job:{job_id}", remaining)


__all__ = ["follow_job", "read_events_page"]
