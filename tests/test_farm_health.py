"""Board health checks on ``aidge-deploy farm up`` (``farm.health``): its labgrid
coordinator, service and agent, serving two emulated QEMU boards of the same target
(mps2-an386).

One board's QEMU is made to crash for real: the farm finds ``qemu-system-arm`` first in a
folder of the test's, a wrapper that kills itself with SIGSEGV while a fault file exists
and the job it was started for (its ``AIDGE_FARM_JOB`` mark) runs on the bad board, as the
farm's own database says — and runs the real QEMU otherwise. After ``--health-failures``
failed jobs on it, its golden run fails and it is drained ``offline: health check failed``
while every job by target goes to the healthy board; the fault removed, it is admitted
again after ``--health-clean`` clean golden runs (outputs equal to the reference, cycles
within the band). Admins drain and admit by hand through the CLI and the REST API, a user
is refused; the boards page shows the reason with a link to the golden run's log (a
screenshot is kept).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser import screenshot
from envparts import needs
from farmkit import ADMIN, ALICE, BIN, needs_farm, qemu_available
from farmweb import browser_login
from test_farm_up import FarmUp

pytestmark = [
    needs_farm(),
    pytest.mark.slow,
    pytest.mark.qemu,
    needs(qemu_available(), "QEMU or the Arm toolchain is missing"),
]

GOOD, BAD = "an386-good", "an386-bad"
FAILURES, CLEAN = 2, 2
HEALTH_ARGS = [
    f"--health-failures={FAILURES}",
    f"--health-clean={CLEAN}",
    "--health-recheck=1",
    "--health-interval=0",
]

#: the QEMU of a job on the bad board dies of SIGSEGV while the fault file exists
_WRAPPER = """#!{python}
import os, signal, sqlite3, sys

REAL, FLAG, DB, BAD = {real!r}, {flag!r}, {db!r}, {bad!r}
if sys.argv[1:2] not in (["--version"], ["-version"]) and os.path.exists(FLAG):
    job = os.environ.get("AIDGE_FARM_JOB", "")
    if job.isdigit():
        with sqlite3.connect(f"file:{{DB}}?mode=ro", uri=True, timeout=30) as db:
            row = db.execute("SELECT board FROM jobs WHERE id = ?", (int(job),)).fetchone()
        if row is not None and row[0] == BAD:
            os.kill(os.getpid(), signal.SIGSEGV)
os.execv(REAL, [REAL, *sys.argv[1:]])
"""


@pytest.fixture(scope="module")
def fault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fault file: while it exists, the bad board's QEMU dies of SIGSEGV at start."""
    flag = tmp_path_factory.mktemp("crashing-qemu") / "fault"
    flag.write_text("crash\n")
    return flag


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory, fault: Path) -> Iterator[FarmUp]:
    root = tmp_path_factory.mktemp("farm-health")
    up = FarmUp(root / "farm", boards={GOOD: "mps2-an386", BAD: "mps2-an386"})
    real = shutil.which("qemu-system-arm")
    assert real is not None
    wrapper = fault.parent / "qemu-system-arm"
    wrapper.write_text(
        _WRAPPER.format(
            python=sys.executable, real=real, flag=str(fault), db=str(up.data / "farm.db"), bad=BAD
        )
    )
    wrapper.chmod(0o755)
    up.env["PATH"] = f"{fault.parent}{os.pathsep}{up.env.get('PATH', '')}"
    up.create()
    try:
        up.start(*HEALTH_ARGS)
        yield up
    finally:
        if up.proc is not None and up.proc.poll() is None:
            up.stop()
        up.kill()


@pytest.fixture(scope="module")
def archive(export_factory: Any) -> bytes:
    from aidge_deploy.farm.archive import pack_export

    return pack_export(Path(export_factory("output", target="mps2-an386").path))


