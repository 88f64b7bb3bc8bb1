"""The farm dashboard counts a campaign's cells, not its jobs.

A cell validated on a labelled set is two farm jobs (its run, then its accuracy run), and a
cell run again after a crash has the jobs of both attempts: ``/campaigns`` must still say
"18 farm cells, 17 done, 1 failed" when 35 jobs carry the campaign. Rows in a real SQLite
farm database (``farm.db.Database``), read by the page's own query; and a farm database
made before a job carried its step gains the columns.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from aidge_deploy.farm.auth import Principal, Role
from aidge_deploy.farm.db import CampaignJob, Database, ExportRecord, Job, User
from aidge_deploy.farm.models import CampaignTag
from aidge_deploy.farm.web.campaigns import campaigns

EXPORT = "e" * 64
ADMIN = Principal(user_id=None, name="root", role=Role.ADMIN)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'farm.db'}")
    with db.session() as s:
        s.add(User(id=1, name="alice", password_hash="-", role="user"))
        s.add(ExportRecord(hash=EXPORT, size=1, target="mps2-an386", application="benchmark",
                           protocol="uart"))  # fmt: skip
    return db


def add_job(db: Database, cell: str, state: str, *, step: int = 1, steps: int = 1,
            campaign: str = "zoo-0123456789", cells: int = 3, t: float = 100.0) -> int:  # fmt: skip
    with db.session() as s:
        job = Job(user_id=1, export_hash=EXPORT, target="mps2-an386", state=state,
                  queued_at=t, board="an386-a" if state == "running" else None)  # fmt: skip
        if state in ("done", "failed", "cancelled"):
            setattr(job, f"{state}_at", t + 10)
        s.add(job)
        s.flush()
        s.add(CampaignJob(job_id=job.id, campaign=campaign, name="zoo", cell=cell, cells=cells,
                          step=step, steps=steps))  # fmt: skip
        return int(job.id)


def counts(db: Database, who: Principal = ADMIN) -> dict[str, Any]:
    [row] = campaigns(SimpleNamespace(db=db), who)  # type: ignore[arg-type]
    return {"cells": row.cells, "queued": row.queued, "running": row.running,
            "done": row.done, "failed": row.failed, "active": row.active}  # fmt: skip


def test_a_cell_of_two_jobs_is_one_cell_done_once_its_last_step_is(db: Database) -> None:
    add_job(db, "lenet · farm:mps2-an386 · float32", "done", step=1, steps=2)
    # its run is done, its accuracy run not submitted yet: the cell still runs
    assert counts(db) == {"cells": 3, "queued": 0, "running": 1, "done": 0, "failed": 0,
                          "active": True}  # fmt: skip
    add_job(db, "lenet · farm:mps2-an386 · float32", "queued", step=2, steps=2)
    assert counts(db)["queued"] == 1 and counts(db)["running"] == 0
    with db.session() as s:
        s.get(Job, 2).state = "done"  # type: ignore[union-attr]
    assert counts(db)["done"] == 1 and counts(db)["queued"] == 0
    # a cell without a labelled set is one job; one that does not fit fails at its run
    add_job(db, "tiny · farm:mps2-an386 · float32", "done")
    add_job(db, "fat · farm:mps2-an386 · float32", "failed", step=1, steps=2)
    assert counts(db) == {"cells": 3, "queued": 0, "running": 0, "done": 2, "failed": 1,
                          "active": False}  # fmt: skip


def test_a_cell_run_again_counts_once_where_its_latest_job_is(db: Database) -> None:
    # a campaign stopped with Ctrl-C (its running job cancelled), then run again
    add_job(db, "lenet · farm:mps2-an386 · int8", "done", step=1, steps=2)
    add_job(db, "lenet · farm:mps2-an386 · int8", "cancelled", step=2, steps=2)
    add_job(db, "tiny · farm:mps2-an386 · int8", "cancelled", step=1, steps=2)
    assert counts(db)["failed"] == 2  # stopped: until the campaign runs them again
    add_job(db, "lenet · farm:mps2-an386 · int8", "done", step=1, steps=2, t=200)
    add_job(db, "lenet · farm:mps2-an386 · int8", "done", step=2, steps=2, t=210)
    add_job(db, "tiny · farm:mps2-an386 · int8", "running", step=1, steps=2, t=200)
    got = campaigns(SimpleNamespace(db=db), ADMIN)[0]  # type: ignore[arg-type]
    assert (got.done, got.failed, got.running, got.queued) == (1, 0, 1, 0)
    assert got.boards == ["an386-a"] and len(got.rows) == 6  # the detail page lists every job


def test_a_user_sees_their_own_campaigns_only(db: Database) -> None:
    add_job(db, "lenet · farm:mps2-an386 · float32", "done")
    alice = Principal(user_id=1, name="alice", role=Role.USER)
    bob = Principal(user_id=2, name="bob", role=Role.USER)
    assert counts(db, alice)["done"] == 1
    assert campaigns(SimpleNamespace(db=db), bob) == []  # type: ignore[arg-type]


def test_a_step_past_the_cells_steps_is_refused() -> None:
    tag = {"id": "zoo-1", "name": "zoo", "cell": "c", "cells": 2}
    assert CampaignTag(**tag).steps == 1  # a client that sends no step: a one-job cell
    with pytest.raises(ValueError, match="step 3 of 2"):
        CampaignTag(**tag, step=3, steps=2)


def test_a_farm_database_made_before_steps_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    Database(f"sqlite:///{path}").dispose()
    with sqlite3.connect(path) as conn:  # the table as the first farms with campaigns made it
        conn.execute("DROP TABLE campaign_jobs")
        conn.execute("CREATE TABLE campaign_jobs (job_id INTEGER PRIMARY KEY REFERENCES jobs(id), "
                     "campaign VARCHAR(100), name VARCHAR(100), cell VARCHAR(200), "
                     "cells INTEGER)")  # fmt: skip
        conn.execute("INSERT INTO users (id, name, password_hash, role, disabled, created_at) "
                     "VALUES (1, 'alice', '-', 'user', 0, 0)")  # fmt: skip
        conn.execute("INSERT INTO exports (hash, size, target, application, protocol, model, "
                     "created_at) VALUES (?, 1, 't', 'benchmark', 'uart', '', 0)", (EXPORT,))  # fmt: skip
        conn.execute("INSERT INTO jobs (id, user_id, export_hash, target, state, priority, "
                     "config_json, lease, cancel_requested, stage, queued_at, done_at, "
                     "updated_at) VALUES (1, 1, ?, 't', 'done', 0, '{}', 0, 0, '', 1, 2, 2)",
                     (EXPORT,))  # fmt: skip
        conn.execute("INSERT INTO campaign_jobs VALUES (1, 'zoo-1', 'zoo', 'old cell', 1)")
    db = Database(f"sqlite:///{path}")
    try:
        got = campaigns(SimpleNamespace(db=db), ADMIN)[0]  # type: ignore[arg-type]
        assert (got.cells, got.done, got.rows[0].step, got.rows[0].steps) == (1, 1, 1, 1)
        add_job(db, "new cell", "done", step=1, steps=2, campaign="zoo-1")
    finally:
        db.dispose()
