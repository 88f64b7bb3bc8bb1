"""The farm service's refusals, on a real labgrid coordinator and service on loopback.

Each refusal is checked for its clear error *and* for what it left: no export stored, no
job created, nothing reserved in labgrid.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from farmkit import ADMIN, ALICE, BOB, Farm, needs_farm

pytestmark = [needs_farm()]


def _tar(members: list[tuple[str, bytes | None, str]]) -> bytes:
    """A .tar.gz with (name, data, kind) members; kind: file, dir, symlink, hardlink, fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data or b"")
                tar.addfile(info, io.BytesIO(data or b""))
                continue
            info.type = {
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            info.linkname = "/etc/passwd" if kind in ("symlink", "hardlink") else ""
            tar.addfile(info)
    return buf.getvalue()


def _pack(export: Any) -> bytes:
    from aidge_deploy.farm.archive import pack_export

    return pack_export(Path(export.path))


def _stored(farm: Farm) -> list[Path]:
    return sorted((farm.root / "service" / "exports").glob("*"))


def _leftovers(farm: Farm) -> list[Path]:
    return sorted((farm.root / "service" / "tmp").glob("*"))


def _register_boards(farm: Farm, boards: dict[str, str]) -> httpx.Client:
    """Register boards as an agent would (no agent process: nothing will run them); a
    thread keeps the registration alive with heartbeats until the client is closed."""
    token = farm.agent_token("idle-agent")
    agent = httpx.Client(
        base_url=farm.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    r = agent.post(
        "/api/agent/register",
        json={"hostname": "h", "boards": [{"name": b, "target": t} for b, t in boards.items()]},
    )
    assert r.status_code == 200, r.text

    def beat() -> None:
        while not agent.is_closed:
            with contextlib.suppress(httpx.HTTPError, RuntimeError):
                agent.post("/api/agent/heartbeat", json={"running": []})
            time.sleep(1.0)

    threading.Thread(target=beat, daemon=True).start()
    return agent


def test_no_admin_no_service(tmp_path: Path) -> None:
    from aidge_deploy.farm.service import create_app
    from aidge_deploy.farm.settings import FarmSettings
    from aidge_deploy.farm.state import NoAdminError

    with pytest.raises(NoAdminError, match="no admin") as err:
        create_app(FarmSettings(data_dir=tmp_path))
    assert "farm user add" in (err.value.hint or "")


def test_refusals_store_and_run_nothing(service_farm: Farm, export_factory) -> None:  # type: ignore[no-untyped-def]
    farm = service_farm
    url = farm.url
    export = export_factory("output", target="mps2-an386")
    agent = _register_boards(farm, {"an386-a": "mps2-an386"})

    # wrong password: 401, nothing issued, the password not echoed
    r = httpx.post(url + "/api/token", json={"username": "alice", "password": "wrong-pass-1"})
    assert r.status_code == 401 and "wrong username or password" in r.text
    assert "wrong-pass-1" not in r.text
    r = httpx.post(url + "/api/token", json={"username": "nobody", "password": "whatever12"})
    assert r.status_code == 401

    # no token / garbage token
    assert httpx.get(url + "/api/boards").status_code == 401
    assert (
        httpx.get(url + "/api/boards", headers={"Authorization": "Bearer nope"}).status_code == 401
    )

    # expired token
    short = farm.token(*ALICE, expires_in=1)
    time.sleep(1.3)
    r = httpx.get(url + "/api/boards", headers={"Authorization": f"Bearer {short}"})
    assert r.status_code == 401 and "expired" in r.json()["error"]["message"]

    alice = farm.client(*ALICE)
    bob = farm.client(*BOB)
    # every API answer tells how long the service spent on it
    timing = alice.get("/api/boards").headers.get("server-timing", "")
    assert timing.startswith("app;dur=") and float(timing[len("app;dur=") :]) >= 0, timing

    # unsafe archives: refused before anything is extracted or stored
    manifest = (Path(export.path) / ".aidge-export.json").read_bytes()
    bad = {
        "dotdot": [(".aidge-export.json", manifest, "file"), ("../evil.txt", b"x", "file")],
        "absolute": [(".aidge-export.json", manifest, "file"), ("/tmp/evil.txt", b"x", "file")],
        "symlink": [(".aidge-export.json", manifest, "file"), ("link", None, "symlink")],
        "hardlink": [(".aidge-export.json", manifest, "file"), ("hard", None, "hardlink")],
        "fifo": [(".aidge-export.json", manifest, "file"), ("pipe", None, "fifo")],
        "not-an-export": [("README.md", b"hello", "file")],
        "bad-manifest": [(".aidge-export.json", b'{"schema_version": 1}', "file")],
    }
    expected = {
        "dotdot": "'..'",
        "absolute": "absolute path",
        "symlink": "symbolic link",
        "hardlink": "hard link",
        "fifo": "device or FIFO",
        "not-an-export": "not an Aidge export",
        "bad-manifest": "not a valid Aidge export",
    }
    for name, members in bad.items():
        r = alice.post("/api/exports", content=_tar(members))
        assert r.status_code == 400, (name, r.text)
        assert expected[name] in r.json()["error"]["message"], (name, r.text)
    r = alice.post("/api/exports", content=b"this is not a tar archive")
    assert r.status_code == 400 and "not a readable tar archive" in r.text
    assert not (farm.root / "evil.txt").exists()
    assert _stored(farm) == [] and _leftovers(farm) == []

    # a good export is stored once, whoever uploads it and however often
    body = _pack(export)
    first = alice.post("/api/exports", content=body)
    assert first.status_code == 201, first.text
    again = bob.post("/api/exports", content=_pack(export))
    assert again.json()["id"] == first.json()["id"]
    assert len(_stored(farm)) == 1 and _leftovers(farm) == []
    export_id = first.json()["id"]

    # unknown board: did-you-mean and the farm's boards; no job created
    r = alice.post("/api/jobs", json={"export": export_id, "board": "an386-b"})
    assert r.status_code == 404
    err = r.json()["error"]
    assert "did you mean 'an386-a'" in err["message"] and err["boards"] == ["an386-a"]
    assert alice.get("/api/jobs").json() == []

    # counters the board cannot count fail at submit time
    r = alice.post(
        "/api/jobs",
        json={"export": export_id, "board": "an386-a", "config": {"counters": ["nope"]}},
    )
    assert r.status_code == 422, r.text
    # connection settings and secrets are not part of a job
    r = alice.post(
        "/api/jobs",
        json={"export": export_id, "board": "an386-a", "config": {"api_password": "s3cret-value"}},
    )
    assert r.status_code == 422 and "api_password" in r.text and "s3cret-value" not in r.text

    # another user's job: same answer as a job that does not exist
    job = alice.post("/api/jobs", json={"export": export_id, "board": "an386-a"})
    assert job.status_code == 201, job.text
    job_id = job.json()["id"]
    for path in ("", "/events", "/log", "/result", "/bundle"):
        r = bob.get(f"/api/jobs/{job_id}{path}")
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["message"] == f"no job {job_id}"
    assert bob.post(f"/api/jobs/{job_id}/cancel").status_code == 404
    assert bob.get("/api/jobs").json() == []
    # bob cannot submit alice's export unless he uploaded it himself (he did above)
    carol_export = alice.post(
        "/api/exports", content=_tar([(".aidge-export.json", manifest, "file")])
    )
    assert carol_export.status_code == 201
    r = bob.post("/api/jobs", json={"export": carol_export.json()["id"], "board": "an386-a"})
    assert r.status_code == 404
    assert bob.get(f"/api/exports/{carol_export.json()['id']}").status_code == 404
    assert alice.get(f"/api/exports/{carol_export.json()['id']}").status_code == 200
    # passwords and tokens are stored hashed, never as given
    db = (farm.root / "service" / "farm.db").read_bytes()
    for wal in (farm.root / "service").glob("farm.db-wal"):
        db += wal.read_bytes()
    for secret in (ALICE[1], BOB[1], ADMIN[1], short):
        assert secret.encode() not in db
    # an admin sees everything
    with farm.client(*ADMIN) as admin:
        assert [j["id"] for j in admin.get("/api/jobs").json()] == [job_id]

    # agents cannot use the user API and users cannot use the agent API
    assert agent.get("/api/jobs").status_code == 403
    assert alice.post("/api/agent/poll", params={"wait": 0}).status_code == 403

    # alice's job is queued in labgrid and reserved for the (idle) board; she cancels it
    _wait_state(alice, job_id, {"reserved"})
    r = alice.post(f"/api/jobs/{job_id}/cancel")
    assert r.json()["state"] == "cancelled"
    assert set(r.json()["times"]) >= {"queued", "reserved", "cancelled"}
    assert r.json()["cancelled_in"] == "reserved"  # what the job page says too
    agent.close()


def _wait_state(
    client: httpx.Client, job_id: int, states: set[str], timeout: float = 30
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} stayed {job['state']}, wanted {states}")


def test_openapi_lists_the_endpoints(service_farm: Farm) -> None:
    doc = httpx.get(service_farm.url + "/api/openapi.json").json()
    paths = set(doc["paths"])
    for p in (
        "/api/token",
        "/api/boards",
        "/api/exports",
        "/api/jobs",
        "/api/jobs/{job_id}",
        "/api/jobs/{job_id}/events",
        "/api/jobs/{job_id}/result",
        "/api/jobs/{job_id}/bundle",
        "/api/jobs/{job_id}/log",
        "/api/jobs/{job_id}/cancel",
    ):
        assert p in paths, p


def _bomb(manifest: bytes, zeros: int) -> bytes:
    """A small .tar.gz holding a manifest and ``zeros`` bytes of zeros (streamed in)."""
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        info = tarfile.TarInfo(".aidge-export.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        info = tarfile.TarInfo("dnn/weights.bin")
        info.size = zeros

        class Zeros(io.RawIOBase):
            left = zeros

            def readinto(self, b: Any) -> int:
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n

        tar.addfile(info, Zeros())
    return buf.getvalue()


def _peak_size(folder: Path, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set():
        size = 0
        for p in folder.rglob("*"):
            with contextlib.suppress(OSError):
                if p.is_file():
                    size += p.stat().st_size
        peak[0] = max(peak[0], size)
        time.sleep(0.005)


def test_uploads_are_bounded_while_they_are_read(farm_root: Path, export_factory) -> None:  # type: ignore[no-untyped-def]
    """A compressed upload past ``--max-upload-mb`` is refused before it is read; a 1 MB
    archive expanding past ``--max-export-mb`` (a gzip of zeros) and one with more members
    than ``--max-export-members`` are refused with 413 while they are read: nothing is
    extracted, no more than the limit is written to disk, nothing stays behind."""
    from farmkit import make_farm

    export = export_factory("output", target="mps2-an386")
    manifest = (Path(export.path) / ".aidge-export.json").read_bytes()
    farm = make_farm(farm_root)
    try:
        farm.stop_all()
        farm.start_coordinator()
        limit = 16
        farm.start_service(
            ["--max-upload-mb", "2", "--max-export-mb", str(limit), "--max-export-members", "500"]
        )
        with farm.client(*ALICE) as alice:
            big = gzip.compress(b"\0" * 10) + b"x" * (3 * 1024 * 1024)
            r = alice.post("/api/exports", content=big)
            assert r.status_code == 413 and "limit of 2 MiB" in r.text
            bomb = _bomb(manifest, 1024**3)  # 1 GiB of zeros
            assert len(bomb) < 1_200_000, len(bomb)
            stop, peak = threading.Event(), [0]
            watcher = threading.Thread(
                target=_peak_size, args=(farm.root / "service" / "tmp", stop, peak)
            )
            watcher.start()
            try:
                r = alice.post("/api/exports", content=bomb)
            finally:
                stop.set()
                watcher.join()
            assert r.status_code == 413, r.text
            assert f"more than {limit} MiB" in r.json()["error"]["message"]
            assert "--max-export-mb" in r.json()["error"]["hint"]
            assert peak[0] <= len(bomb) + limit * 2**20, peak  # the upload itself, no more
            many = _tar([(".aidge-export.json", manifest, "file")] + [(f"f{i}", b"", "file") for i in range(600)])  # fmt: skip
            r = alice.post("/api/exports", content=many)
            assert r.status_code == 413 and "more than 500 members" in r.text, r.text
            # within the limits, the same export is accepted
            assert alice.post("/api/exports", content=_pack(export)).status_code == 201
        assert len(_stored(farm)) == 1 and _leftovers(farm) == []
    finally:
        farm.stop_all()


def test_farm_up_serves_three_emulated_boards_and_stops_on_sigterm(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "aidge-deploy")
    data = tmp_path / "farm"
    env = {**os.environ, "AIDGE_DEPLOY_API_PASSWORD": ADMIN[1]}
    # no admin: refuses to start, says how to make one
    refused = subprocess.run(
        [exe, "farm", "up", "--data-dir", str(data), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert refused.returncode == 2 and "farm user add" in " ".join(refused.stderr.split())
    added = subprocess.run(
        [exe, "farm", "user", "add", ADMIN[0], "--admin", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert added.returncode == 0, added.stderr
    assert ADMIN[1] not in (data / "farm.db").read_bytes().decode("latin-1")
    up = subprocess.Popen(
        [exe, "farm", "up", "--data-dir", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        url_file = data / "service.url"
        deadline = time.monotonic() + 120
        boards: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            if url_file.exists():
                url = url_file.read_text().strip()
                with contextlib.suppress(httpx.HTTPError):
                    tok = httpx.post(
                        url + "/api/token", json={"username": ADMIN[0], "password": ADMIN[1]}
                    ).json()
                    boards = httpx.get(
                        url + "/api/boards",
                        headers={"Authorization": f"Bearer {tok['access_token']}"},
                    ).json()
                    if len(boards) == 3 and all(b["state"] == "idle" for b in boards):
                        break
            assert up.poll() is None, up.stdout.read() if up.stdout else ""
            time.sleep(0.3)
        assert sorted(b["name"] for b in boards) == ["mps2-an386", "mps3-an547", "netduinoplus2"]
        assert all(b["name"] == b["target"] for b in boards)
        children = _descendants(up.pid)
        assert len(children) >= 3, children
        up.send_signal(signal.SIGTERM)
        assert up.wait(60) == 0
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if _alive(p)], "farm up left a process running"
    finally:
        if up.poll() is None:
            up.kill()


def _descendants(pid: int) -> list[int]:
    out = subprocess_output(["ps", "-eo", "pid=,ppid="])
    parents: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = (int(x) for x in line.split())
        parents.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for c in parents.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def subprocess_output(args: list[str]) -> str:
    import subprocess

    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_failed_logins_slow_that_address_for_that_user_and_lock_nobody_out(tmp_path: Path) -> None:
    """10 wrong logins for a user from one address, through the API's token and the
    dashboard's form (one throttle): that address is slowed down for that user — 429 and a
    ``Retry-After`` that doubles with each failure, the right password not even checked
    while it waits — while the right password from another address, another user from
    the same address and an API token from anywhere still work. ``X-Forwarded-For`` is
    believed only from a proxy named in the settings."""
    from starlette.testclient import TestClient

    from aidge_deploy.farm.auth import add_user, create_api_token
    from aidge_deploy.farm.db import Database
    from aidge_deploy.farm.service import create_app
    from aidge_deploy.farm.settings import FarmSettings, LoginLimits
    from aidge_deploy.farm.states import Role
    from farmweb import csrf

    db = Database(f"sqlite:///{tmp_path / 'farm.db'}")
    with db.session() as s:
        for name, password in (ADMIN, ALICE, BOB):
            add_user(s, name, password, role=Role.ADMIN if name == ADMIN[0] else Role.USER)
        api_token, _ = create_api_token(s, ALICE[0], "ci")
    db.dispose()
    settings = FarmSettings(
        data_dir=tmp_path,
        login_limits=LoginLimits(free=3, base_s=10.0, max_s=600.0),
        trusted_proxies=("10.0.0.254",),
    )
    app = create_app(settings, start_dispatcher=False)
    now = [1000.0]
    app.state.farm.logins._clock = lambda: now[0]  # the test's clock: no real waiting

    def api_login(c: TestClient, user: str, password: str, address: str) -> Any:
        return c.post(
            "/api/token",
            json={"username": user, "password": password},
            headers={"X-Forwarded-For": address},
        )

    def form_login(c: TestClient, user: str, password: str, address: str) -> Any:
        token = csrf(c.get("/login").text)
        data = {"username": user, "password": password, "csrf_token": token}
        return c.post(
            "/login", data=data, headers={"X-Forwarded-For": address}, follow_redirects=False
        )

    attacker = "192.0.2.1"
    with TestClient(app, client=("10.0.0.254", 40000)) as proxy:
        for _ in range(3):  # successes never count
            assert api_login(proxy, *ALICE, attacker).status_code == 200
        waits: list[int] = []
        failures = 0
        while failures < 10:  # the guesser waits out each delay, then guesses again
            login = api_login if failures % 2 else form_login
            wrong = login(proxy, ALICE[0], f"guess-{failures}", attacker)
            if wrong.status_code == 429:
                waits.append(int(wrong.headers["retry-after"]))
                now[0] += waits[-1]
                continue
            assert wrong.status_code == 401, wrong.text
            failures += 1
        assert waits == [10, 20, 40, 80, 160, 320], waits  # none for 3, then doubling
        for login in (api_login, form_login):
            refused = login(proxy, *ALICE, attacker)  # the right password, not even checked
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) == 600  # capped
            assert "too many failed logins" in refused.text.lower() and ALICE[1] not in refused.text
        # nobody else is locked out: the right password from another address, another
        # user from the attacker's address, an API token from anywhere
        assert api_login(proxy, *ALICE, "192.0.2.2").status_code == 200
        assert form_login(proxy, *ALICE, "198.51.100.7").status_code == 303
        assert api_login(proxy, *BOB, attacker).status_code == 200
        with_token = {"Authorization": f"Bearer {api_token}", "X-Forwarded-For": attacker}
        assert proxy.get("/api/boards", headers=with_token).status_code == 200
        # once the wait is over, the right password works from there too (and clears it)
        now[0] += 600
        assert api_login(proxy, *ALICE, attacker).status_code == 200
        assert api_login(proxy, ALICE[0], "guess-again", attacker).status_code == 401
        assert api_login(proxy, *ALICE, attacker).status_code == 200
    # a peer that is not a listed proxy cannot claim another address
    with TestClient(app, client=("10.0.0.9", 40000)) as direct:
        for attempt in range(4):
            assert (
                api_login(direct, BOB[0], f"guess-{attempt}", f"203.0.113.{attempt}").status_code
                == 401
            )
        assert api_login(direct, *BOB, "203.0.113.99").status_code == 429  # all from 10.0.0.9
    with TestClient(app, client=("10.0.0.254", 40000)) as proxy:
        assert api_login(proxy, *BOB, "203.0.113.99").status_code == 200


def test_api_backend_job_failure_cancel_and_timeout_are_typed(  # type: ignore[no-untyped-def]
    service_farm: Farm, export_factory, monkeypatch
) -> None:
    """Through ``deploy(backend="api")``: a job that fails on the board, a job cancelled
    on the farm and a job that does not finish in ``FarmOptions.job_timeout`` each raise their own
    typed error with the job id, a hint and the job's log URL; the timed-out job is
    cancelled on the farm (it does not run on for nobody). The test's agent plays the
    board host (claims and ends jobs) so no board is needed."""
    import aidge_deploy
    from aidge_deploy.backendoptions import FarmOptions
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.errors import FarmError, FarmJobCancelled, FarmJobFailed, FarmTimeout

    farm = service_farm
    export = export_factory("output", target="mps2-an386")
    agent = _register_boards(farm, {"an386-a": "mps2-an386"})
    alice = farm.client(*ALICE)

    def deploy_in_thread(**extra: Any) -> tuple[threading.Thread, list[BaseException]]:
        raised: list[BaseException] = []
        values: dict[str, Any] = {
            "api_username": ALICE[0],
            "api_password": ALICE[1],
            "api_board_name": "an386-a",
            "api_poll_interval": 0.2,
            **extra,
        }
        config = DeployConfig(backend="api", api_url=farm.url, **values)

        def run() -> None:
            try:
                aidge_deploy.deploy(export, config)
            except BaseException as exc:  # handed to the test
                raised.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread, raised

    def reserved_job() -> int:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            jobs = [j for j in alice.get("/api/jobs").json() if j["state"] == "reserved"]
            if jobs:
                return int(jobs[0]["id"])
            time.sleep(0.1)
        raise AssertionError("no job of alice's was reserved")

    def check(err: BaseException, cls: type[FarmError], job_id: int) -> FarmError:
        assert isinstance(err, cls), repr(err)
        log_url = f"{farm.url}/api/jobs/{job_id}/log"
        assert err.job_id == job_id and err.log_url == log_url
        assert log_url in (err.hint or ""), err.hint
        assert ALICE[1] not in str(err) + (err.hint or "")
        return err

    # failure on the board: the board host's error, its type and hint, the log downloaded
    thread, raised = deploy_in_thread()
    job_id = reserved_job()
    lease = agent.post(f"/api/agent/jobs/{job_id}/claim").json()["lease"]
    log = b"==> build.log <==\nmake: *** [all] Error 2\n"
    r = agent.put(f"/api/agent/jobs/{job_id}/files/log.txt", params={"lease": lease}, content=log)
    assert r.status_code == 200, r.text
    end = {
        "lease": lease,
        "state": "failed",
        "error": "the build failed",
        "error_hint": "Check the toolchain.",
        "error_type": "BuildError",
    }
    assert agent.post(f"/api/agent/jobs/{job_id}/finish", json=end).status_code == 200
    thread.join(60)
    failed = check(raised[0], FarmJobFailed, job_id)
    assert "the build failed" in failed.message and "an386-a" in failed.message
    assert failed.remote_type == "BuildError" and "Check the toolchain." in (failed.hint or "")
    assert failed.log_path is not None and failed.log_path.read_bytes() == log

    # cancelled on the farm (by its owner, from elsewhere) while it waits for the board
    thread, raised = deploy_in_thread()
    job_id = reserved_job()
    assert alice.post(f"/api/jobs/{job_id}/cancel").json()["state"] == "cancelled"
    thread.join(60)
    check(raised[0], FarmJobCancelled, job_id)

    # with a long-lived API token instead of a user name and password: the job is alice's
    from aidge_deploy.farm.auth import create_api_token
    from aidge_deploy.farm.db import Database

    db = Database(farm.database_url)
    with db.session() as s:
        api_token, _ = create_api_token(s, ALICE[0], "ci")
    db.dispose()
    monkeypatch.setenv("AIDGE_DEPLOY_API_TOKEN", api_token)
    thread, raised = deploy_in_thread(api_username=None, api_password=None)
    job_id = reserved_job()
    assert alice.post(f"/api/jobs/{job_id}/cancel").json()["state"] == "cancelled"
    thread.join(60)
    check(raised[0], FarmJobCancelled, job_id)
    assert api_token not in str(raised[0]) + (raised[0].hint or "")  # type: ignore[attr-defined]
    monkeypatch.delenv("AIDGE_DEPLOY_API_TOKEN")

    # not finished in its job_timeout (nobody claims it): an error, and cancelled there
    thread, raised = deploy_in_thread(backend_options=(FarmOptions(job_timeout=1.0),))
    job_id = reserved_job()
    thread.join(60)
    check(raised[0], FarmTimeout, job_id)
    assert alice.get(f"/api/jobs/{job_id}").json()["state"] == "cancelled"
    alice.close()
    agent.close()


def _shipped_commands() -> list[tuple[str, list[str]]]:
    """Every command line of the systemd units in contrib/farm/systemd, of the README and of
    docs/farm.md: (where, argv), continuation lines joined, comments dropped."""
    import shlex

    root = Path(__file__).parent.parent
    found: list[tuple[str, list[str]]] = []
    for unit in sorted((root / "contrib" / "farm" / "systemd").glob("*.service")):
        text = unit.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            if line.startswith("ExecStart="):
                found.append((unit.name, shlex.split(line[len("ExecStart=") :])))
    for page in ("README.md", "docs/farm.md"):
        text = (root / page).read_text().replace("\\\n", " ")
        for line in text.splitlines():
            line = re.sub(r"^(\w+=\S*\s+)+", "", line.split("#", 1)[0].strip())  # VAR=value
            if line.startswith(("aidge-deploy farm ", "labgrid-coordinator ", "labgrid-exporter ")):
                found.append((page, shlex.split(line)))
    return found


def test_shipped_units_and_readme_commands_parse() -> None:
    """The systemd units and the README's farm commands are real command lines: each
    parses with the CLI it names (every option exists and takes the value given)."""
    import typer.main

    from aidge_deploy.cli.main import app

    commands = _shipped_commands()
    where = {w for w, _ in commands}
    assert {"aidge-farm.service", "aidge-farm-agent.service", "README.md", "docs/farm.md"} <= where
    assert {"labgrid-coordinator.service", "labgrid-exporter.service"} <= where, where
    cli = typer.main.get_command(app)
    for place, argv in commands:
        program = Path(argv[0]).name
        if program == "aidge-deploy":
            group: Any = cli
            args = argv[1:]
            while hasattr(group, "commands") and args and args[0] in group.commands:
                group, args = group.commands[args[0]], args[1:]
            assert not hasattr(group, "commands"), (place, argv)
            group.make_context(program, list(args))  # raises on an unknown option or value
            continue
        # labgrid's own programs: their argparse --help lists every option used
        help_text = subprocess.run(
            [str(Path(sys.executable).parent / program), "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        for word in argv[1:]:
            if word.startswith("-"):
                assert f" {word}" in help_text, (place, word)


def test_service_on_postgresql(postgres: str, farm_root: Path, export_factory) -> None:  # type: ignore[no-untyped-def]
    """``--database-url`` (or ``AIDGE_FARM_DATABASE_URL``) to a real PostgreSQL server: the
    users and agent token made with the CLI, the service, a job from upload to done, and a
    restart of the service that finds it again — and no SQLite file anywhere."""
    from farmkit import BIN, make_farm

    cli = str(BIN / "aidge-deploy")
    env = {**os.environ, "AIDGE_FARM_DATABASE_URL": postgres, "AIDGE_DEPLOY_API_PASSWORD": "carol-pass-123"}  # fmt: skip
    farm = make_farm(farm_root, db_url=postgres)
    try:
        added = subprocess.run([cli, "farm", "user", "add", "carol"], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert added.returncode == 0, added.stderr
        listed = subprocess.run([cli, "farm", "user", "list"], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        users = {tuple(line.split()) for line in listed.stdout.splitlines()}
        assert {("admin", "admin"), ("alice", "user"), ("carol", "user")} <= users, users
        export = export_factory("output", target="mps2-an386")
        agent = _register_boards(farm, {"an386-a": "mps2-an386"})
        with farm.client("carol", "carol-pass-123") as carol:
            up = carol.post("/api/exports", content=_pack(export))
            assert up.status_code == 201, up.text
            job = carol.post("/api/jobs", json={"export": up.json()["id"], "board": "an386-a"})
            assert job.status_code == 201, job.text
            job_id = int(job.json()["id"])
            _wait_state(carol, job_id, {"reserved"})
            lease = agent.post(f"/api/agent/jobs/{job_id}/claim").json()["lease"]
            r = agent.put(f"/api/agent/jobs/{job_id}/files/result.json", params={"lease": lease}, content=b"{}")  # fmt: skip
            assert r.status_code == 200, r.text
            end = {"lease": lease, "state": "done", "deploy_seconds": 0.5}
            assert agent.post(f"/api/agent/jobs/{job_id}/finish", json=end).status_code == 200
            assert carol.get(f"/api/jobs/{job_id}").json()["state"] == "done"
        agent.close()
        farm.kill("service", signal.SIGTERM)
        farm.start_service()
        with farm.client("carol", "carol-pass-123") as carol:
            jobs = carol.get("/api/jobs").json()
            assert [(j["id"], j["state"]) for j in jobs] == [(job_id, "done")]
            assert carol.get(f"/api/jobs/{job_id}/result").content == b"{}"
        assert not list(farm_root.rglob("*.db")), "a SQLite database was written"
    finally:
        farm.stop_all()


def test_api_tokens_are_long_lived_revocable_and_hashed(service_farm: Farm) -> None:
    """``farm token create --user NAME --expires ...`` prints a token once; it acts for
    its user (the API, and the ``api`` client through AIDGE_DEPLOY_API_TOKEN), is stored
    hashed, is listed without its value, and stops working once revoked."""
    from aidge_deploy.farm.client import FarmClient

    farm = service_farm
    data = farm.root / "service"
    cli = [str(Path(sys.executable).parent / "aidge-deploy"), "farm", "token"]
    made = subprocess.run(
        [*cli, "create", "--user", ALICE[0], "--expires", "30d", "--name", "ci",
         "--data-dir", str(data)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("aidgefarm_")
    listed = subprocess.run([*cli, "list", "--data-dir", str(data)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "alice" in listed.stdout and "ci" in listed.stdout and "active" in listed.stdout
    assert token not in listed.stdout
    db = (data / "farm.db").read_bytes() + b"".join(
        p.read_bytes() for p in data.glob("farm.db-wal")
    )
    assert token.encode() not in db
    with FarmClient(farm.url, token=token) as c:
        assert c.health().coordinator is True
        assert c.boards() == [] and c.request("GET", "/jobs").json() == []
    bad = subprocess.run(
        [*cli, "create", "--user", ALICE[0], "--expires", "soon", "--data-dir", str(data)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and "--expires" in bad.stderr
    token_id = listed.stdout.split()[0]
    revoked = subprocess.run([*cli, "revoke", token_id, "--data-dir", str(data)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert revoked.returncode == 0, revoked.stderr
    deadline = time.monotonic() + 10  # the service's token cache lasts 5 s
    while time.monotonic() < deadline:
        r = httpx.get(farm.url + "/api/boards", headers={"Authorization": f"Bearer {token}"})
        if r.status_code == 401:
            break
        time.sleep(0.2)
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]


def test_not_a_farm_at_this_url(service_farm: Farm, tmp_path: Path) -> None:
    """A URL that is not a farm's API (a wrong path on the farm, another web server) is
    said to be so, with a hint, before any credential is sent — not a bare "HTTP 404"."""
    import http.server

    from aidge_deploy.errors import ConfigError
    from aidge_deploy.farm.client import FarmClient

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(501 if "api" in self.path else 200)
            self.end_headers()
            self.wfile.write(b"<html>something else</html>")

        def log_message(self, *args: Any) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        for url in (service_farm.url + "/wrong/api", f"http://127.0.0.1:{other.server_port}/api"):
            with FarmClient(url, retry_s=0) as c, pytest.raises(ConfigError) as err:
                c.health()
            assert "not a farm at this URL" in err.value.message, err.value.message
            assert "api_url" in (err.value.hint or "")
    finally:
        other.shutdown()


def test_the_data_folder_and_database_are_private(tmp_path: Path) -> None:
    """The service creates its data folder 0700 and its database 0600 (and makes an
    existing folder private): they hold users' exports, results and password hashes."""
    import stat

    from sqlalchemy import text

    from aidge_deploy.farm.settings import FarmSettings
    from aidge_deploy.farm.state import FarmState

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    for data in (tmp_path / "new", loose):
        state = FarmState(FarmSettings(data_dir=data))
        try:
            with state.db.session() as s:
                s.execute(text("select 1"))
            assert stat.S_IMODE(data.stat().st_mode) == 0o700, data
            assert stat.S_IMODE((data / "farm.db").stat().st_mode) == 0o600
            for sub in ("jobs", "exports", "tmp"):
                assert stat.S_IMODE((data / sub).stat().st_mode) == 0o700, sub
        finally:
            state.db.dispose()


def test_a_board_locked_outside_the_farm_is_shown_held(service_farm: Farm) -> None:
    """Someone locks a board's labgrid place by hand (``labgrid-client lock``, as another
    user): the farm cannot use it, and says so — ``held`` and who holds it, in the API and
    on the boards page — instead of showing it idle."""
    from farmkit import BIN
    from farmweb import web_client

    farm = service_farm
    agent = _register_boards(farm, {"an386-a": "mps2-an386", "an386-b": "mps2-an386"})
    env = {**os.environ, "LG_HOSTNAME": "lab-pc", "LG_USERNAME": "bob"}
    lg = [str(BIN / "labgrid-client"), "-x", farm.coordinator, "-p", "an386-b"]
    deadline = time.monotonic() + 30
    while True:  # the service has made the place
        done = subprocess.run([*lg, "lock"], capture_output=True, text=True, timeout=60, env=env)
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert done.returncode == 0, done.stderr
    try:
        with farm.client(*ALICE) as alice:
            deadline = time.monotonic() + 15
            while True:
                boards = {b["name"]: b for b in alice.get("/api/boards").json()}
                if boards["an386-b"]["state"] == "held" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        assert boards["an386-b"]["state"] == "held", boards
        assert boards["an386-b"]["held_by"] == "lab-pc/bob"
        assert boards["an386-a"]["state"] == "idle" and boards["an386-a"]["held_by"] is None
        with web_client(farm, ALICE) as web:
            assert "held outside the farm by lab-pc/bob" in web.get("/boards").text
    finally:
        subprocess.run([*lg, "unlock"], capture_output=True, timeout=60, env=env)
        agent.close()
