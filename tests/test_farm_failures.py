"""Failure classes and retries on ``aidge-deploy farm up`` with two emulated boards of one
target (real QEMU boards, the real labgrid coordinator, service and agent).

A job whose first board's QEMU crashes during the run (the test sends it SIGSEGV) fails
for an infrastructure reason: the farm runs it again once, on the target's other board,
where it succeeds, its two attempts listed in its JSON and on its page. A model whose run
crashes (a HardFault: the user's failure) is not retried: the ``api`` client raises
``FarmJobFailed`` saying it is the user's failure, and the dashboard's jobs table shows
each job's class.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import aidge_deploy
from aidge_deploy.config import DeployConfig
from envparts import needs
from farmkit import ALICE, crashing_export, needs_farm, qemu_available, stalled_export
from farmweb import browser_login
from test_farm_up import FarmUp, _ended, _submit

pytestmark = [needs_farm(), pytest.mark.qemu, pytest.mark.slow, pytest.mark.browser]

BOARDS = {"an386-a": "mps2-an386", "an386-b": "mps2-an386"}


@pytest.fixture
def farm_up(tmp_path: Path) -> Iterator[FarmUp]:
    up = FarmUp(tmp_path / "farm", boards=BOARDS)
    up.create()
    try:
        yield up
    finally:
        if up.proc is not None and up.proc.poll() is None:
            up.stop()
        up.kill()


def _qemus(farm_up: FarmUp, job_id: int) -> list[int]:
    """The live QEMU processes of the farm's job ``job_id`` (marked with its agent)."""
    from aidge_deploy.farm.reaper import job_processes

    agent = farm_up.children()["the local agent"]
    found = []
    for pid in job_processes(str(job_id), agent=str(agent)):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("qemu-system"):
            found.append(pid)
    return found


def _wait(c: httpx.Client, job_id: int, states: set[str], timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view: dict[str, Any] = c.get(f"/api/jobs/{job_id}").json()
        if view["state"] in states:
            return view
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} is {view['state']}, not {states}")


@needs(qemu_available(), "QEMU or the Arm toolchain is missing")
def test_an_infrastructure_failure_is_retried_on_the_other_board_and_a_crash_is_not(  # type: ignore[no-untyped-def]
    farm_up: FarmUp, export_factory, tmp_path: Path, chromium: Any
) -> None:
    from aidge_deploy.errors import FarmJobFailed
    from aidge_deploy.farm.archive import pack_export

    quick = export_factory("output", target="mps2-an386")
    slow = pack_export(Path(stalled_export(quick, tmp_path, 15).path))
    crash = crashing_export(quick, tmp_path)
    farm_up.start()

    # the model crashes (the user's failure): not retried, and the client says whose it is
    config = DeployConfig(
        backend="api",
        api_url=farm_up.url + "/api",
        api_username=ALICE[0],
        api_password=ALICE[1],
        api_poll_interval=0.5,
    )
    with pytest.raises(FarmJobFailed) as failed:
        aidge_deploy.deploy(crash.path, config)
    assert failed.value.failure_class == "user" and failed.value.attempts == 1, failed.value
    assert "a user failure" in str(failed.value), failed.value
    crashed = failed.value.job_id
    assert crashed is not None

    with farm_up.client() as c:
        view = c.get(f"/api/jobs/{crashed}").json()
        assert view["state"] == "failed" and view["failure_class"] == "user", view
        assert "HardFault" in c.get(f"/api/jobs/{crashed}/log").text  # the firmware's own report
        assert [(a["number"], a["failure_class"], a["retried"]) for a in view["attempts"]] == [
            (1, "user", False)
        ], view["attempts"]

        # the first board's QEMU crashes mid-run (SIGSEGV): the lab's failure, run again
        # once, on the other board
        job = _submit(c, slow, "mps2-an386")
        first = _wait(c, job, {"running", "done", "failed"})
        assert first["state"] == "running", first
        deadline = time.monotonic() + 60
        while not (qemus := _qemus(farm_up, job)):
            assert time.monotonic() < deadline, "the job's QEMU never showed"
            time.sleep(0.1)
        for pid in qemus:
            os.kill(pid, signal.SIGSEGV)
        done = _ended(c, [job], 600)[job]
        other = ({"an386-a", "an386-b"} - {first["board"]}).pop()
        assert done["state"] == "done" and done["board"] == other, done
        assert done["attempt"] == 2 and done["failure_class"] is None, done
        attempts = [
            (a["number"], a["board"], a["state"], a["failure_class"], a["retried"])
            for a in done["attempts"]
        ]
        assert attempts == [
            (1, first["board"], "failed", "infrastructure", True),
            (2, other, "done", None, False),
        ], done["attempts"]
        assert "signal 11" in done["attempts"][0]["error"], done["attempts"][0]
        assert done["attempts"][0]["error_type"] == "BoardFault"
        # the failed run's logs are kept beside the second run's
        first_log = c.get(done["attempts"][0]["log"])
        assert first_log.status_code == 200 and "DEMO EXPORT ARM" in first_log.text
        assert c.get(f"/api/jobs/{job}/log?attempt=3").status_code == 404
        events = c.get(f"/api/jobs/{job}/events").json()["events"]
        assert any(
            "attempt 1 on" in e["message"] and "infrastructure" in e["message"] for e in events
        )

    # the dashboard: the jobs table's failure column, the job pages' class and attempts
    page = browser_login(chromium, farm_up, ALICE, "/jobs")
    row = page.locator(f"#jobs tr[data-job='{crashed}'] td.failure")
    assert row.get_attribute("data-failure-class") == "user"
    assert row.inner_text().strip() == "user"
    retried = page.locator(f"#jobs tr[data-job='{job}'] td.failure")
    assert retried.get_attribute("data-failure-class") == ""
    assert "2 attempts" in retried.inner_text()
    page.goto(f"{farm_up.url}/jobs/{job}")
    rows = page.locator("#job-attempts tr[data-attempt]")
    assert rows.count() == 2
    assert rows.nth(0).get_attribute("data-board") == first["board"]
    assert rows.nth(0).get_attribute("data-failure-class") == "infrastructure"
    assert rows.nth(1).get_attribute("data-board") == other
    with page.expect_download() as download:
        rows.nth(0).locator("a.attempt-log").click()
    assert "DEMO EXPORT ARM" in Path(download.value.path()).read_text()
    page.goto(f"{farm_up.url}/jobs/{crashed}")
    assert page.locator("#job-failure-class").get_attribute("data-failure-class") == "user"
    page.context.close()
