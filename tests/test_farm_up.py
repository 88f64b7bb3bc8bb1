"""``aidge-deploy farm up`` survives its own restarts and its children's deaths.

Real pieces: ``farm up`` itself (coordinator, service, agent with the three emulated QEMU
boards). Stopped and started three times on one data folder with jobs queued each time,
every job ends ``done`` exactly once and ``/api/health`` reports the coordinator (the
address of *this* run's coordinator, never a line of an older log); a SIGKILLed service
or agent is started again by ``farm up`` and the queued jobs complete, the running job of
a killed agent failing "agent lost" at once. The supervisor alone, on plain processes:
a child that keeps dying cannot be kept alive, and only then does it give up.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envparts import needs
from farmkit import ADMIN, ALICE, needs_farm, qemu_available, stalled_export, stop

pytestmark = [needs_farm()]
EXE = str(Path(sys.executable).parent / "aidge-deploy")


class FarmUp:
    """One ``farm up`` process on a data folder, started and stopped by the test."""

    def __init__(self, data: Path, boards: dict[str, str] | None = None) -> None:
        self.data = data
        #: its boards (name -> target): ``--board`` options, or farm up's three
        self.boards = boards
        self.proc: subprocess.Popen[Any] | None = None
        self.url = ""
        self.env = {**os.environ, "AIDGE_DEPLOY_API_PASSWORD": ADMIN[1]}

    def create(self) -> None:
        for user, admin in ((ADMIN[0], True), (ALICE[0], False)):
            env = {**self.env, "AIDGE_DEPLOY_API_PASSWORD": ADMIN[1] if admin else ALICE[1]}
            done = subprocess.run(
                [EXE, "farm", "user", "add", user, *(["--admin"] if admin else []),
                 "--data-dir", str(self.data)],
                capture_output=True, text=True, timeout=120, env=env,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr

    def start(self, *extra: str) -> None:
        """``extra``: options of ``farm up``; without one, the health checks are off (golden
        runs after each agent restart are ``test_farm_health.py``'s, not these tests')."""
        self.url = ""  # this run's, from its state file
        log = open(self.data.parent / "farm-up.out", "ab")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [EXE, "farm", "up", "--data-dir", str(self.data), "--port", "0",
             "--stop-grace", "240", *(extra or ["--no-health-checks"]),
             *(f"--board={n}={t}" for n, t in (self.boards or {}).items())],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )  # fmt: skip
        self.url = self.wait(self._ready, 240, "farm up")

    def _ready(self) -> str | None:
        state = self.data / "farm-up.json"
        if not state.exists():
            return None
        try:
            data = json.loads(state.read_text())
            url = data["service_url"]
            if len(data["children"]) < 3:
                return None
            with self.client() as c:
                boards = c.get("/api/boards").json()
            if len(boards) == len(self.boards or "abc") and all(
                b["state"] == "idle" or b["state"] == "busy" for b in boards
            ):
                return str(url)
        except (ValueError, KeyError, httpx.HTTPError):
            return None
        return None

    def wait(self, probe: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            assert self.proc is not None and self.proc.poll() is None, self.output()
            time.sleep(0.2)
        raise AssertionError(f"{what}: not ready after {timeout} s\n{self.output()}")

    def output(self) -> str:
        """What farm up printed, and the end of each child's log (for a failure's message)."""
        parts = []
        for path in (self.data.parent / "farm-up.out", *(self.data / f"{n}.log" for n in ("coordinator", "service", "agent"))):  # fmt: skip
            if path.exists():
                parts.append(f"==> {path.name} <==\n" + path.read_text(errors="replace")[-3000:])
        return "\n".join(parts)

    def children(self) -> dict[str, int]:
        return dict(json.loads((self.data / "farm-up.json").read_text())["children"])

    def client(self, user: tuple[str, str] = ALICE) -> httpx.Client:
        url = self.url or json.loads((self.data / "farm-up.json").read_text())["service_url"]
        token = httpx.post(
            url + "/api/token", json={"username": user[0], "password": user[1]}
        ).json()
        return httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token['access_token']}"}, timeout=60
        )

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(600)
        self.proc = None
        return code

    def kill(self) -> None:
        stop(self.proc, signal.SIGKILL)


@pytest.fixture
def farm_up(tmp_path: Path) -> Iterator[FarmUp]:
    up = FarmUp(tmp_path / "farm")
    up.create()
    try:
        yield up
    finally:
        if up.proc is not None and up.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                up.stop()
        up.kill()


def _submit(c: httpx.Client, archive: bytes, target: str, retries: int | None = None) -> int:
    up = c.post("/api/exports", content=archive)
    assert up.status_code == 201, up.text
    r = c.post("/api/jobs", json={"export": up.json()["id"], "target": target, "retries": retries})
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _ended(c: httpx.Client, ids: list[int], timeout: float = 600) -> dict[int, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        views = {i: c.get(f"/api/jobs/{i}").json() for i in ids}
        if all(v["state"] in ("done", "failed", "cancelled") for v in views.values()):
            return views
        time.sleep(0.5)
    raise AssertionError(f"jobs did not end: {[(i, v['state']) for i, v in views.items()]}")


def _once(c: httpx.Client, job_id: int) -> Counter[str]:
    events = c.get(f"/api/jobs/{job_id}/events").json()["events"]
    return Counter(e["state"] for e in events if e["kind"] == "state")


@pytest.mark.slow
@pytest.mark.qemu
@needs(qemu_available(), "QEMU or the Arm toolchain is missing")
def test_farm_up_restarted_three_times_on_its_data_folder(farm_up: FarmUp, export_factory) -> None:  # type: ignore[no-untyped-def]
    from aidge_deploy.farm.archive import pack_export

    archives = {
        t: pack_export(Path(export_factory("output", target=t).path))
        for t in ("mps2-an386", "mps3-an547", "netduinoplus2")
    }
    ids: list[int] = []
    for cycle in range(3):
        farm_up.start()
        # the coordinator this run started, at the address it printed in this run
        assert httpx.get(farm_up.url + "/api/health").json()["coordinator"] is True
        with farm_up.client() as c:
            # the jobs queued before the stop run now; new ones are queued behind them
            _ended(c, ids)
            ids += [_submit(c, archives[t], t) for t in archives for _ in range(2)]
            if cycle < 2:  # stopped with jobs queued (and one running on each board)
                time.sleep(1.0)
        assert farm_up.stop() == 0, farm_up.output()
    farm_up.start()
    with farm_up.client() as c:
        views = _ended(c, ids)
        assert {v["state"] for v in views.values()} == {"done"}, views
        for job_id in ids:
            seen = _once(c, job_id)
            assert seen["done"] == 1 and seen["building"] == 1, (job_id, seen)


@pytest.mark.slow
@pytest.mark.qemu
@needs(qemu_available(), "QEMU or the Arm toolchain is missing")
def test_farm_up_brings_back_a_killed_service_and_agent(  # type: ignore[no-untyped-def]
    farm_up: FarmUp, export_factory, tmp_path: Path
) -> None:
    from aidge_deploy.farm.archive import pack_export

    quick = pack_export(Path(export_factory("output", target="mps2-an386").path))
    # a firmware that holds its board until the agent is killed (and ends on its own)
    slow = pack_export(
        Path(stalled_export(export_factory("output", target="mps3-an547"), tmp_path, 60).path)
    )
    farm_up.start()
    with farm_up.client() as c:
        ids = [_submit(c, quick, "mps2-an386") for _ in range(3)]
    os.kill(farm_up.children()["the farm service"], signal.SIGKILL)
    farm_up.wait(lambda: _up(farm_up.url), 120, "the service, started again")
    with farm_up.client() as c:
        views = _ended(c, ids)
        assert {v["state"] for v in views.values()} == {"done"}, views
        running = _submit(c, slow, "mps3-an547", retries=0)  # an agent lost is retried
        waiting = _submit(c, quick, "mps2-an386")
        deadline = time.monotonic() + 240
        while c.get(f"/api/jobs/{running}").json()["state"] not in ("running", "done", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        agent = farm_up.children()["the local agent"]
        os.kill(agent, signal.SIGKILL)
        killed = time.monotonic()
        lost = _ended(c, [running], 120)[running]
        assert lost["state"] == "failed" and "agent lost" in lost["error"]["message"], lost
        assert lost["failure_class"] == "infrastructure", lost
        assert time.monotonic() - killed < 15.0  # the heartbeat timeout
        assert _ended(c, [waiting])[waiting]["state"] == "done"
    out = farm_up.output()
    assert "the farm service exited" in out and "the local agent exited" in out, out
    assert farm_up.proc is not None and farm_up.proc.poll() is None  # it kept running
    assert farm_up.stop() == 0


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/api/health", timeout=2).is_success
    except httpx.HTTPError:
        return False


def test_the_supervisor_restarts_a_dying_child_and_gives_up_on_one_that_keeps_dying(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plain processes: a child killed is started again (after its back-off, logged) while
    the others keep running; a child that dies at every start is given up after
    ``give_up_after`` deaths (``ChildLost``) — that, and only that, stops everything."""
    from aidge_deploy.farm.up import Child, ChildLost, Supervisor

    def child(name: str, argv: list[str]) -> Child:
        return Child(name, lambda: argv, tmp_path, tmp_path / f"{name}.log", lambda c: "up")

    steady = child("steady", ["sleep", "120"])
    flaky = child("flaky", ["sleep", "120"])
    sup = Supervisor([steady, flaky], backoff=(0.1, 0.2), give_up_after=3, window_s=60)
    sup.start_all()
    try:
        first = flaky.proc
        assert first is not None and steady.proc is not None
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        deadline = time.monotonic() + 10
        while flaky.proc is first or flaky.proc is None or flaky.proc.poll() is not None:
            sup.supervise()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert steady.proc.poll() is None  # untouched
        log = capsys.readouterr().out
        assert "flaky exited with status -9; starting it again in 0.1 s" in log, log
        assert "flaky is running again" in log, log
        doomed = child("doomed", ["sh", "-c", "exit 3"])
        sup.children.append(doomed)
        doomed.start()
        with pytest.raises(ChildLost, match="doomed died 3 times"):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                sup.supervise()
                time.sleep(0.05)
        assert steady.proc.poll() is None and flaky.proc.poll() is None
    finally:
        sup.stop_all(5)
    assert steady.proc.poll() is not None and flaky.proc.poll() is not None
