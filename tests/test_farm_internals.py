"""Farm internals that need no running farm: the token cache's invalidation rules and the
job marks a runner takes (``reaper``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from farmkit import needs_farm

pytestmark = [needs_farm()]


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    from aidge_deploy.farm.db import Database

    database = Database(f"sqlite:///{tmp_path / 'farm.db'}")
    yield database
    database.dispose()


def _resolve(db, cache, token):  # type: ignore[no-untyped-def]
    from aidge_deploy.farm.auth import resolve_token_cached

    with db.session() as s:
        return resolve_token_cached(s, token, cache)


def test_token_cache_forgets_what_this_process_changes(db) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    from aidge_deploy.farm.auth import (
        TokenCache,
        add_user,
        issue_agent_token,
        issue_user_token,
        revoke_token,
        set_password,
    )
    from aidge_deploy.farm.db import User

    cache = TokenCache(ttl=3600.0)
    cache.watch(db.sessions)
    with db.session() as s:
        alice = add_user(s, "alice", "alice-pass-123")
        add_user(s, "bob", "bob-pass-1234")
        t1, _ = issue_user_token(s, alice)
        t2, _ = issue_user_token(s, alice)
        short, _ = issue_user_token(s, alice, ttl=1.0)
        agent = issue_agent_token(s, "host-a")
    for token in (t1, t2, agent):
        assert _resolve(db, cache, token) is not None
        assert cache.get(token) is not None  # now answered from memory
    assert _resolve(db, cache, "not-a-token") is None and cache.get("not-a-token") is None

    # logout (a bulk delete) ends that session at once, not the others
    with db.session() as s:
        revoke_token(s, t1)
    assert cache.get(t1) is None and _resolve(db, cache, t1) is None
    assert _resolve(db, cache, t2) is not None
    # an admin disables alice (an ORM update): her token stops at once
    with db.session() as s:
        s.scalar(select(User).where(User.name == "alice")).disabled = True  # type: ignore[union-attr]
    assert cache.get(t2) is None and _resolve(db, cache, t2) is None
    with db.session() as s:
        s.scalar(select(User).where(User.name == "alice")).disabled = False  # type: ignore[union-attr]
    assert _resolve(db, cache, t2) is not None
    # a new password ends her sessions
    with db.session() as s:
        set_password(s, "alice", "another-pass-1")
    assert _resolve(db, cache, t2) is None
    # re-issuing an agent's token revokes the old one
    assert _resolve(db, cache, agent) is not None
    with db.session() as s:
        issue_agent_token(s, "host-a")
    assert _resolve(db, cache, agent) is None
    # an expired token is refused even when cached
    time.sleep(1.1)
    assert _resolve(db, cache, short) is None


def test_token_cache_sees_another_process_change_within_its_ttl(db) -> None:  # type: ignore[no-untyped-def]
    from aidge_deploy.farm.auth import TokenCache, add_user, issue_user_token, revoke_token
    from aidge_deploy.farm.db import Database

    cache = TokenCache(ttl=0.5)
    cache.watch(db.sessions)
    with db.session() as s:
        token, _ = issue_user_token(s, add_user(s, "carol", "carol-pass-123"))
    assert _resolve(db, cache, token) is not None
    other = Database(db.url)  # e.g. `aidge-deploy farm user passwd` on the same file
    with other.session() as s:
        revoke_token(s, token)
    other.dispose()
    time.sleep(0.6)
    assert _resolve(db, cache, token) is None


_CHILD = """
import subprocess, sys
from aidge_deploy.farm.reaper import take_job_mark
ok = take_job_mark(sys.argv[1])
child = subprocess.Popen(["sleep", "30"])
print(ok, child.pid, flush=True)
sys.stdin.read()
child.kill()
"""


def test_a_runner_takes_its_jobs_mark_and_only_its_agent_ends_it() -> None:
    from aidge_deploy.farm.reaper import (
        AGENT_ENV,
        JOB_ENV,
        SPARE_MARK,
        end_job_processes,
        job_processes,
    )

    env = {**os.environ, JOB_ENV: SPARE_MARK, AGENT_ENV: "agent-a"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, "4242"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        ok, child = proc.stdout.readline().split()
        assert ok == "True"
        # the runner itself and what it started carry the job's mark
        assert sorted(job_processes("4242", agent="agent-a")) == sorted([proc.pid, int(child)])
        # another farm's agent with a job 4242 of its own leaves them alone
        assert job_processes("4242", agent="agent-b") == []
        assert end_job_processes("4242", agent="agent-b") == []
        assert proc.poll() is None
        ended = end_job_processes("4242", grace=5.0, agent="agent-a")
        assert sorted(ended) == sorted([proc.pid, int(child)])
        proc.wait(10)
        assert job_processes("4242", agent="agent-a") == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _jobs_db(db, user_name: str):  # type: ignore[no-untyped-def]
    from aidge_deploy.farm.auth import add_user
    from aidge_deploy.farm.db import ExportRecord

    with db.session() as s:
        user = add_user(s, user_name, f"{user_name}-pass-1234")
        s.add(ExportRecord(hash="0" * 64, size=1, target="t", application="a", protocol="p"))
        return user.id


def test_job_views_of_a_list_are_each_jobs_own(db) -> None:  # type: ignore[no-untyped-def]
    """A list of jobs shows each job as its own status request does (one rule, one
    statement), and another user's job is "not found"."""
    from aidge_deploy.farm.auth import Principal
    from aidge_deploy.farm.db import Job
    from aidge_deploy.farm.jobviews import job_status, list_job_views
    from aidge_deploy.farm.refusals import FarmRequestError
    from aidge_deploy.farm.states import Role

    user_id = _jobs_db(db, "dave")
    with db.session() as s:
        states = ["queued", "reserved", "queued", "done", "queued", "building", "reserved"]
        for i, st in enumerate(states * 3):
            target = "mps2-an386" if i % 3 else "mps3-an547"
            s.add(Job(user_id=user_id, export_hash="0" * 64, target=target, state=st))
    dave = Principal(user_id=user_id, name="dave", role=Role.USER)
    other = Principal(user_id=user_id + 1000, name="frank", role=Role.USER)
    with db.reading() as conn:
        listed = list_job_views(conn, dave)
        assert len(listed) == 21 and any((v.queue_position or 0) > 0 for v in listed)
        for view in listed:
            status = job_status(conn, dave, view.id)
            assert status.phases == ({} if view.state == "done" else None)
            # a job's own view lists its ended runs on boards (none here); lists do not
            assert status.attempts == [] and view.attempts is None
            status.phases = status.attempts = None
            assert status == view
            with pytest.raises(FarmRequestError) as refused:
                job_status(conn, other, view.id)
            assert refused.value.status == 404


