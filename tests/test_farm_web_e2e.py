"""The dashboard end to end in headless Chromium, on the real farm: a labgrid coordinator, the
service, and an agent in its own process serving two emulated QEMU boards.

Log in, submit an export from the page and watch it go from queued to done, open the result
(the bundle's own report, charts drawn) and its downloads, compare two jobs with the CLI's
verdict, drain a board (the service gives it no job) and cancel a queued job, and keep the
boards page right while 50 jobs run through the farm. Screenshots: ``test-artifacts/``.
"""

from __future__ import annotations

import io
import json
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import screenshot
from envparts import needs
from farmkit import ADMIN, ALICE, BIN, BOB, Farm, make_farm, needs_farm, qemu_available
from farmweb import browser_login, job_state, wait_for

pytestmark = [
    needs_farm(),
    pytest.mark.slow,
    pytest.mark.qemu,
    pytest.mark.browser,
    needs(qemu_available(), "QEMU or the Arm toolchain is missing"),
]

BOARDS = {"an386-a": "mps2-an386", "an386-b": "mps2-an386", "an547-a": "mps3-an547"}
AN386 = ("an386-a", "an386-b")
TERMINAL = {"done", "failed", "cancelled"}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = make_farm(tmp_path_factory.mktemp("farm-web-e2e"), agent_timeout=10.0)
    try:
        farm.start_agent("host-a", BOARDS)
        yield farm
    finally:
        farm.stop_all()


