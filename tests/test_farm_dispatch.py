"""The service's dispatcher, one pass at a time, against ``FakeCoordinator`` (a named test
double of labgrid's coordinator that schedules with labgrid's own scheduler): what it
reserves, hands out, frees, sweeps and reconciles. The end-to-end tests run the real
coordinator; these pin the dispatcher's rules down, fast, with the real database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fakecoordinator import FakeCoordinator
from farmkit import needs_farm

pytestmark = [needs_farm()]

TARGET = "mps2-an386"


class Rig:
    """A service state on a fake coordinator, with users, one agent and its boards."""

    def __init__(
        self, root: Path, boards: tuple[str, ...] = ("b1", "b2"), job_retries: int = 1
    ) -> None:
        from aidge_deploy.farm.agents import register_agent
        from aidge_deploy.farm.auth import Principal, add_user
        from aidge_deploy.farm.db import ExportOwner, ExportRecord
        from aidge_deploy.farm.models import BoardSpec, RegisterRequest
        from aidge_deploy.farm.settings import FarmSettings
        from aidge_deploy.farm.state import FarmState
        from aidge_deploy.farm.states import Role

        self.fake = FakeCoordinator()
        self.state = FarmState(
            FarmSettings(data_dir=root, agent_timeout=5.0, job_retries=job_retries), link=self.fake
        )
        self.dispatcher = self.state.dispatcher
        with self.state.db.session() as s:
            user = add_user(s, "alice", "alice-pass-123")
            add_user(s, "admin", "admin-pass-123", role=Role.ADMIN)
            s.add(ExportRecord(hash="e" * 64, size=1, target=TARGET, application="a", protocol="p"))
            s.flush()
            s.add(ExportOwner(export_hash="e" * 64, user_id=user.id))
            self.alice = Principal(user_id=user.id, name="alice", role=Role.USER)
            self.agent = Principal(user_id=None, name="host-a", role=None, agent="host-a")
            register_agent(
                s,
                self.agent,
                RegisterRequest(boards=[BoardSpec(name=b, target=TARGET) for b in boards]),
            )

    def submit(self, board: str | None = None, priority: float = 0.0) -> int:
        from aidge_deploy.farm.jobs import submit_job
        from aidge_deploy.farm.models import SubmitRequest

        with self.state.db.session() as s:
            body = SubmitRequest(export="e" * 64, board=board, priority=priority)
            return submit_job(s, self.alice, body)

    def job(self, job_id: int) -> Any:
        from aidge_deploy.farm.db import Job

        with self.state.db.session() as s:
            return s.get(Job, job_id)

    def run(self, scenario: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            self.state.notifier.bind(asyncio.get_running_loop())
            self.dispatcher._loop = asyncio.get_running_loop()
            self.dispatcher._wake = asyncio.Event()
            await self.dispatcher.connect()
            await scenario()

        asyncio.run(main())

    async def tick(self, full: bool = True) -> None:
        """One pass of the dispatcher (``full``: with the whole reservation check), then a
        second for what the first one's requests made the coordinator push."""
        for _ in range(2):
            if full:
                self.dispatcher._last_full = 0.0
                self.dispatcher._last_agent_check = 0.0
            await self.dispatcher.tick()

    def claim(self, job_id: int) -> int:
        """What the agent does: lock the board for the job's reservation, then claim it."""
        from aidge_deploy.farm.agents import claim_job

        job = self.job(job_id)
        self.fake.places[job.board].acquired = self.fake.owner
        self.fake.table[job.token].state = self.fake.table[job.token].state.ACQUIRED
        with self.state.db.session() as s:
            return claim_job(s, self.agent, job_id)

    def finish(
        self, job_id: int, lease: int, released: bool = False, error_type: str | None = None
    ) -> str:
        """The agent's report of the job's end: done, or failed with ``error_type``."""
        from aidge_deploy.farm.agents import finish_job
        from aidge_deploy.farm.models import FinishRequest
        from aidge_deploy.farm.states import JobState

        end = FinishRequest(
            lease=lease,
            state=JobState.DONE if error_type is None else JobState.FAILED,
            released=released,
            error=None if error_type is None else f"it failed ({error_type})",
            error_type=error_type,
        )
        with self.state.db.session() as s:
            state, _already, release = finish_job(
                s, self.agent, job_id, end, retries=self.state.settings.job_retries
            )
        self.dispatcher.release_later(release)
        return state

    def attempts(self, job_id: int) -> list[tuple[int, str | None, str, str | None, bool]]:
        from sqlalchemy import select

        from aidge_deploy.farm.db import JobAttempt

        with self.state.db.session() as s:
            rows = s.scalars(
                select(JobAttempt).where(JobAttempt.job_id == job_id).order_by(JobAttempt.number)
            )
            return [(a.number, a.board, a.state, a.failure_class, a.retried) for a in rows]

    def close(self) -> None:
        self.state.db.dispose()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def test_jobs_are_queued_in_labgrid_and_a_freed_board_goes_to_the_next(rig: Rig) -> None:
    """Each queued job is one tag reservation (its target, the farm, available boards
    only, its priority); labgrid's allocations hand jobs to the agent; a job's end
    cancels its reservation, then unlocks its board, and the next job gets it."""
    from aidge_deploy.farm.db import Reservation

    jobs = [rig.submit() for _ in range(3)]

    async def scenario() -> None:
        await rig.tick()
        assert len(rig.fake.table) == 3
        first = rig.fake.table[rig.job(jobs[0]).token]
        assert first.filters == {"farm": "farm", "avail": "yes", "target": "mps2_an386"}
        assert [rig.job(j).state for j in jobs] == ["reserved", "reserved", "queued"]
        assert {rig.job(j).board for j in jobs[:2]} == {"b1", "b2"}
        with rig.state.db.session() as s:  # every reservation is owned by its job's row
            owned = {r.token: r.job_id for r in s.query(Reservation)}
        assert owned == {rig.job(j).token: j for j in jobs}
        lease = rig.claim(jobs[0])
        rig.finish(jobs[0], lease)
        board = rig.job(jobs[0]).board
        await rig.tick(full=False)
        freed = [("cancel", rig.job(jobs[0]).token), ("release", board)]
        assert rig.fake.calls[-2:] == freed or rig.fake.calls[-3:-1] == freed
        # labgrid allocated the freed board to the next job in the same pass
        assert rig.job(jobs[2]).state == "reserved" and rig.job(jobs[2]).board == board
        assert rig.job(jobs[0]).token not in rig.fake.table

    rig.run(scenario)