def test_queue_position_follows_labgrids_order(db) -> None:  # type: ignore[no-untyped-def]
    """Ahead of a job: queued jobs of its target that labgrid serves first — a higher
    priority, or as high and a reservation made earlier (a reservation made again goes to
    the back; a job without one yet is behind all that have one) — and that may take its
    board: never those waiting for another board, nor another target's."""
    from aidge_deploy.farm.auth import Principal
    from aidge_deploy.farm.db import Job, Reservation
    from aidge_deploy.farm.jobviews import job_status
    from aidge_deploy.farm.states import Role

    user_id = _jobs_db(db, "erin")
    with db.session() as s:
        clock = iter(range(100, 200))

        def job(board: str | None, target: str = "mps2-an386", prio: float = 0.0, st: str = "queued", reserved: bool = True) -> int:  # fmt: skip
            j = Job(user_id=user_id, export_hash="0" * 64, target=target, requested_board=board,
                    priority=prio, state=st)  # fmt: skip
            s.add(j)
            s.flush()
            if reserved:
                j.token = f"T{j.id}"
                s.add(Reservation(token=j.token, job_id=j.id, prio=prio, created_at=next(clock)))
            return int(j.id)

        job("an386-b")  # waits for another board
        job(None, target="mps3-an547")  # another target
        job("an386-a", st="building")  # not queued
        any1 = job(None)  # may take an386-a
        pinned = job("an386-a")
        job("an386-a")  # reserved later, same priority: behind
        urgent = job("an386-a", prio=10.0)  # younger but served first
        any2 = job(None)
        reserved = job("an386-a", st="reserved")
        waiting = job(None, reserved=False)  # no reservation yet: behind every one
        s.flush()
        # any1's reservation was lost and made again: it goes to the back of its priority
        s.get(Reservation, f"T{any1}").created_at = 500  # type: ignore[union-attr]
        expected = {pinned: 1, any1: 5, urgent: 0, any2: 4, reserved: 0, waiting: 6}
    admin = Principal(user_id=None, name="root", role=Role.ADMIN)
    with db.reading() as conn:
        for job_id, ahead in expected.items():
            assert job_status(conn, admin, job_id).queue_position == ahead, (job_id, ahead)


