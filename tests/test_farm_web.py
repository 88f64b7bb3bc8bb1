"""The dashboard's security, in headless Chromium and over plain HTTP, against a real labgrid
coordinator and farm service on loopback.

Jobs here never reach a board: a test-controlled agent registers boards and speaks the
agent protocol (claim, upload files, finish) so that a job has a log, a result and a bundle
to protect. The full flow on emulated boards is in ``test_farm_web_e2e.py``.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser import screenshot
from farmkit import ADMIN, ALICE, BOB, Farm, make_farm, needs_farm
from farmweb import browser_login, csrf, job_state, wait_for, web_client
from test_farm_service import _register_boards

pytestmark = [needs_farm(), pytest.mark.browser]

XSS_NAME = '<img src=x onerror="window.__pwned=1">model.tar.gz'
XSS_ERROR = "<script>window.__pwned=2</script> the run failed"
BOARDS = {"an386-a": "mps2-an386", "an547-a": "mps3-an547"}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    # a TLS proxy in front, on loopback: its X-Forwarded-Proto and -For are believed
    farm = make_farm(
        tmp_path_factory.mktemp("farm-web"), service_args=["--trusted-proxy", "127.0.0.1"]
    )
    agent = _register_boards(farm, BOARDS)
    farm.idle_agent = agent  # type: ignore[attr-defined]
    try:
        yield farm
    finally:
        agent.close()
        farm.stop_all()


def _bundle() -> bytes:
    """A result bundle whose report tries to run a script (the frame must not run it)."""
    report = (
        "<!DOCTYPE html><html><body><h1 id='r'>report</h1>"
        "<svg data-chart='layer-time'><rect class='bar' width='10' height='10'/></svg>"
        "<script>parent.__pwned = 4; document.title = 'ran';</script></body></html>"
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("report.html", report.encode()), ("summary.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _finished_job(farm: Farm, export: Any, *, fail: bool) -> int:
    """A job of alice's on an386-a, ended by the test's agent with a log, result and bundle."""
    from aidge_deploy.farm.archive import pack_export

    with farm.client(*ALICE) as alice:
        up = alice.post(
            "/api/exports",
            content=pack_export(Path(export.path)),
            headers={"X-Export-Name": XSS_NAME},
        )
        assert up.status_code == 201, up.text
        job = alice.post("/api/jobs", json={"export": up.json()["id"], "board": "an386-a"}).json()
    job_id = int(job["id"])
    wait_for(lambda: job_state(farm, job_id, ALICE) == "reserved", 30, "reserved")
    agent: httpx.Client = farm.idle_agent  # type: ignore[attr-defined]
    lease = agent.post(f"/api/agent/jobs/{job_id}/claim").json()["lease"]
    for name, data in (
        ("log.txt", b"==> build.log <==\nbuilding <b>bold</b>\n"),
        ("result.json", json.dumps({"outputs": []}).encode()),
        ("bundle.tar.gz", _bundle()),
    ):
        r = agent.put(
            f"/api/agent/jobs/{job_id}/files/{name}", params={"lease": lease}, content=data
        )
        assert r.status_code == 200, r.text
    end = {"lease": lease, "state": "failed" if fail else "done"}
    if fail:
        end["error"] = XSS_ERROR
    assert agent.post(f"/api/agent/jobs/{job_id}/finish", json=end).status_code == 200
    return job_id


@pytest.fixture(scope="module")
def jobs(farm: Farm, export_factory: Any) -> dict[str, int]:
    export = export_factory("output", target="mps2-an386")
    return {
        "done": _finished_job(farm, export, fail=False),
        "failed": _finished_job(farm, export, fail=True),
    }


def test_login_session_cookie_and_logout(farm: Farm, chromium: Any) -> None:
    context = chromium.new_context()
    page = context.new_page()
    page.goto(farm.url + "/jobs?target=x")
    assert "/login?next=%2Fjobs%3Ftarget%3Dx" in page.url
    screenshot(page, "farm_login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "not-her-password")
    page.click("button[type=submit]")
    assert page.locator(".error").inner_text() == "Wrong username or password."
    assert not [c for c in context.cookies() if c["name"] == "farm_session"]
    page.fill("input[name=password]", ALICE[1])
    page.click("button[type=submit]")
    page.wait_for_url("**/jobs?target=x")
    (cookie,) = [c for c in context.cookies() if c["name"] == "farm_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
    assert page.evaluate("document.cookie").find("farm_session") == -1  # HttpOnly
    # the session is a farm token: it ends at logout, for the pages and the API alike
    assert httpx.get(
        farm.url + "/api/boards", headers={"Authorization": f"Bearer {cookie['value']}"}
    ).is_success
    page.click("form.logout button")
    page.wait_for_url("**/login")
    page.goto(farm.url + "/boards")
    assert "/login" in page.url
    r = httpx.get(farm.url + "/api/boards", headers={"Authorization": f"Bearer {cookie['value']}"})
    assert r.status_code == 401
    context.close()

    # Secure over https (the trusted TLS proxy in front: X-Forwarded-Proto from loopback)
    with httpx.Client(base_url=farm.url, headers={"X-Forwarded-Proto": "https"}) as c:
        form = c.get("/login")
        assert "secure" in form.headers["set-cookie"].lower()
        token = csrf(form.text)
        c.cookies.clear()  # httpx keeps Secure cookies off plain http: send it by hand
        r = c.post(
            "/login",
            data={"username": ALICE[0], "password": ALICE[1], "csrf_token": token},
            headers={"Cookie": f"farm_login_csrf={token}"},
        )
        assert r.status_code == 303
        assert "secure" in r.headers["set-cookie"].lower()
    # no open redirect after login
    with httpx.Client(base_url=farm.url) as c:
        for evil in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
            token = csrf(c.get("/login").text)
            r = c.post(
                "/login",
                data={
                    "username": ALICE[0],
                    "password": ALICE[1],
                    "csrf_token": token,
                    "next": evil,
                },
            )
            assert r.headers["location"] == "/boards", evil


def _job_urls(job_id: int) -> list[str]:
    return [
        f"/jobs/{job_id}",
        f"/jobs/{job_id}/progress",
        f"/jobs/{job_id}/report",
        *(
            f"/jobs/{job_id}/files/{n}"
            for n in ("log.txt", "result.json", "bundle.zip", "bundle.tar.gz")
        ),
        f"/compare?base={job_id}&cand={job_id}",
    ]


def test_a_user_never_opens_another_users_job(
    farm: Farm, jobs: dict[str, int], chromium: Any
) -> None:
    job_id = jobs["done"]
    # through the browser: bob does not see alice's job in the list, and cannot open it
    page = browser_login(chromium, farm, BOB, "/jobs")
    assert page.locator(f"#jobs tr[data-job='{job_id}']").count() == 0
    response = page.goto(farm.url + f"/jobs/{job_id}")
    assert response is not None and response.status == 404
    assert page.locator("[data-error]").inner_text() == f"no job {job_id}"
    screenshot(page, "farm_job_not_found")
    page.context.close()
    # the same answer for every URL of the job as for a job that does not exist
    with (
        web_client(farm, BOB) as bob,
        web_client(farm, ALICE) as alice,
        web_client(farm, ADMIN) as admin,
    ):
        for url in _job_urls(job_id):
            r = bob.get(url)
            missing = bob.get(url.replace(str(job_id), "999999", 1))
            assert r.status_code == missing.status_code == 404, url
            assert f"no job {job_id}" in r.text and "building" not in r.text, url
            assert alice.get(url).status_code == 200, url
            assert admin.get(url).status_code == 200, url
        token = csrf(bob.get("/jobs").text)
        r = bob.post(f"/jobs/{jobs['failed']}/cancel", data={"csrf_token": token})
        assert r.status_code == 404
        # alice's finished job is on her list; bob's list is empty
        assert f'data-job="{job_id}"' in alice.get("/jobs").text
        assert 'data-job="' not in bob.get("/jobs").text
        # admin pages are for admins
        assert alice.get("/admin").status_code == 403
        r = alice.post(
            "/admin/boards/an386-a/drain", data={"csrf_token": csrf(alice.get("/jobs").text)}
        )
        assert r.status_code == 403
        assert admin.get("/admin").status_code == 200
    # logged out: every page sends to the login form, every action too (and does nothing)
    with httpx.Client(base_url=farm.url) as anon:
        for url in [
            *_job_urls(job_id),
            "/boards",
            "/boards/data",
            "/jobs",
            "/submit",
            "/compare",
            "/admin",
        ]:
            r = anon.get(url)
            assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), url
        r = anon.post(f"/jobs/{job_id}/cancel")
        assert r.status_code == 303 and r.headers["location"].startswith("/login")


def test_uploaded_names_and_errors_are_shown_not_run(
    farm: Farm, jobs: dict[str, int], chromium: Any
) -> None:
    page = browser_login(chromium, farm, ALICE, "/jobs")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    assert page.locator("#jobs td.model").first.inner_text() == XSS_NAME
    screenshot(page, "farm_jobs")
    page.goto(farm.url + f"/jobs/{jobs['failed']}")
    assert XSS_ERROR in page.locator("#job-error").inner_text()
    assert XSS_NAME in page.locator("#model").inner_text()
    assert "building <b>bold</b>" in page.locator("#log").inner_text()
    screenshot(page, "farm_job_failed")
    page.goto(farm.url + f"/jobs/{jobs['done']}")
    frame = page.frame_locator("#report")
    assert frame.locator("#r").inner_text() == "report"  # the report is shown...
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None  # ...but nothing in it or the page ran
    assert dialogs == []
    headers = page.request.get(farm.url + f"/jobs/{jobs['done']}/report").headers
    assert "sandbox" in headers["content-security-policy"]
    page_csp = page.request.get(farm.url + "/jobs").headers["content-security-policy"]
    assert "script-src 'self'" in page_csp and "unsafe-inline" not in page_csp
    page.context.close()


XSS_HOST = "<script>window.__pwned=3</script>lab-pc"
XSS_VERSION = '<img src=x onerror="window.__pwned=5">1.0'


def test_agent_supplied_names_are_shown_not_run(farm: Farm, chromium: Any) -> None:
    """What an agent sends (its host name, its version) is shown as text on the boards
    page, live-updated by script, and on the admin page; none of it runs."""
    token = farm.agent_token("xss-agent")
    with httpx.Client(
        base_url=farm.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as agent:
        body = {
            "hostname": XSS_HOST,
            "version": XSS_VERSION,
            "boards": [{"name": "xss-board", "target": "mps3-an547", "kind": "hw"}],
        }
        assert agent.post("/api/agent/register", json=body).status_code == 200

    def shown_not_run(page: Any, dialogs: list[str], name: str) -> None:
        assert page.evaluate("window.__pwned") is None and dialogs == []
        screenshot(page, name)
        page.context.close()

    page = browser_login(chromium, farm, ALICE, "/boards")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    host = page.locator("#boards tr[data-board='xss-board'] td").nth(2)
    assert host.inner_text() == XSS_HOST
    # after a live redraw by boards.js too (it marks the page's last update)
    stamp = page.locator("#updated").inner_text()
    wait_for(lambda: page.locator("#updated").inner_text() != stamp, 30, "redrawn")
    assert host.inner_text() == XSS_HOST
    shown_not_run(page, dialogs, "farm_hostile_agent_boards")

    admin = browser_login(chromium, farm, ADMIN, "/admin")
    admin_dialogs: list[str] = []
    admin.on("dialog", lambda d: (admin_dialogs.append(d.message), d.dismiss()))
    text = admin.locator("tr[data-agent='xss-agent']").inner_text()
    assert XSS_HOST in text and XSS_VERSION in text
    shown_not_run(admin, admin_dialogs, "farm_hostile_agent_admin")


def _rows(html: str) -> dict[int, str]:
    return {int(j): st for j, st in re.findall(r'data-job="(\d+)" data-state="(\w+)"', html)}


def test_jobs_page_filters_by_user_board_target_and_state(
    farm: Farm, jobs: dict[str, int], chromium: Any
) -> None:
    done, failed = jobs["done"], jobs["failed"]
    with web_client(farm, ADMIN) as admin, web_client(farm, ALICE) as alice:
        everything = _rows(admin.get("/jobs").text)
        assert {done: "done", failed: "failed"}.items() <= everything.items()
        cases = {
            "user=alice": {done, failed},
            "user=bob": set(),
            "board=an386-a": {done, failed},
            "board=an547-a": set(),
            "target=mps2-an386": {done, failed},
            "target=mps3-an547": set(),
            "job_state=failed": {failed},
            "user=alice&board=an386-a&target=mps2-an386&job_state=done": {done},
        }
        for query, wanted in cases.items():
            rows = _rows(admin.get(f"/jobs?{query}").text)
            assert {done, failed} & set(rows) == wanted, (query, rows)
            key, _, value = query.rpartition("&")[2].partition("=")
            if key == "job_state":
                assert set(rows.values()) <= {value}, (query, rows)
            if not rows:
                assert "No job matches these filters" in admin.get(f"/jobs?{query}").text
        # a user's filter never reaches beyond her own jobs (the user filter is admins')
        mine = _rows(alice.get("/jobs?user=bob").text)
        assert {done, failed} <= set(mine)
    # in the browser: the filter form
    page = browser_login(chromium, farm, ADMIN, "/jobs")
    page.select_option("#filters select[name=job_state]", "failed")
    with page.expect_navigation():
        page.click("#filters button[type=submit]")
    assert "job_state=failed" in page.url
    states = [r.get_attribute("data-state") for r in page.locator("#jobs tr[data-job]").all()]
    assert states and set(states) == {"failed"}, states
    screenshot(page, "farm_jobs_filtered")
    page.context.close()


_FORM_RE = re.compile(r'<form[^>]*method="post"[^>]*action="([^"]+)"[^>]*>(.*?)</form>', re.S)


def test_every_form_is_protected_against_csrf(farm: Farm, jobs: dict[str, int]) -> None:
    """Every POST form of every page carries a token, and refuses a request without it,
    with another session's token, or sent from another site; nothing changes."""
    queued = _queued_job(farm)
    with web_client(farm, ADMIN) as admin, web_client(farm, ALICE) as alice:
        actions: dict[str, list[str]] = {}
        pages = ["/boards", "/jobs", f"/jobs/{queued}", "/submit", "/compare", "/admin"]
        for path in pages:
            html = admin.get(path).text
            for action, body in _FORM_RE.findall(html):
                assert 'name="csrf_token"' in body, (path, action)
                actions.setdefault(action, re.findall(r'name="([a-z_]+)"', body))
        expected = {
            "/logout",
            f"/jobs/{queued}/cancel",
            "/submit",
            "/compare",
            "/admin/users",
            "/admin/boards/an386-a/drain",
            "/admin/users/alice/disable",
            "/admin/users/alice/password",
        }
        assert expected <= set(actions), sorted(actions)
        # every POST route of the pages, also those whose form shows only in another state
        # (a drained board's "return", a disabled user's "enable"); the login form is below
        from aidge_deploy.farm.web import admin as admin_pages
        from aidge_deploy.farm.web import compare, jobpage, login, pages, submit

        names = {"{name}": "an386-a", "{job_id}": str(queued)}
        for module in (admin_pages, compare, jobpage, login, pages, submit):
            for route in module.router.routes:
                path = getattr(route, "path", "")
                if "POST" not in getattr(route, "methods", ()) or path == "/login":
                    continue
                if path.startswith("/admin/users/"):
                    path = path.replace("{name}", "alice")
                for key, value in names.items():
                    path = path.replace(key, value)
                actions.setdefault(path, [])
        assert {"/admin/boards/an386-a/return", "/admin/users/alice/enable"} <= set(actions)
        good = csrf(admin.get("/jobs").text)
        other = csrf(alice.get("/jobs").text)
        for action, fields in actions.items():
            data = {f: "x-value-12345" for f in fields if f != "csrf_token"}
            attempts = [
                ({}, data),
                ({}, {**data, "csrf_token": other}),
                ({"Origin": "http://evil.example"}, {**data, "csrf_token": good}),
                ({"Sec-Fetch-Site": "cross-site"}, {**data, "csrf_token": good}),
            ]
            for headers, body in attempts:
                r = admin.post(action, data=body, headers=headers)
                assert r.status_code == 403, (action, headers, r.status_code)
                assert "security token" in r.text
        # nothing happened: still logged in, job still queued, board not drained, no user added
        assert admin.get("/admin").status_code == 200
        assert job_state(farm, queued, ALICE) in ("queued", "reserved")
        with farm.client(*ADMIN) as api:
            assert {b["name"]: b["state"] for b in api.get("/api/boards").json()}[
                "an386-a"
            ] != "drained"
        assert "x-value-12345" not in admin.get("/admin").text
    # the login form too (double-submit cookie)
    with httpx.Client(base_url=farm.url) as c:
        r = c.post("/login", data={"username": ALICE[0], "password": ALICE[1]})
        assert r.status_code == 403 and "farm_session" not in r.headers.get("set-cookie", "")
        token = csrf(c.get("/login").text)
        c.cookies.clear()
        r = c.post("/login", data={"username": ALICE[0], "password": ALICE[1], "csrf_token": token})
        assert r.status_code == 403