def _submit(c: httpx.Client, archive: bytes, **where: str) -> int:
    export = c.post("/api/exports", content=archive)
    assert export.status_code == 201, export.text
    r = c.post("/api/jobs", json={"export": export.json()["id"], **where})
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _ended(c: httpx.Client, ids: list[int], timeout: float = 600) -> dict[int, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        views = {i: c.get(f"/api/jobs/{i}").json() for i in ids}
        if all(v["state"] in ("done", "failed", "cancelled") for v in views.values()):
            return views
        assert time.monotonic() < deadline, [(i, v["state"]) for i, v in views.items()]
        time.sleep(0.5)


def _board(c: httpx.Client, name: str) -> dict[str, Any]:
    return next(b for b in c.get("/api/boards").json() if b["name"] == name)


def _until(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not true after {timeout} s"
        time.sleep(0.5)


def _cli(
    farm: FarmUp, *args: str, user: tuple[str, str] = ADMIN
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIDGE_DEPLOY_API_PASSWORD": user[1]}
    env.pop("AIDGE_DEPLOY_API_TOKEN", None)
    return subprocess.run(
        [str(BIN / "aidge-deploy"), "farm", "board", *args, "--url", farm.url,
         "--username", user[0]],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_a_crashing_board_is_drained_and_readmitted_after_clean_golden_runs(
    farm: FarmUp, archive: bytes, fault: Path, chromium: Any
) -> None:
    with farm.client(ADMIN) as admin:
        # a golden run on the healthy board, asked by hand: it sets the target's reference
        asked = _cli(farm, "check", GOOD)
        assert asked.returncode == 0, asked.stdout + asked.stderr
        first = _until(
            lambda: [r for r in admin.get(f"/api/boards/{GOOD}/health").json() if r["ended_at"]],
            400,
            "the healthy board's golden run",
        )
        assert first[0]["outcome"] == "passed", first
        assert first[0]["trigger"] == "admin" and first[0]["figure_unit"] == "cycles", first
        assert first[0]["figure"] > 0 and first[0]["figure_provenance"], first
        assert first[0]["reference"] == first[0]["figure"], first

    with farm.client(ALICE) as c:
        # the user's jobs on the crashing board fail for a reason that is not theirs
        broken = [_submit(c, archive, board=BAD) for _ in range(FAILURES)]
        for view in _ended(c, broken).values():
            assert view["state"] == "failed", view
            assert view["failure_class"] == "infrastructure", view  # QEMU died: not theirs
            # retried once on the only board it may take: it ran out of attempts, or the
            # drain ended it while it waited (it would wait for a readmission, else)
            ran = [a["number"] for a in view["attempts"]]
            drained_first = "which its health check then drained" in view["error"]["message"]
            assert ran == [1, 2] or (ran == [1] and drained_first), view
        # its golden run is queued: the board takes no user job until it is judged
        _until(lambda: _board(c, BAD)["health"] == "pending", 60, "the golden run after failures")
        # meanwhile and after, jobs by target go to the healthy board
        by_target = [_submit(c, archive, target="mps2-an386") for _ in range(4)]
        drained = _until(
            lambda: (b := _board(c, BAD))["state"] == "drained" and b, 400, "the drain"
        )
        assert drained["drain_reason"] == "offline: health check failed", drained
        # its next golden run (readmission, every --health-recheck second) may be pending
        assert drained["drained_by"] == "health check"
        assert drained["health"] in ("failed", "pending"), drained
        views = _ended(c, by_target)
        assert {v["state"] for v in views.values()} == {"done"}, views
        assert {v["board"] for v in views.values()} == {GOOD}, views

        runs = c.get(f"/api/boards/{BAD}/health").json()
        failed = next(r for r in runs if r["action"] == "drained")
        assert failed["trigger"] == "failures" and failed["outcome"] == "failed", failed
        assert "output job" in failed["reason"], failed
        log = c.get(f"/api/boards/{BAD}/health/{failed['id']}/log")
        assert log.status_code == 200 and "golden job" in log.text, log.text[:500]

    page = browser_login(chromium, farm, ALICE, "/boards")
    row = page.locator(f"tr[data-board='{BAD}']")
    row.get_by_text("offline: health check failed").wait_for()
    link = row.locator("a.drain-log")
    assert link.get_attribute("href") == f"/boards/{BAD}/health/{failed['id']}/log"
    assert drained["drain_run"] == failed["id"]
    screenshot(page, "farm_boards_health_drained")
    page.goto(farm.url + f"/boards/{BAD}/health")
    page.get_by_text("offline: health check failed").first.wait_for()
    screenshot(page, "farm_board_health_history")

    fault.unlink()  # the board is mended: its next golden runs pass
    with farm.client(ALICE) as c:
        back = _until(lambda: (b := _board(c, BAD))["state"] == "idle" and b, 600, "readmission")
        assert back["drain_reason"] is None and back["health"] == "passed", back
        runs = c.get(f"/api/boards/{BAD}/health").json()
        admitted = next(r for r in runs if r["action"] == "admitted")
        clean = sorted(
            (r for r in runs if failed["id"] < r["id"] <= admitted["id"]), key=lambda r: r["id"]
        )
        assert [r["outcome"] for r in clean][-CLEAN:] == ["passed"] * CLEAN, clean
        assert all(r["trigger"] == "readmission" for r in clean), clean
        for r in clean[-CLEAN:]:  # the same deterministic count as the healthy board's
            assert r["reference"] == first[0]["figure"] and r["figure_unit"] == "cycles", r
            assert abs(r["figure"] - r["reference"]) <= r["band"] * r["reference"], r
        again = _submit(c, archive, board=BAD)
        assert _ended(c, [again])[again]["state"] == "done"


def test_admins_drain_and_admit_by_hand_and_users_are_refused(farm: FarmUp) -> None:
    # farm up handed its health options to its service
    service = farm.children()["the farm service"]
    argv = Path(f"/proc/{service}/cmdline").read_bytes().decode().split("\0")
    assert {"--health-failures=2", "--health-clean=2", "--health-recheck=1.0"} <= set(argv), argv
    with farm.client(ALICE) as c:
        refused = c.post(f"/api/boards/{GOOD}/drain", json={"reason": "mine now"})
        assert refused.status_code == 403, refused.text
        assert c.post(f"/api/boards/{GOOD}/admit").status_code == 403
        assert c.post(f"/api/boards/{GOOD}/health-check").status_code == 403
    as_user = _cli(farm, "drain", GOOD, "--reason", "mine now", user=ALICE)
    assert as_user.returncode != 0 and "admin" in (as_user.stdout + as_user.stderr).lower()

    with farm.client(ADMIN) as admin:
        r = admin.post(f"/api/boards/{GOOD}/drain", json={"reason": "new probe cable"})
        assert r.status_code == 200, r.text
        view = r.json()
        assert view["state"] == "drained" and view["drain_reason"] == "new probe cable", view
        assert view["drained_by"] == ADMIN[0]
        unknown = admin.post("/api/boards/no-such-board/drain", json={"reason": "x"})
        assert unknown.status_code == 404
    done = _cli(farm, "admit", GOOD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{GOOD}\tmps2-an386\tidle" in done.stdout, done.stdout
    drained = _cli(farm, "drain", GOOD, "--reason", "bench moved")
    assert drained.returncode == 0 and "bench moved" in drained.stdout, drained.stdout
    with farm.client(ALICE) as c:
        assert _board(c, GOOD)["drain_reason"] == "bench moved"
    assert _cli(farm, "admit", GOOD).returncode == 0
    history = _cli(farm, "health", BAD)
    assert history.returncode == 0 and "failures\tfailed" in history.stdout, history.stdout