def test_farm_libraries_survive_a_pytester_run_in_the_same_worker(tmp_path: Path) -> None:
    """pytester drops the modules a test imported first; the farm kit (a plugin, loaded
    before any test) imports SQLAlchemy so that a farm started inside a pytester test
    does not leave the next farm test of that worker with a half re-imported SQLAlchemy."""
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import farmkit
from _pytest.pytester import SysModulesSnapshot

def users(path):
    from aidge_deploy.farm.auth import add_user
    from aidge_deploy.farm.db import Database
    db = Database("sqlite:///" + path)
    with db.session() as s:
        add_user(s, "alice", "alice-pass-123")
    db.dispose()

snapshot = SysModulesSnapshot()  # what a pytester test does around its body
users({str(tmp_path / "a.db")!r})
snapshot.restore()
users({str(tmp_path / "b.db")!r})  # the next farm test of the worker
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_notifier_forgets_a_key_when_its_last_waiter_leaves() -> None:
    """A waiter that is woken, times out or is cancelled (its client went away) leaves no
    event behind: keys nobody notifies again do not pile up."""
    import asyncio

    from aidge_deploy.farm.notify import Notifier

    async def scenario() -> None:
        n = Notifier(slice_s=0.01)
        n.bind(asyncio.get_running_loop())
        for i in range(50):  # pages of finished jobs: never notified again
            await n.wait(f"job:{i}", 5.0)
        assert len(n) == 0
        waiter = asyncio.create_task(n.wait("job:x", 0.01))
        other = asyncio.create_task(Notifier.wait(n, "job:x", 0.01))
        await asyncio.sleep(0)
        assert len(n) == 1  # one key, two waiters
        await asyncio.gather(waiter, other)
        assert len(n) == 0
        slow = Notifier(slice_s=60.0)
        slow.bind(asyncio.get_running_loop())
        gone = asyncio.create_task(slow.wait("job:y", 60.0))
        await asyncio.sleep(0)
        assert len(slow) == 1
        gone.cancel()  # the request's task, cancelled
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert len(slow) == 0
        woken = asyncio.create_task(slow.wait("job:z", 60.0))
        await asyncio.sleep(0)
        slow.notify("job:z")
        await woken  # woken at once, not after 60 s
        assert len(slow) == 0

    asyncio.run(scenario())