def test_a_cancel_racing_the_reservation_or_the_claim_never_starts_the_job(rig: Rig) -> None:
    """A job cancelled while its reservation is being made does not take it (it is
    cancelled at once); a job cancelled while reserved is never claimed: the claim loses
    (409, release the board) and its reservation is cancelled."""
    from aidge_deploy.farm.jobs import cancel_job
    from aidge_deploy.farm.refusals import FarmRequestError

    racing = rig.submit()
    reserve = rig.fake.reserve

    async def reserve_then_cancel(tags: dict[str, str], prio: float = 0.0) -> str:
        token = await reserve(tags, prio)
        with rig.state.db.session() as s:  # the user's cancel lands between the two
            assert cancel_job(s, rig.alice, racing).token is None  # no reservation yet
        return token

    async def scenario() -> None:
        rig.fake.reserve = reserve_then_cancel  # type: ignore[method-assign]
        await rig.tick()
        rig.fake.reserve = reserve  # type: ignore[method-assign]
        job = rig.job(racing)
        assert job.state == "cancelled" and job.token is None
        assert rig.fake.live_reservations() == {}  # cancelled at once, owned by nobody
        late = rig.submit()
        await rig.tick()
        assert rig.job(late).state == "reserved"
        from aidge_deploy.farm.actions import cancel

        cancel(rig.state, rig.alice, late)
        with pytest.raises(FarmRequestError) as lost:
            rig.claim(late)
        assert lost.value.status == 409 and lost.value.extra["release"] is True
        await rig.tick()
        assert rig.job(late).state == "cancelled" and rig.fake.live_reservations() == {}

    rig.run(scenario)