def _queued_job(farm: Farm) -> int:
    """A job of alice's that waits (for an an547 board, kept busy by nobody: never claimed)."""
    with farm.client(*ALICE) as alice:
        exports = alice.get("/api/jobs").json()
        export = exports[0]["export"]
        job = alice.post("/api/jobs", json={"export": export, "target": "mps2-an386"}).json()
    return int(job["id"])


def test_admin_manages_users(farm: Farm, chromium: Any) -> None:
    admin = browser_login(chromium, farm, ADMIN, "/admin")
    admin.fill("#add-user input[name=username]", "carol")
    admin.fill("#add-user input[name=password]", "carol-pass-1")
    with admin.expect_navigation():
        admin.click("#add-user button")
    assert admin.locator("#admin-message").inner_text() == "User added."
    carol = browser_login(chromium, farm, ("carol", "carol-pass-1"), "/boards")
    assert carol.locator(".who").get_attribute("data-user") == "carol"
    # a too-short password is refused with the reason, nothing changed
    row = admin.locator("#users tr[data-user='carol']")
    row.locator("input[name=password]").fill("short")
    row.locator("input[name=password]").evaluate("e => e.removeAttribute('minlength')")
    with admin.expect_navigation():
        row.locator("form[action$='/password'] button").click()
    assert "too short" in admin.locator("#admin-error").inner_text()
    # reset: carol's session ends, the new password works
    row = admin.locator("#users tr[data-user='carol']")
    row.locator("input[name=password]").fill("carol-new-pass-2")
    with admin.expect_navigation():
        row.locator("form[action$='/password'] button").click()
    assert "Password changed" in admin.locator("#admin-message").inner_text()
    carol.goto(farm.url + "/jobs")
    assert "/login" in carol.url
    carol.context.close()
    carol = browser_login(chromium, farm, ("carol", "carol-new-pass-2"), "/jobs")
    # disable: her session ends and she cannot log in again
    with admin.expect_navigation():
        admin.locator("#users tr[data-user='carol'] form[action$='/disable'] button").click()
    assert admin.locator("#users tr[data-user='carol']").get_attribute("data-disabled") == "yes"
    carol.goto(farm.url + "/jobs")
    assert "/login" in carol.url
    carol.fill("input[name=username]", "carol")
    carol.fill("input[name=password]", "carol-new-pass-2")
    carol.click("button[type=submit]")
    assert carol.locator(".error").inner_text() == "Wrong username or password."
    # an admin cannot lock themselves out
    with admin.expect_navigation():
        admin.locator("#users tr[data-user='admin'] form[action$='/disable'] button").click()
    assert "your own account" in admin.locator("#admin-error").inner_text()
    with admin.expect_navigation():
        admin.locator("#users tr[data-user='carol'] form[action$='/enable'] button").click()
    assert admin.locator("#users tr[data-user='carol']").get_attribute("data-disabled") == "no"
    # agents: last heartbeat and version
    agent_row = admin.locator("#agents tr[data-agent='idle-agent']")
    cells = [c.inner_text() for c in agent_row.locator("td").all()]
    assert cells[0] == "idle-agent" and cells[1] == "h" and cells[-1] == "online", cells
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(.+ ago\)", cells[3]), cells
    screenshot(admin, "farm_admin")
    carol.context.close()
    admin.context.close()