def test_a_long_poll_stops_when_its_client_is_gone(tmp_path: Path) -> None:
    """The job's long poll (REST events and the job page's progress) stops waiting when
    its client disconnected, instead of holding a waiter until ``long_poll_max``."""
    import asyncio

    from starlette.requests import Request

    from aidge_deploy.farm.auth import Principal, add_user
    from aidge_deploy.farm.db import ExportRecord, Job, JobEvent
    from aidge_deploy.farm.follow import follow_job
    from aidge_deploy.farm.notify import Notifier
    from aidge_deploy.farm.settings import FarmSettings
    from aidge_deploy.farm.state import FarmState
    from aidge_deploy.farm.states import Role

    state = FarmState(FarmSettings(data_dir=tmp_path, long_poll_max=3.0))
    with state.db.session() as s:
        user = add_user(s, "frank", "frank-pass-123")
        s.add(ExportRecord(hash="0" * 64, size=1, target="t", application="a", protocol="p"))
        s.flush()
        job = Job(user_id=user.id, export_hash="0" * 64, target="mps2-an386", state="queued")
        s.add(job)
        s.flush()
        event = JobEvent(job_id=job.id, kind="state", state="queued")
        s.add(event)
        s.flush()
        job_id, last = job.id, event.id
    who = Principal(user_id=user.id, name="frank", role=Role.USER)
    waited: list[str] = []

    class Counting(Notifier):
        async def wait(self, key: str, timeout: float) -> None:
            waited.append(key)
            await super().wait(key, timeout)

    async def poll(disconnected: bool) -> Any:
        state.notifier = Counting(slice_s=0.05)
        state.notifier.bind(asyncio.get_running_loop())

        async def receive() -> dict:  # type: ignore[type-arg]
            if disconnected:
                return {"type": "http.disconnect"}
            await asyncio.sleep(3600)
            return {}

        request = Request({"type": "http", "method": "GET", "headers": []}, receive)
        return await follow_job(state, who, job_id, after=last, wait=3.0, request=request)

    try:
        page = asyncio.run(poll(disconnected=True))
        assert page.events == [] and waited == []  # returned without waiting
        asyncio.run(poll(disconnected=False))
        assert waited and set(waited) == {f"job:{job_id}"}  # a client still there: it waits
    finally:
        state.db.dispose()


def test_a_freed_board_goes_to_the_next_job_at_once_and_a_late_unlock_spares_it(
    farm_root: Path,
) -> None:
    """A real labgrid coordinator: a job that frees its board (reservation cancelled
    first, then the lock, as the agent does) hands it to the waiting reservation in the
    same scheduling pass, not at some later one; and the first job's late unlock (the
    service's, after that job's end report) leaves the next job's lock alone."""
    import asyncio

    from aidge_deploy.farm.coordinator import CoordinatorLink, ReservationState
    from farmkit import Farm

    farm = Farm(root=farm_root)
    farm.start_coordinator()
    tags = {"farm": "t", "target": "x"}

    async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
        for _ in range(500):  # 10 s: the coordinator's push reaches the session (ms)
            if check():
                return
            await asyncio.sleep(0.02)
        raise AssertionError(what)

    async def scenario() -> None:
        link = CoordinatorLink(farm.coordinator, "t")
        await link.connect()
        try:
            await link.ensure_place("b1", tags)
            first = await link.reserve(tags)
            await until(lambda: link.allocations().get(first) == "b1", "first allocated")
            await link.acquire("b1", first)
            second = await link.reserve(tags)
            assert (await link.reservations())[second].state == ReservationState.WAITING
            await link.cancel(first)
            await link.release("b1")
            info = (await link.reservations())[second]
            assert info.state == ReservationState.ALLOCATED and info.place == "b1"
            await until(lambda: link.allocations().get(second) == "b1", "the push")
            await link.acquire("b1", second)
            await until(lambda: link.may_release("b1", second), "the lock's push")
            assert link.may_release("b1", first) is False
            assert link.may_release("elsewhere", first) is True  # a place it does not know
            assert (await link.places())["b1"].acquired  # still the second job's lock
        finally:
            await link.close()

    try:
        asyncio.run(scenario())
    finally:
        farm.stop_all()