def test_cancel_and_claim_are_one_compare_and_set_each(rig: Rig) -> None:
    """Cancels and claims of reserved jobs raced from threads on the real database: exactly
    one of each pair wins; a cancel that won says the job was cancelled while reserved and
    the job's history has no ``building``; a claim that won leaves the cancel a request
    (cancelled in ``building``, stopped by its agent). A claim never wins once a cancel
    was asked (``cancel_requested``), and every cancel records the state it was made in."""
    import threading

    from sqlalchemy import select, update

    from aidge_deploy.farm.actions import cancel
    from aidge_deploy.farm.agents import claim_job, finish_job
    from aidge_deploy.farm.db import Job, JobEvent
    from aidge_deploy.farm.models import FinishRequest
    from aidge_deploy.farm.refusals import FarmRequestError
    from aidge_deploy.farm.states import JobState

    cancelled_in: dict[int, str] = {}
    claimed: dict[int, bool] = {}

    async def scenario() -> None:
        queued = rig.submit(board="b1")
        assert cancel(rig.state, rig.alice, queued).cancelled_in == "queued"
        await rig.tick()
        for _round in range(20):
            pair = [rig.submit(board="b1"), rig.submit(board="b2")]
            await rig.tick()
            assert {rig.job(j).state for j in pair} == {"reserved"}
            go = threading.Barrier(4)

            def do_cancel(job_id: int, go: threading.Barrier = go) -> None:
                go.wait()
                cancelled_in[job_id] = str(cancel(rig.state, rig.alice, job_id).cancelled_in)

            def do_claim(job_id: int, go: threading.Barrier = go) -> None:
                go.wait()
                try:
                    with rig.state.db.session() as s:
                        claim_job(s, rig.agent, job_id)
                    claimed[job_id] = True
                except FarmRequestError as exc:
                    assert exc.status == 409 and exc.extra["release"] is True
                    claimed[job_id] = False

            threads = [threading.Thread(target=f, args=(j,)) for j in pair for f in (do_cancel, do_claim)]  # fmt: skip
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            for j in pair:  # what a claim that won leaves to its agent: end it cancelled
                job = rig.job(j)
                if job.state == "building":
                    with rig.state.db.session() as s:
                        end = FinishRequest(lease=job.lease, state=JobState.CANCELLED)
                        rig.dispatcher.release_later(finish_job(s, rig.agent, j, end)[2])
            await rig.tick()
        # a claim after a cancel was asked loses even if the state still says reserved
        late = rig.submit(board="b1")
        await rig.tick()
        with rig.state.db.session() as s:
            s.execute(update(Job).where(Job.id == late).values(cancel_requested=True))
        with pytest.raises(FarmRequestError), rig.state.db.session() as s:
            claim_job(s, rig.agent, late)
        with rig.state.db.session() as s:
            for job_id, was in cancelled_in.items():
                seen = list(s.scalars(select(JobEvent.state).where(JobEvent.job_id == job_id, JobEvent.kind == "state")))  # fmt: skip
                if claimed[job_id]:
                    assert was == "building" and "building" in seen, (job_id, seen)
                    assert seen[-1] == "cancelled", (job_id, seen)
                else:
                    assert was == "reserved", (job_id, was)
                    assert "building" not in seen and seen[-1] == "cancelled", (job_id, seen)

    rig.run(scenario)
    assert len(cancelled_in) == len(claimed) == 40


def test_the_sweep_cancels_reservations_no_live_job_owns(rig: Rig) -> None:
    """A farm reservation whose job ended (or that no job row holds: the service stopped
    between making and recording it) is cancelled; other users' reservations are not."""
    job = rig.submit()

    async def scenario() -> None:
        await rig.tick()
        orphan = await rig.fake.reserve({"farm": "farm", "name": "nowhere"})
        rig.fake.owner = "lab/bob"
        theirs = await rig.fake.reserve({"name": "nowhere"})
        rig.fake.owner = "farm/aidge-farm"
        await rig.tick()
        live = set(rig.fake.live_reservations())
        assert orphan not in live and theirs in live and rig.job(job).token in live

    rig.run(scenario)


def test_a_coordinator_restart_is_reconciled(rig: Rig) -> None:
    """labgrid drops every lock and reservation when it restarts: a reserved job that
    had not started waits again, a queued one gets a new reservation, and the board of
    a running job is locked again for it."""
    from aidge_deploy.farm.dispatch import RELOCK_PRIO

    jobs = [rig.submit() for _ in range(3)]

    async def scenario() -> None:
        await rig.tick()
        running, reserved, queued = jobs
        rig.claim(running)
        board = rig.job(running).board
        rig.fake.restart()
        await rig.dispatcher.connect()
        await rig.tick()
        assert rig.job(running).state == "building"
        relock = rig.fake.table[rig.job(running).token]
        assert relock.prio == RELOCK_PRIO and rig.fake.places[board].acquired == rig.fake.owner
        assert rig.job(reserved).state in ("queued", "reserved")
        await rig.tick()
        assert rig.job(reserved).state == "reserved"  # the other board, again
        assert rig.job(queued).state == "queued" and rig.job(queued).token in rig.fake.table

    rig.run(scenario)