def test_pages_load_nothing_from_elsewhere_and_little_script(farm: Farm, chromium: Any) -> None:
    """Works in a lab without internet: every request a page makes goes to the farm itself,
    and the scripts are the few small files the pages need (no framework bundle)."""
    from aidge_deploy.farm.web.templating import STATIC_DIR, TEMPLATES_DIR

    page = browser_login(chromium, farm, ADMIN, "/boards")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    for path in ("/boards", "/jobs", "/submit", "/compare", "/admin"):
        page.goto(farm.url + path)
    page.wait_for_timeout(2000)  # a live update of the boards page
    assert requests and all(u.startswith(farm.url + "/") or u.startswith("data:") for u in requests)
    scripts = sorted(STATIC_DIR.glob("*.js"))
    assert {p.name for p in scripts} == {"apidocs.js", "boards.js", "job.js", "submit.js"}
    assert sum(p.stat().st_size for p in scripts) < 20_000
    for template in TEMPLATES_DIR.glob("*.html"):
        text = template.read_text()
        assert "<script>" not in text and " style=" not in text, template.name  # CSP
        assert "http://" not in text and "https://" not in text, template.name
    page.context.close()


def test_api_docs_are_served_from_the_package_under_the_pages_policy(
    farm: Farm, chromium: Any
) -> None:
    """``/api/docs`` (Swagger UI) works without internet: its files come from the farm
    itself, under the pages' Content-Security-Policy, and nothing it does is refused."""
    context = chromium.new_context()
    page = context.new_page()
    requests: list[str] = []
    refused: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)  # fmt: skip
    response = page.goto(farm.url + "/api/docs")
    assert (
        response is not None and "script-src 'self'" in response.headers["content-security-policy"]
    )
    page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    assert "aidge-deploy board farm" in page.inner_text(".swagger-ui .info .title")
    page.get_by_text("/api/jobs/{job_id}/cancel", exact=True).first.wait_for(timeout=30_000)
    screenshot(page, "farm_api_docs")
    assert all(u.startswith(farm.url + "/") or u.startswith("data:") for u in requests), requests
    assert refused == [], refused
    context.close()