@pytest.fixture(scope="module")
def archive(export_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny benchmark export (3 timed inferences, per-layer profile) as an archive file."""
    from aidge_deploy.farm.archive import pack_export

    export = export_factory("benchmark", target="mps2-an386", nb_iterations=3)
    path = tmp_path_factory.mktemp("archive") / "tiny_cnn-an386.tar.gz"
    path.write_bytes(pack_export(Path(export.path)))
    return path


def _submit_page(page: Any, farm: Farm, archive: Path, destination: str) -> int:
    page.goto(farm.url + "/submit")
    page.check("input[name=kind][value=archive]")
    page.set_input_files("input[name=file]", str(archive))
    page.select_option("select[name=destination]", destination)
    screenshot(page, "farm_submit")
    page.click("#submit-button")
    page.wait_for_url("**/jobs/*")
    return int(page.url.rsplit("/", 1)[1])


def _api_submit(farm: Farm, archive: Path, user: tuple[str, str], **where: str) -> int:
    with farm.client(*user) as c:
        export = c.post("/api/exports", content=archive.read_bytes()).json()["id"]
        r = c.post("/api/jobs", json={"export": export, **where})
        assert r.status_code == 201, r.text
        return int(r.json()["id"])


def test_submit_watch_result_and_downloads(farm: Farm, archive: Path, chromium: Any) -> None:
    page = browser_login(chromium, farm, ALICE, "/boards")
    screenshot(page, "farm_boards")
    job_id = _submit_page(page, farm, archive, "target:mps2-an386")
    # watch the page (it updates itself, then reloads once the job ends)
    seen: list[str] = []
    log_seen_live = False
    deadline = time.monotonic() + 300
    shot_running = False
    while time.monotonic() < deadline:
        try:
            state = page.locator("#job-state").get_attribute("data-state", timeout=5000)
            log_text = page.locator("#log").inner_text(timeout=5000)
        except Exception:  # the page is reloading
            continue
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        if state in ("building", "flashing", "running", "collecting"):
            log_seen_live = log_seen_live or bool(log_text.strip())
            if not shot_running and page.locator("#stages li[data-status=done]").count() >= 3:
                screenshot(page, "farm_job_running")
                shot_running = True
        if state in TERMINAL and page.locator("#job").get_attribute("data-terminal") == "yes":
            break
        time.sleep(0.1)
    # the page follows the job live (a free board may have taken it before the page first
    # drew: "queued" is then read from its history below, not required live)
    assert seen and seen[0] not in TERMINAL and seen[-1] == "done", seen
    assert {"building", "running"} & set(seen), seen
    # the history on the page: every state in order, each with its time
    states = [
        e.inner_text().split(" UTC ", 1)[1].split()[0]
        for e in page.locator("#events li").all()
        if e.locator("b").count()
    ]
    assert states[0] == "queued" and states[-1] == "done", states
    assert states.index("reserved") < states.index("building") < states.index("done"), states
    # stages as the CLI names them
    stages = {
        li.get_attribute("data-stage"): li.get_attribute("data-status")
        for li in page.locator("#stages li").all()
    }
    assert stages["Build"] == stages["Execute"] == stages["ParseOutput"] == "done", stages
    assert stages["Report"] == "done" and stages["Transfer"] in ("skipped", "pending"), stages
    assert log_seen_live or "==>" in page.locator("#log").inner_text()
    # the result: the bundle's own report, its charts drawn
    frame = page.frame_locator("#report")
    # an emulated board's per-layer chart is its instruction count (its times are estimated
    # from it: one quantity, charted once)
    layer_bars = frame.locator("svg[data-chart='layer-emulated_instructions'] rect.bar")
    layer_bars.first.wait_for(state="attached")  # the frame loads after the page
    assert layer_bars.count() == 4
    assert all((layer_bars.nth(i).bounding_box() or {"width": 0})["width"] > 0 for i in range(4))
    assert frame.locator("svg[data-chart='latency-histogram'] rect.bar").count() >= 1
    assert frame.locator("svg[data-chart='memory'] rect.bar").count() >= 1
    assert "EMULATED" in frame.locator("[data-provenance=emulated]").inner_text()
    screenshot(page, "farm_job_done")
    # downloads
    result = page.request.get(farm.url + f"/jobs/{job_id}/files/result.json")
    assert result.ok and json.loads(result.body())
    bundle = page.request.get(farm.url + f"/jobs/{job_id}/files/bundle.zip")
    names = set(zipfile.ZipFile(io.BytesIO(bundle.body())).namelist())
    assert {"report.html", "summary.json", "manifest.json"} <= names, names
    log = page.request.get(farm.url + f"/jobs/{job_id}/files/log.txt")
    assert log.ok and b"==>" in log.body()
    # the boards page shows the last result and health
    page.goto(farm.url + "/boards")
    row = page.locator(f"#boards tr[data-board]:has(a[href='/jobs/{job_id}'])")
    assert row.get_attribute("data-health-done") == "1"
    page.context.close()


def test_submit_an_onnx_model(farm: Farm, tiny_cnn: Path, chromium: Any, tmp_path: Path) -> None:
    """An ONNX model is exported on the service with ``profile``'s options, then runs."""
    page = browser_login(chromium, farm, BOB, "/submit")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    page.check("input[name=kind][value=onnx]")
    page.set_input_files("input[name=file]", str(garbage))
    page.select_option("select[name=destination]", "board:an386-b")
    page.click("#submit-button")
    assert "cannot be exported" in page.locator("#submit-error").inner_text()
    assert page.locator("input[name=kind][value=onnx]").is_checked()
    page.fill("input[name=iterations]", "2")
    page.fill("input[name=warmup]", "1")
    page.set_input_files("input[name=file]", str(tiny_cnn))
    page.click("#submit-button")
    page.wait_for_url("**/jobs/*", timeout=300_000)
    job_id = int(page.url.rsplit("/", 1)[1])
    assert page.locator("#model").inner_text() == "tiny_cnn.onnx"
    # the page follows the job and reloads itself once it ended (job.js): wait for that
    # (a reload of our own could race with the page's and detach it)
    page.locator("#job[data-terminal='yes']").wait_for(timeout=300_000)
    assert job_state(farm, job_id, BOB) == "done"
    frame = page.frame_locator("#report")
    bars = frame.locator("svg[data-chart='layer-emulated_instructions'] rect.bar")
    bars.first.wait_for(state="attached")  # the frame loads after the page
    assert bars.count() == 4
    # the export options reached the export: 2 timed inferences
    counts = frame.locator("svg[data-chart='latency-histogram'] rect.bar").evaluate_all(
        "bars => bars.map(b => Number(b.dataset.value))"
    )
    assert sum(counts) == 2, counts
    page.context.close()


def _compare(page: Any, base: int, cand: int, thresholds: Path) -> tuple[str, int]:
    page.select_option("select[name=base]", str(base))
    page.select_option("select[name=cand]", str(cand))
    page.set_input_files("input[name=thresholds]", str(thresholds))
    with page.expect_navigation():
        page.click("#compare-form button")
    outcome = page.locator("#outcome")
    return str(outcome.get_attribute("data-verdict")), int(
        outcome.get_attribute("data-exit-code") or -1
    )


def test_compare_two_jobs_gives_the_cli_verdict(
    farm: Farm, archive: Path, chromium: Any, tmp_path: Path
) -> None:
    jobs = [_api_submit(farm, archive, ALICE, board=b) for b in AN386]
    for job_id in jobs:
        wait_for(lambda j=job_id: job_state(farm, j, ALICE) in TERMINAL, 300, f"job {job_id}")
        assert job_state(farm, job_id, ALICE) == "done"
    page = browser_login(chromium, farm, ALICE, f"/compare?base={jobs[0]}&cand={jobs[1]}")
    # without thresholds: comparable, pass, the per-layer deltas charted
    assert page.locator("#outcome").get_attribute("data-verdict") == "pass"
    chart = page.locator("svg[data-chart='delta-time']")
    assert chart.get_attribute("data-bars") == "4"
    rules = {
        "pass": {"latency": {"direction": "smaller", "max_regression_pct": 50}},
        "fail": {"latency": {"direction": "smaller"}, "no_such_metric": {"direction": "smaller"}},
    }
    bundles = []
    for job_id in jobs:
        data = page.request.get(farm.url + f"/jobs/{job_id}/files/bundle.zip").body()
        folder = tmp_path / f"job{job_id}"
        zipfile.ZipFile(io.BytesIO(data)).extractall(folder)
        bundles.append(folder)
    for expected, metrics in rules.items():
        thresholds = tmp_path / f"{expected}.json"
        thresholds.write_text(json.dumps({"schema_version": 1, "metrics": metrics}))
        verdict, code = _compare(page, jobs[0], jobs[1], thresholds)
        cli = subprocess.run(
            [
                str(BIN / "aidge-deploy"),
                "compare",
                *map(str, bundles),
                "--thresholds",
                str(thresholds),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (verdict, code) == (expected, cli.returncode), cli.stdout[-2000:]
        assert page.locator("#checks tr[data-status]").count() >= 1
        screenshot(page, f"farm_compare_{expected}")
    page.context.close()


def test_drain_a_board_and_cancel_a_queued_job(farm: Farm, archive: Path, chromium: Any) -> None:
    from aidge_deploy import __version__

    admin = browser_login(chromium, farm, ADMIN, "/admin")
    # the agent serving the boards, with its version and last heartbeat
    agent = [c.inner_text() for c in admin.locator("#agents tr[data-agent='host-a'] td").all()]
    assert agent[2] == str(__version__) and agent[3].endswith(" ago)") and agent[4] == "online"
    with admin.expect_navigation():
        admin.locator(
            "#admin-boards tr[data-board='an386-b'] form[action$='/drain'] button"
        ).click()
    assert admin.locator("#admin-message").inner_text().startswith("Board drained")
    with farm.client(*ADMIN) as api:
        states = {b["name"]: b["state"] for b in api.get("/api/boards").json()}
    assert states["an386-b"] == "drained"
    # the service gives a drained board no job, whatever the page shows: submitted through
    # the API, a job for it stays queued while the board is idle
    waiting = _api_submit(farm, archive, BOB, board="an386-b")
    time.sleep(4)
    assert job_state(farm, waiting, BOB) == "queued"
    page = browser_login(chromium, farm, BOB, "/boards")
    row = page.locator("#boards tr[data-board='an386-b']")
    wait_for(lambda: row.get_attribute("data-queue") == "1", 10, "queue shown")
    assert row.get_attribute("data-state") == "drained"
    screenshot(page, "farm_boards_drained")
    # bob cancels it from the jobs page
    page.goto(farm.url + "/jobs")
    with page.expect_navigation():
        page.locator(f"#jobs tr[data-job='{waiting}'] form button").click()
    page.wait_for_url("**/jobs")
    assert (
        page.locator(f"#jobs tr[data-job='{waiting}']").get_attribute("data-state") == "cancelled"
    )
    assert job_state(farm, waiting, BOB) == "cancelled"
    screenshot(page, "farm_jobs_cancelled")
    # back in service: a job for it runs
    with admin.expect_navigation():
        admin.locator(
            "#admin-boards tr[data-board='an386-b'] form[action$='/return'] button"
        ).click()
    assert admin.locator("#admin-message").inner_text() == "Board returned to service."
    again = _api_submit(farm, archive, BOB, board="an386-b")
    wait_for(lambda: job_state(farm, again, BOB) in TERMINAL, 300, "job after return")
    assert job_state(farm, again, BOB) == "done"
    screenshot(admin, "farm_admin_boards")
    admin.context.close()
    page.context.close()


def _relu_exports(folder: Path, target: str) -> tuple[bytes, bytes]:
    """The tiniest export there is (one ReLU on 8 floats: builds and runs in seconds) as an
    archive, and a copy whose sources do not compile (fails at once on the board)."""
    import shutil

    import onnx
    from onnx import TensorProto, helper

    from aidge_deploy.farm.archive import pack_export
    from conftest import export_with_aidge
    from modelzoo import sample_input

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, folder / "relu.onnx")
    export = Path(
        export_with_aidge(
            folder / "relu.onnx",
            folder / f"relu-{target}",
            target=target,
            kind="output",
            dtype="float32",
            x=sample_input((1, 8)),
        ).path  # type: ignore[attr-defined]
    )
    broken = folder / f"broken-{target}"
    shutil.copytree(export, broken)
    with open(broken / "main.cpp", "a") as f:
        f.write("\n#error this export is broken on purpose\n")
    return pack_export(export), pack_export(broken)


def _page_rows(page: Any) -> dict[str, dict[str, str]]:
    rows = page.locator("#boards tr[data-board]").evaluate_all(
        "rows => rows.map(r => ({...r.dataset}))"
    )
    return {r["board"]: r for r in rows}


def _check_samples(
    samples: list[tuple[float, float, dict[str, dict[str, str]]]], jobs: dict[int, dict[str, Any]]
) -> None:
    """Each page read, against the jobs' own history: a board shown busy with job J had J
    (reserved or running) at some moment of the read; a board shown idle had a moment
    without any; a queue length lies between the jobs surely waiting for the board during
    the whole read and those possibly waiting at some moment of it."""
    eps = 0.05
    busy: dict[str, list[tuple[float, float, int]]] = {}
    waiting: list[tuple[float, float, dict[str, Any]]] = []
    for v in jobs.values():
        times = v["times"]
        end = times.get("done") or times.get("failed") or times.get("cancelled")
        busy.setdefault(v["board"], []).append((times["reserved"], end, v["id"]))
        waiting.append((times["queued"], times["reserved"], v))
    targets = dict(BOARDS)
    followed = 0
    for t0, t1, shown in samples:
        for name, row in shown.items():
            spans = busy.get(name, [])
            if row["state"] == "busy":
                job = int(row["job"])
                span = next((s for s in spans if s[2] == job), None)
                assert span is not None, (name, row, "not a job of this board")
                assert span[0] <= t1 + eps and span[1] >= t0 - eps, (name, row, span, t0, t1)
                followed += 1
            else:
                assert row["state"] == "idle", (name, row)
                assert not any(s[0] <= t0 - eps and s[1] >= t1 + eps for s in spans), (name, t0, t1)

            def for_board(v: dict[str, Any], name: str = name) -> bool:
                return v["requested_board"] == name or (
                    v["requested_board"] is None and v["target"] == targets[name]
                )

            surely = sum(
                1 for q, r, v in waiting if for_board(v) and q <= t0 - eps and r >= t1 + eps
            )
            maybe = sum(
                1 for q, r, v in waiting if for_board(v) and q <= t1 + eps and r >= t0 - eps
            )
            assert surely <= int(row["queue"]) <= maybe, (name, row, surely, maybe)
    assert followed >= 10, "the page did not follow the jobs as they ran"


def test_boards_page_stays_right_while_50_jobs_run(
    farm: Farm, chromium: Any, tmp_path: Path
) -> None:
    """50 jobs of two users on three emulated boards (by target and by board, two of them
    failing): the live boards page never shows a board another state than the service had
    while it was read, never a job on a board it did not run on, and ends exactly right."""
    archives = {}
    for target in ("mps2-an386", "mps3-an547"):
        archives[target], archives["broken"] = _relu_exports(tmp_path, target)
    exports = {}
    for user in (ALICE, BOB):
        with farm.client(*user) as c:
            for key, data in archives.items():
                exports[user[0], key] = c.post("/api/exports", content=data).json()["id"]
    plan: list[tuple[tuple[str, str], dict[str, Any]]] = []
    for i in range(50):
        user = (ALICE, BOB)[i % 2]
        if i in (9, 29):  # fails on the board: its sources do not compile
            body = {"board": "an547-a", "export": exports[user[0], "broken"]}
        elif i % 5 == 4:
            body = {"board": "an547-a", "export": exports[user[0], "mps3-an547"]}
        elif i % 5 == 3:
            body = {"board": "an386-b", "export": exports[user[0], "mps2-an386"]}
        else:
            body = {"target": "mps2-an386", "export": exports[user[0], "mps2-an386"]}
        plan.append((user, body))
    page = browser_login(chromium, farm, ADMIN, "/boards")
    api = farm.client(*ADMIN)
    clients = {u[0]: farm.client(*u) for u in (ALICE, BOB)}
    started = time.monotonic()
    ids = [int(clients[u[0]].post("/api/jobs", json=b).json()["id"]) for u, b in plan]
    samples: list[tuple[float, float, dict[str, dict[str, str]]]] = []
    shot = False

    def updates() -> int:
        return int(page.locator("#live").get_attribute("data-updates") or 0)

    def all_ended() -> bool:
        return all(api.get(f"/api/jobs/{j}").json()["state"] in TERMINAL for j in ids)

    while True:
        # a page read that began after t0 and ended before t1 (two updates: the second
        # one's request started after t0)
        t0 = time.time()
        n = updates()
        wait_for(lambda n=n: updates() >= n + 2, 30, "a live update of the boards page")
        shown = _page_rows(page)
        samples.append((t0, time.time(), shown))
        assert set(shown) == set(BOARDS), shown
        if not shot and any(r["state"] == "busy" for r in shown.values()):
            screenshot(page, "farm_boards_busy")
            shot = True
        if all(r["state"] == "idle" and r["queue"] == "0" for r in shown.values()) and all_ended():
            break
        assert time.monotonic() - started < 1200, "50 jobs did not end in 20 minutes"
    elapsed = time.monotonic() - started
    jobs = {j: api.get(f"/api/jobs/{j}").json() for j in ids}
    failed = sorted(j for j, v in jobs.items() if v["state"] == "failed")
    assert [v["state"] for v in jobs.values()].count("done") == 48, jobs
    assert failed == [ids[9], ids[29]], failed
    _check_samples(samples, jobs)
    # at the end the page is exactly right: idle, empty queues, last result and health
    n = updates()
    wait_for(lambda: updates() >= n + 2, 30, "a last live update")
    shown = _page_rows(page)
    for name in BOARDS:
        mine = sorted(
            (v for v in jobs.values() if v["board"] == name),
            key=lambda v: v["times"].get("done") or v["times"].get("failed"),
        )
        last10 = mine[-10:]
        row = shown[name]
        assert (row["state"], row["queue"], row["job"]) == ("idle", "0", ""), row
        assert int(row["healthDone"]) == sum(v["state"] == "done" for v in last10), (name, row)
        assert int(row["healthFailed"]) == sum(v["state"] == "failed" for v in last10), (name, row)
        link = page.locator(f"#boards tr[data-board='{name}'] td.last a")
        assert link.get_attribute("href") == f"/jobs/{mine[-1]['id']}"
    assert int(shown["an547-a"]["healthFailed"]) == 2
    screenshot(page, "farm_boards_after_50_jobs")
    print(f"50 jobs on 3 emulated boards in {elapsed:.0f} s, {len(samples)} page reads checked")
    for c in (api, *clients.values()):
        c.close()
    page.context.close()