def test_the_api_backend_is_one_registered_class_for_every_target() -> None:
    """``(target, "api")`` is listed for every target and is the one remote backend the
    ``aidge_deploy.remote_backends`` entry point registers (no class made per target);
    ``deploy()`` hands it the whole deploy, so no pipeline stage names the farm."""
    import ast

    from aidge_deploy.farm.remote import FarmBackend
    from aidge_deploy.registry import (
        RemoteBackend,
        get_deploy_target,
        local_target_class,
        registered_targets,
    )

    pairs = registered_targets()
    targets = {t for t, b in pairs if b != "api"}
    assert ("stm32h7a3", "api") in pairs
    assert {t for t, b in pairs if b == "api"} == targets
    assert {cls for (_, b), cls in pairs.items() if b == "api"} == {FarmBackend}
    farm = get_deploy_target("stm32h7a3", "api")
    assert isinstance(farm, RemoteBackend) and farm.target_name == "stm32h7a3"
    assert farm.memory_capacities() == local_target_class("stm32h7a3")(None).memory_capacities()
    src = Path(__file__).resolve().parents[1] / "src" / "aidge_deploy"
    for path in (src / "pipeline").rglob("*.py"):
        text = path.read_text(encoding="utf-8").lower()
        assert "farm" not in text and "remote_result" not in text, path
    # (the registry makes a board record's local targets with type(); every api pair is
    # FarmBackend itself, asserted above)
    for path in [*(src / "farm").rglob("*.py"), src / "api.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            made = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "type"
                and len(node.args) == 3
            )
            assert not made, f"{path}:{getattr(node, 'lineno', '?')} makes a class with type()"


def test_the_agents_caches_stay_within_their_budget(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """After each of 30 distinct exports, the agent's built exports and its build cache
    are brought back under the budget, the least recently used entries going first (an
    export reused since stays), and an export a running job uses is never removed."""
    import os
    import time

    from aidge_deploy.farm.agent import Agent, AgentSettings
    from aidge_deploy.farm.agentcache import tree_size
    from aidge_deploy.lab import LabBoard

    cache = tmp_path / "work" / "cache"
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(cache))
    budget = 1_000_000
    settings = AgentSettings(
        url="http://127.0.0.1:9",
        token="t",
        work_dir=tmp_path / "work",
        boards=(LabBoard(name="b", target="mps2-an386", emulated=True),),
        cache_bytes=budget,
    )
    agent = Agent(settings)
    exports, builds = agent.built_exports, cache / "builds"
    clock = time.time() - 1000

    def entry(folder: Path, name: str, size: int) -> Path:
        nonlocal clock
        path = folder / name
        path.mkdir(parents=True)
        (path / "data").write_bytes(b"x" * size)
        clock += 1
        os.utime(path, (clock, clock))
        return path

    first = None
    try:
        for i in range(30):
            e = entry(exports, f"{i:064x}", 150_000)
            entry(builds, f"export-{i:016x}", 250_000)
            first = first or e
            if i >= 3:  # export 0 is used again by every job: it stays the most recent
                clock += 1
                os.utime(first, (clock, clock))
            agent.prune_caches(frozenset({f"{29:064x}"}))
            assert tree_size(exports) <= budget and tree_size(builds) <= budget, i
        kept = sorted(p.name for p in exports.iterdir())
        assert f"{0:064x}" in kept and f"{29:064x}" in kept and f"{1:064x}" not in kept
        assert len(kept) == budget // 150_000
    finally:
        agent.service.close()


def test_the_service_is_layered_without_cycles() -> None:
    """The app factory (``service``) imports the routers and the pages; they import the
    dependencies (``deps``) and the domain modules; neither the pages nor the domain
    import a REST routes module or the factory; and no farm module is on an import cycle
    (function-level and TYPE_CHECKING imports included)."""
    from test_import_graph import SRC, cycle_through, import_graph

    graph = import_graph(SRC, "aidge_deploy")
    farm = {m: deps for m, deps in graph.items() if m.startswith("aidge_deploy.farm")}
    assert {m: " -> ".join(c) for m in farm if (c := cycle_through(graph, m))} == {}
    rest = {"aidge_deploy.farm.routes_user", "aidge_deploy.farm.routes_agent"}
    app = "aidge_deploy.farm.service"
    for module, deps in farm.items():
        if module not in (rest | {app, "aidge_deploy.farm.server"}):
            assert not deps & (rest | {app}), (module, deps & (rest | {app}))