def test_a_lost_agent_fails_its_running_jobs_and_requeues_its_reserved_ones(
    tmp_path: Path,
) -> None:
    """With no retry left (``job_retries=0``) a lost agent's running job fails, its class
    infrastructure."""
    from sqlalchemy import update

    from aidge_deploy.farm.db import Agent

    rig = Rig(tmp_path, job_retries=0)
    jobs = [rig.submit() for _ in range(2)]

    async def scenario() -> None:
        await rig.tick()
        rig.claim(jobs[0])
        with rig.state.db.session() as s:
            s.execute(update(Agent).values(last_seen=0.0))
        rig.dispatcher._started = 0.0
        await rig.tick()
        lost = rig.job(jobs[0])
        assert lost.state == "failed" and lost.error.startswith("agent lost"), lost.error
        assert lost.failure_class == "infrastructure"
        assert rig.attempts(jobs[0]) == [(1, lost.board, "failed", "infrastructure", False)]
        assert rig.job(jobs[1]).state == "queued"
        assert {p.tags["avail"] for p in rig.fake.places.values()} == {"no"}
        assert rig.fake.live_reservations().keys() == {rig.job(jobs[1]).token}

    try:
        rig.run(scenario)
    finally:
        rig.close()


def test_an_infrastructure_failure_is_retried_once_on_the_other_board(rig: Rig) -> None:
    """A run that failed for the lab's reason (``BoardFault``: the emulator crashed) goes
    back to the queue with a reservation naming the target's other board, labgrid hands
    it there, and its second infrastructure failure ends it (one retry): failed, class
    infrastructure, both attempts kept."""
    job = rig.submit()

    async def scenario() -> None:
        await rig.tick()
        first = rig.job(job).board
        other = ({"b1", "b2"} - {first}).pop()
        assert rig.finish(job, rig.claim(job), error_type="BoardFault") == "queued"
        await rig.tick()
        again = rig.job(job)
        assert again.attempt == 2 and again.error is None and again.failure_class is None
        assert rig.fake.table[again.token].filters["name"] == other
        assert again.state == "reserved" and again.board == other
        assert rig.attempts(job) == [(1, first, "failed", "infrastructure", True)]
        assert rig.finish(job, rig.claim(job), error_type="FlashError") == "failed"
        ended = rig.job(job)
        assert ended.failure_class == "infrastructure" and ended.attempt == 2
        assert rig.attempts(job) == [
            (1, first, "failed", "infrastructure", True),
            (2, other, "failed", "infrastructure", False),
        ]
        _client_says(rig, job, "infrastructure", "an infrastructure failure", "after 2 attempts")

    rig.run(scenario)


def _client_says(rig: Rig, job: int, cls: str, *words: str) -> None:
    """The ``api`` client's error for the job's view as the service shows it (the job JSON
    of ``GET /jobs/{id}``): ``FarmJobFailed`` naming its class and attempts."""
    from aidge_deploy.errors import FarmJobFailed
    from aidge_deploy.farm.jobviews import job_status
    from aidge_deploy.farm.remote import job_error

    with rig.state.db.reading() as conn:
        view = job_status(conn, rig.alice, job)
    assert view.failure_class == cls and view.attempts is not None
    failed = job_error(view, "http://farm:8000")
    assert isinstance(failed, FarmJobFailed), failed
    assert failed.failure_class == cls and failed.attempts == view.attempt
    for word in words:
        assert word in str(failed), failed
    # the MCP server's farm_status shows the same view's class and attempts
    from aidge_deploy.mcpserver.farmtools import FarmJob, job_output
    from aidge_deploy.mcpserver.session import FarmAccess, Session, SessionSettings

    session = Session(SessionSettings(farm=FarmAccess("http://farm:8000/api", "alice")))
    followed = FarmJob(session, job, None, session.budget.reserve(f"farm job {job}"))
    assert session.budget.state().runs_in_progress == 1
    status = job_output(session, followed, view)
    assert status.failure is not None and status.state == "failed"
    # the job has ended: the budget it reports no longer counts it in progress, whether
    # or not its follower has seen the end yet
    assert status.budget.runs_in_progress == 0 and session.budget.state().runs_used == 1
    assert status.failure.failure_class == cls and status.failure.attempts == view.attempt


