"""The farm's results history: every finished job recorded in the farm's own database.

The same store as ``--history`` and the pytest plugin's (``history.HistoryStore``, its
``history_*`` tables beside the farm's), so a job is recorded the same way: its identity is
the job's model (its name as uploaded; an export from aidge-deploy's export cache is named
after its model file plus a content key, which is dropped: a changed model is the same
series) on the farm board that ran it, with the kind, dtype and iterations read from its
result bundle, every figure with unit and provenance, and the
comparability facts; ``ref`` is ``farm-job:<id>`` (a user sees the records of their own
jobs). The dashboard's history page (``web.history``) charts them per model x board.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aidge_deploy.errors import DeployError
from aidge_deploy.exportcache import entry_model_stem
from aidge_deploy.history.identity import bundle_facts
from aidge_deploy.history.vcs import VcsInfo

if TYPE_CHECKING:
    from aidge_deploy.farm.state import FarmState

log = logging.getLogger("aidge_deploy.farm")

REF_PREFIX = "farm-job:"
SOURCE = "farm"


def job_ref(job_id: int) -> str:
    return f"{REF_PREFIX}{int(job_id)}"


def job_of(ref: str | None) -> int | None:
    """The job id of a record's ``ref`` (None: not a farm job's)."""
    if not ref or not ref.startswith(REF_PREFIX):
        return None
    tail = ref.removeprefix(REF_PREFIX)
    return int(tail) if tail.isdigit() else None


def record_job(state: FarmState, job_id: int) -> None:
    """Record a finished job from its uploaded result bundle (a job without one — a deploy
    that wrote none — is not recorded). Never fails the caller: a job's end is not undone
    by its history."""
    from aidge_deploy.farm.db import Job
    from aidge_deploy.farm.web.bundles import bundle_dir
    from aidge_deploy.farm.web.queries import job_model

    try:
        bundle = bundle_dir(state.job_dir(job_id))
        if bundle is None:
            return
        with state.db.session() as s:
            job = s.get(Job, job_id)
            if job is None:
                return
            name, board = job_model(s, job), job.board
        facts = bundle_facts(bundle)
        name = entry_model_stem(name, facts.target, facts.dtype) or name
        identity = facts.identity(name, board)
        # the farm knows no commit of the user's project: none is recorded
        state.history.record(bundle, identity, source=SOURCE, vcs=VcsInfo(), ref=job_ref(job_id))
    except (DeployError, OSError, ValueError) as exc:
        log.warning("job %s: not recorded in the results history: %s", job_id, exc)