def test_submit_page_refuses_a_bad_upload(farm: Farm, chromium: Any, tmp_path: Path) -> None:
    page = browser_login(chromium, farm, ALICE, "/submit")
    bad = tmp_path / "not-an-export.tar.gz"
    bad.write_bytes(b"this is not a tar archive")
    page.set_input_files("input[name=file]", str(bad))
    page.select_option("select[name=destination]", "board:an386-a")
    page.click("#submit-button")
    assert "not a readable tar archive" in page.locator("#submit-error").inner_text()
    assert page.locator("select[name=destination]").input_value() == "board:an386-a"
    assert list((farm.root / "service" / "tmp").glob("*")) == []
    screenshot(page, "farm_submit_refused")
    page.context.close()


def test_delta_chart_draws_each_layers_change() -> None:
    from aidge_deploy.farm.web.charts import BETTER, WORSE, delta_chart
    from aidge_deploy.report.compare import MetricDelta

    deltas = [
        MetricDelta("layers/conv<1>/time", "ms", 2.0, 3.0),
        MetricDelta("layers/fc/time", "ms", 2.0, 1.5),
        MetricDelta("layers/relu/time", "ms", None, 1.0),
    ]
    svg = delta_chart(deltas, chart_id="delta-time")
    bars = re.findall(
        r'<rect class="bar" data-value="([^"]+)" x="([^"]+)"[^>]*width="([^"]+)"[^>]*fill="([^"]+)"',
        svg,
    )
    assert [(float(v), c) for v, _, _, c in bars] == [(1.0, WORSE), (-0.5, BETTER)]
    (_, x_worse, w_worse, _), (_, x_better, w_better, _) = bars
    assert float(w_worse) == pytest.approx(2 * float(w_better))  # to scale
    assert float(x_better) + float(w_better) == pytest.approx(float(x_worse))  # around zero
    assert "conv&lt;1&gt;" in svg and "<1>" not in svg and "n/a" in svg
    assert 'data-bars="2"' in svg


def test_boards_page_shows_a_lost_agents_board_offline(farm: Farm, chromium: Any) -> None:
    token = farm.agent_token("gone-agent")
    with httpx.Client(
        base_url=farm.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as agent:
        r = agent.post(
            "/api/agent/register",
            json={"hostname": "h2", "boards": [{"name": "old-board", "target": "mps2-an386"}]},
        )
        assert r.status_code == 200, r.text
    page = browser_login(chromium, farm, ALICE, "/boards")
    row = page.locator("#boards tr[data-board='old-board']")
    assert row.get_attribute("data-state") == "idle"
    # the agent stops heartbeating: after the service's agent timeout the live page says so
    wait_for(lambda: row.get_attribute("data-state") == "offline", 60, "offline shown")
    assert re.search(r"offline since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row.inner_text())
    screenshot(page, "farm_boards_offline")
    page.context.close()