def test_a_user_failure_is_not_retried_and_a_done_run_is_an_attempt(rig: Rig) -> None:
    """A run that failed for the user's reason (the firmware crashed: ``ExecutionError``;
    the build) ends the job at once, class user; a job that asked for no retry fails at
    its first infrastructure failure; a done run is its job's one attempt."""
    from aidge_deploy.farm.jobs import submit_job
    from aidge_deploy.farm.models import SubmitRequest

    crash, build, done = rig.submit(), rig.submit(), rig.submit()
    with rig.state.db.session() as s:
        pinned = submit_job(s, rig.alice, SubmitRequest(export="e" * 64, retries=0))

    async def scenario() -> None:
        await rig.tick()
        assert rig.finish(crash, rig.claim(crash), error_type="ExecutionError") == "failed"
        assert rig.finish(build, rig.claim(build), error_type="BuildError") == "failed"
        for job in (crash, build):
            assert rig.job(job).failure_class == "user" and rig.job(job).attempt == 1
            assert rig.attempts(job) == [(1, rig.job(job).board, "failed", "user", False)]
        _client_says(rig, crash, "user", "a user failure", "does not retry")
        await rig.tick()
        assert rig.finish(done, rig.claim(done)) == "done"
        assert rig.attempts(done) == [(1, rig.job(done).board, "done", None, False)]
        await rig.tick()
        assert rig.finish(pinned, rig.claim(pinned), error_type="BoardFault") == "failed"
        assert rig.job(pinned).failure_class == "infrastructure"

    rig.run(scenario)


def test_a_retried_job_for_a_named_board_ends_when_its_health_check_drains_it(
    rig: Rig,
) -> None:
    """A job submitted for board b1 that failed there for the lab's reason waits for b1
    again; once b1's health check drains it, the job ends failed (infrastructure, the
    attempt's error, why it is not run again) instead of waiting for a readmission. A job
    for b1 that never ran keeps waiting; one by target is not touched."""
    from aidge_deploy.farm.failures import fail_pinned_retries
    from aidge_deploy.farm.health import DRAIN_REASON, HEALTH_DRAINER, drain_board

    retried = rig.submit(board="b1")

    async def scenario() -> None:
        await rig.tick()
        assert rig.finish(retried, rig.claim(retried), error_type="BoardFault") == "queued"
        fresh, by_target = rig.submit(board="b1"), rig.submit()
        with rig.state.db.session() as s:
            drain_board(s, "b1", DRAIN_REASON, HEALTH_DRAINER)
            assert fail_pinned_retries(s, "b1", DRAIN_REASON) == [retried]
        job = rig.job(retried)
        assert (job.state, job.failure_class, job.attempt) == ("failed", "infrastructure", 2)
        assert "it failed (BoardFault)" in job.error and "health check then drained" in job.error
        assert job.error_type == "BoardFault" and "by target" in job.error_hint
        assert [a[2:] for a in rig.attempts(retried)] == [("failed", "infrastructure", True)]
        assert rig.job(fresh).state == "queued" and rig.job(by_target).state == "queued"
        with rig.state.db.session() as s:
            assert fail_pinned_retries(s, "b1", DRAIN_REASON) == []  # once

    rig.run(scenario)


def test_a_place_locked_outside_the_farm_is_shown_held(rig: Rig) -> None:
    from aidge_deploy.farm.boards import board_views

    async def scenario() -> None:
        await rig.tick()
        rig.fake.lock_outside("b2", "lab-pc/bob")
        with rig.state.db.session() as s:
            views = {v.name: v for v in board_views(s, rig.dispatcher.held_outside())}
        assert views["b2"].state == "held" and views["b2"].held_by == "lab-pc/bob"
        assert views["b1"].state == "idle" and views["b1"].held_by is None

    rig.run(scenario)
