"""Every route of the farm service — REST and pages — fuzzed (hypothesis) on a real server:
no value a client can send gets a 5xx, and no request finds its connection reset.

The service is the one ``farm serve`` runs (uvicorn with httptools, on a plain asyncio
loop), in a thread of the test, on loopback, over a real SQLite file and a real PostgreSQL
server (the dispatcher not started: no coordinator is needed to answer a request). Its
database holds users, an agent and its board, an export whose model input is known, and
jobs in every state, so that valid-looking ids reach the handlers' code. Requests go over
kept-alive connections, as a browser's and the client's do: the fault the fuzz of the
issue found (``/compare?base=2**63`` reset the connection) was a 500 after which uvicorn
closed a connection the client then reused. Values: ids past what the database stores
(also as strings), NaN and infinite numbers (JSON ``1e400`` overflows to infinity),
integers too long to parse, text no database stores (NUL, lone surrogates), header values
with CR/LF (sent raw), bodies of the wrong shape, unknown fields. Routes are read from the
app itself and forms from ``web.forms``: a route or form added later is fuzzed too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farmkit import ADMIN, ALICE, needs_farm

pytestmark = [needs_farm()]

HUGE = [2**63, 2**63 - 1, 2**64, -(2**63) - 1, 10**30, 10**50]
NASTY_TEXT = ["nan", "NaN", "inf", "-inf", "1e309", "1e400", "-1", "0", "", " ", "x" * 300, "\x00", "a\x00b", "\ud800", "../../etc/passwd", "%00", "1.5", "true", "null", "[]", "{}", str(2**63), str(10**50)]  # fmt: skip
NAMES = ["alice", "admin", "b1", "fuzz-agent", "mps2-an386", "nobody"]
#: how many examples each fuzz draws (CI runs both databases: under a minute in all);
#: AIDGE_FARM_FUZZ_EXAMPLES asks for a deeper run
EXAMPLES = int(os.environ.get("AIDGE_FARM_FUZZ_EXAMPLES", "300"))
#: a JSON integer too long for Python to parse (its limit is 4300 digits)
TOO_LONG_INT = "9" * 5000
EXPORT = "e" * 64
#: the model input of the fuzz's export: float [1, 4]
INPUT = {"name": "input", "dtype": "float", "size": 4, "dims": [1, 4]}


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(),
        st.sampled_from(HUGE),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(NASTY_TEXT),
        st.sampled_from(NAMES),
        st.text(max_size=40),
        st.booleans(),
        st.none(),
    )


def json_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=12,
    )


def path_value() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(min_value=-5, max_value=8).map(str),
        st.sampled_from(HUGE).map(str),
        st.sampled_from(NAMES),
        st.sampled_from(["e" * 64, "E" * 64, "nan", "inf", "%2e%2e", "1e3", "%00", "a%00b", "%ff"]),
        st.text(alphabet="abcdef0123456789x-_.", min_size=1, max_size=70),
    )


def query_value() -> st.SearchStrategy[Any]:
    return st.one_of(scalars().map(lambda v: v if v is None else str(v)), st.sampled_from(NAMES))


def with_overflows(text: str, draw: st.DataObject) -> str:
    """JSON whose infinities are written as overflowing numbers, and whose integers may be
    too long to parse: what a client in another language sends."""
    if "Infinity" in text and draw.draw(st.booleans(), label="1e400"):
        text = text.replace("-Infinity", "-1e400").replace("Infinity", "1e400")
    if draw.draw(st.integers(0, 9), label="too long int") == 0:
        text = re.sub(r"(?<![\w.])\d{2,}(?![\w.])", TOO_LONG_INT, text, count=1)
    return text


# --- a real server in a thread -----------------------------------------------------------


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served as ``farm serve`` serves it (uvicorn, httptools, asyncio loop) on a
    loopback port of its own; yields its URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, loop="asyncio", http="httptools", log_level="critical")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def populate(db_url: str) -> dict[str, str]:
    """Users, an agent and its board, an export (model input float [1, 4]) and jobs in
    every state; the tokens to call with."""
    from aidge_deploy.farm.agents import register_agent
    from aidge_deploy.farm.auth import Principal, add_user, create_api_token, issue_agent_token
    from aidge_deploy.farm.db import CampaignJob, Database, ExportOwner, ExportRecord, Job
    from aidge_deploy.farm.jobs import submit_job
    from aidge_deploy.farm.models import BoardSpec, RegisterRequest, SubmitRequest
    from aidge_deploy.farm.states import JobState, Role
    from aidge_deploy.farm.store import ExportFacts

    db = Database(db_url)
    with db.session() as s:
        add_user(s, *ADMIN, role=Role.ADMIN)
        alice = add_user(s, *ALICE)
        user_token, _ = create_api_token(s, ADMIN[0], "fuzz")
        alice_token, _ = create_api_token(s, ALICE[0], "fuzz")
        agent_token = issue_agent_token(s, "fuzz-agent")
        facts = ExportFacts(inputs=(INPUT,)).to_json()
        s.add(ExportRecord(hash=EXPORT, size=1, target="mps2-an386", application="a", protocol="p", facts_json=facts))  # fmt: skip
        s.flush()
        s.add(ExportOwner(export_hash=EXPORT, user_id=alice.id))
        agent = Principal(user_id=None, name="fuzz-agent", role=None, agent="fuzz-agent")
        register_agent(s, agent, RegisterRequest(boards=[BoardSpec(name="b1", target="mps2-an386")]))  # fmt: skip
        who = Principal(user_id=alice.id, name=ALICE[0], role=Role.USER)
        ids = [submit_job(s, who, SubmitRequest(export=EXPORT, board="b1")) for _ in range(6)]
        s.flush()
        for job_id, state in zip(ids[2:], ("done", "failed", "cancelled", "reserved"), strict=True):
            job = s.get(Job, job_id)
            assert job is not None
            job.state = JobState(state).value
            job.board, job.agent_name, job.token = "b1", "fuzz-agent", f"tok{job_id}"
        s.add(CampaignJob(job_id=ids[0], campaign="camp-1", name="c", cell="m x b1", cells=2))
    db.dispose()
    return {"admin": user_token, "alice": alice_token, "agent": agent_token}


def routers() -> list[tuple[str, Any]]:
    """Every router the app includes, with its prefix: the REST API's (``service``) and
    the pages' (``web.PAGE_MODULES``, what ``mount_web`` includes), and the API's docs."""
    from importlib import import_module

    from aidge_deploy.farm import routes_agent, routes_boards, routes_user
    from aidge_deploy.farm.web import PAGE_MODULES, apidocs

    pages = [import_module(f"aidge_deploy.farm.web.{name}").router for name in PAGE_MODULES]
    return [("/api", routes_user.router), ("/api", routes_agent.router), ("/api", routes_boards.router), *(("", r) for r in pages), ("", apidocs.router)]  # fmt: skip


class Service:
    """The served app, its routes, and who may call what."""

    def __init__(self, root: Path, db_url: str) -> None:
        from fastapi.routing import APIRoute

        from aidge_deploy.farm.service import create_app
        from aidge_deploy.farm.settings import FarmSettings

        self.db_url = db_url
        self.tokens = populate(db_url)
        settings = FarmSettings(data_dir=root, database_url=db_url, long_poll_max=0.05)
        self.app = create_app(settings, start_dispatcher=False)
        self._served = served(self.app)
        self.url = self._served.__enter__()
        self.client = httpx.Client(base_url=self.url, timeout=60)
        self.routes = [
            (method, prefix + route.path, route)
            for prefix, router in routers()
            for route in router.routes
            if isinstance(route, APIRoute)
            for method in sorted(route.methods or ())
        ]

    def session(self, user: str) -> tuple[str, str]:
        """A new dashboard session of ``user``: its cookie value and its forms' CSRF token."""
        from aidge_deploy.farm.auth import issue_user_token
        from aidge_deploy.farm.db import Database, User
        from aidge_deploy.farm.web.session import csrf_for

        db = self.app.state.farm.db
        assert isinstance(db, Database)
        with db.session() as s:
            row = s.query(User).filter(User.name == user).one()
            token, _ = issue_user_token(s, row)
        return token, csrf_for(token)

    def bearer(self, path: str, who: str) -> dict[str, str]:
        if who == "none":
            return {}
        if who == "garbage":
            return {"Authorization": "Bearer " + "x" * 80}
        token = self.tokens["agent"] if path.startswith("/api/agent/") else self.tokens[who]
        return {"Authorization": f"Bearer {token}"}

    def close(self) -> None:
        self.client.close()
        self._served.__exit__(None, None, None)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    root = tmp_path_factory.mktemp(f"farm-fuzz-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{root / 'farm.db'}"
    else:
        url = str(request.getfixturevalue("postgres_module"))
    svc = Service(root, url)
    yield svc
    svc.close()


def call(
    service: Service,
    method: str,
    url: str,
    cookies: dict[str, str] | None = None,
    headers: dict[str, Any] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """One request on the service's kept-alive connections: a reset or a dropped
    connection fails the test as a 5xx does. ``cookies`` go in its ``Cookie`` header
    (the client keeps none: each request says who it is)."""
    headers = dict(headers or {})
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    kwargs["headers"] = headers
    service.client.cookies.clear()
    try:
        r = service.client.request(method, url, **kwargs)
    except httpx.TransportError as exc:
        raise AssertionError(f"{method} {url}: the connection failed: {exc!r}") from exc
    assert r.status_code < 500, (method, url, kwargs, r.status_code, r.text[:500])
    return r


# --- what the issue found, one by one ------------------------------------------------------


def _submit(service: Service, config: dict[str, Any] | str) -> httpx.Response:
    body = config if isinstance(config, str) else json.dumps({"export": EXPORT, "board": "b1", "config": config})  # fmt: skip
    headers = {**service.bearer("/api/jobs", "alice"), "Content-Type": "application/json"}
    return call(service, "POST", "/api/jobs", content=body, headers=headers)


def test_the_reported_inputs_are_refused_naming_their_field(service: Service) -> None:
    """Each input the outside fuzz got a 500 (or a reset) for is a 422 naming its field."""
    raw = '{"export": "' + EXPORT + '", "board": "b1", "config": {"%s": 1e400}}'
    for field in ("build_jobs", "max_counters_per_pass", "run_timeout", "uart_timeout"):
        r = _submit(service, raw % field)
        assert r.status_code == 422, r.text
        assert f"config.{field}" in r.json()["error"]["message"], r.text
    labels = (
        '{"export": "' + EXPORT + '", "board": "b1", "config": {"validation": {"labels": [1e400]}}}'
    )
    r = _submit(service, labels)
    assert r.status_code == 422 and "config.validation.labels" in r.text, r.text
    # samples of a dtype/shape combination the model's input (float [1, 4]) cannot take
    for sample, why in (
        ({"dtype": "int8", "shape": [4], "data": [1, 2, 3, 300]}, "does not fit int8"),
        ({"dtype": "int8", "shape": [1, 3], "data": [1, 2, 3]}, "has 4"),
        ({"dtype": "float32", "shape": [2, 2], "data": [1.0]}, "holds 4 values"),
        ({"dtype": "float32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 1e300]}, "overflows"),
        ({"dtype": "float32", "shape": [8], "data": [0.5] * 8}, "has 8 values"),
        ({"dtype": "complex64", "shape": [1], "data": [1]}, "dtype"),
    ):
        r = _submit(service, {"validation": {"samples": [sample]}})
        assert r.status_code == 422, (sample, r.text)
        message = r.json()["error"]["message"]
        assert "config.validation.samples" in message and why in message, (sample, message)
    # a sample the input takes, as the board host would take it
    good = {"dtype": "int8", "shape": [1, 4], "data": [1, 2, 3, 4]}
    assert _submit(service, {"validation": {"samples": [good], "labels": [1]}}).status_code == 201
    admin, csrf = service.session("admin")
    cookies = {"farm_session": admin}
    for base, field in (("9" * 50, "base"), (str(2**63), "base"), ("-1", "base")):
        r = call(service, "GET", f"/compare?base={base}&cand=1", cookies=cookies)
        assert r.status_code == 422 and field in r.text, (base, r.status_code)
        # the connection it came on still serves the next request
        assert call(service, "GET", "/boards", cookies=cookies).status_code == 200
    form = {"base": str(2**63), "cand": "1", "csrf_token": csrf}
    r = call(service, "POST", "/compare", data=form, cookies=cookies)
    assert r.status_code == 422 and "base" in r.text
    for path in ("/jobs?before=" + str(2**63), "/jobs/" + str(2**64), "/jobs?board=a%00b",
                 "/campaigns/a%00b", "/history/series?model=a%00b"):  # fmt: skip
        assert call(service, "GET", path, cookies=cookies).status_code == 422, path
    form = {"username": "a\x00b", "password": "x" * 10, "csrf_token": csrf}
    assert call(service, "POST", "/admin/users", data=form, cookies=cookies).status_code == 422
    login = {"username": "admin\x00", "password": "p", "csrf_token": "t"}
    r = call(service, "POST", "/login", data=login, cookies={"farm_login_csrf": "t" * 43})
    assert r.status_code in (403, 422)
    r = call(service, "POST", "/api/token", json={"username": "a\x00", "password": "p"})
    assert r.status_code == 422 and "username" in r.text


def test_a_bug_answers_500_and_closes_its_connection_cleanly(tmp_path: Path) -> None:
    """The root cause of the reset: an unhandled error (the SQLite driver cannot bind an
    integer beyond 64 bits: OverflowError) made Starlette send a 500, then re-raise, and
    uvicorn close the connection the client kept alive — its next request on it was
    reset. The 500 now says ``Connection: close``: the next request goes on a new one."""
    from aidge_deploy.farm.service import create_app
    from aidge_deploy.farm.settings import FarmSettings

    populate(f"sqlite:///{tmp_path / 'farm.db'}")
    app = create_app(FarmSettings(data_dir=tmp_path), start_dispatcher=False)

    def boom() -> None:
        raise OverflowError("Python int too large to convert to SQLite INTEGER")

    app.add_api_route("/api/boom", boom)
    app.add_api_route("/boom", boom)
    with served(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        for path in ("/api/boom", "/boom"):
            r = client.get(path)
            assert r.status_code == 500 and r.headers["connection"] == "close"
            assert "internal error" in r.text and "reference" in r.text
            assert client.get("/api/health").status_code == 200  # not a reset


@pytest.mark.parametrize(
    "header",
    [
        b"X-Export-Name: a\rb",
        b"X-Forwarded-For: 1.2.3.4\nX-Injected: 1",
        b"Origin: http://evil\r",
        b"Cookie: farm_session=a\x00b",
        b"X-A: a\r\n b",
        b"Content-Length: " + TOO_LONG_INT.encode(),
        b"Authorization: Bearer \xff\xfe",
        b"Origin: http://[",
        b"Host: [",
    ],
)
def test_header_values_with_cr_lf_are_refused_without_a_reset(
    service: Service, header: bytes
) -> None:
    """Raw requests (no client library would send these): a clean 4xx, never a 5xx or a
    reset, and the server serves the next request."""
    host, port = service.url.removeprefix("http://").split(":")
    for path in (b"/api/health", b"/boards", b"/api/jobs", b"/login"):
        request = b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n\r\n"
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(request)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError as exc:
                raise AssertionError(f"{header!r} on {path!r}: connection reset") from exc
        status = re.match(rb"HTTP/1\.1 (\d{3}) ", data)
        assert status is not None, (header, path, data[:200])
        assert int(status.group(1)) < 500, (header, path, data[:300])
    assert call(service, "GET", "/api/health").status_code == 200


# --- the fuzz ------------------------------------------------------------------------------


def _form_fields() -> list[str]:
    from aidge_deploy.farm.web.forms import FORMS

    return sorted({name for form in FORMS for name in form.model_fields})


def _model_like(route: Any) -> st.SearchStrategy[Any]:
    """A body shaped like the route's model, each field a random value (or left out)."""
    fields = list(route.dependant.body_params)
    if not fields:
        return st.just({})
    model = getattr(fields[0].field_info, "annotation", None)
    names = list(getattr(model, "model_fields", {}) or {})
    if not names:
        return st.just({})
    return st.fixed_dictionaries({}, optional={n: json_values() for n in names})


EXTRA_HEADERS: dict[str, list[Any]] = {
    "X-Forwarded-For": ["1.2.3.4", "::1, 10.0.0.1", "not an address", "[", ""],
    "X-Forwarded-Proto": ["https", "gopher", ""],
    "Origin": ["null", "http://evil.example", "http://[::1", "http://[", "x"],
    "Sec-Fetch-Site": ["cross-site", "same-origin", "none", "\u00e9".encode()],
    "X-Export-Name": ["a" * 500, "../../x", "%00"],
    "Content-Type": [
        "application/json",
        "multipart/form-data",
        "multipart/form-data; boundary=",
        "text/plain",
    ],
}


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_request_gets_a_5xx_or_a_reset(service: Service, data: st.DataObject) -> None:
    method, path, route = data.draw(st.sampled_from(service.routes), label="route")
    url = re.sub(
        r"\{(\w+)(:\w+)?\}",
        lambda _m: quote(data.draw(path_value(), label="path"), safe="%"),
        path,
    )
    names = [p.alias for p in route.dependant.query_params]
    params = {
        name: data.draw(st.one_of(query_value(), st.lists(query_value(), max_size=3)), label=name)
        for name in names
        if data.draw(st.booleans(), label=f"send {name}")
    }
    params = {k: v for k, v in params.items() if v is not None}
    headers: dict[str, Any] = {}
    cookies: dict[str, str] = {}
    if params:  # encoded here: a lone surrogate goes as the bytes a broken client sends
        url += "?" + urlencode(params, doseq=True, encoding="utf-8", errors="surrogatepass")
    kwargs: dict[str, Any] = {}
    api = path.startswith("/api")
    who = data.draw(st.sampled_from(["admin", "alice", "alice", "none", "garbage"]), label="who")
    if api:
        headers.update(service.bearer(path, who))
    elif who in ("admin", "alice"):
        token, csrf = service.session(who)
        cookies["farm_session"] = token
    for name in data.draw(st.lists(st.sampled_from(sorted(EXTRA_HEADERS)), max_size=2, unique=True), label="headers"):  # fmt: skip
        headers[name] = data.draw(st.sampled_from(EXTRA_HEADERS[name]), label=name)
    if method in ("POST", "PUT"):
        if api:
            body = data.draw(st.one_of(json_values(), _model_like(route)), label="body")
            if data.draw(st.booleans(), label="raw body"):
                kwargs["content"] = data.draw(st.binary(max_size=200), label="bytes")
            else:  # NaN and Infinity sent as such, or as overflowing numbers
                kwargs["content"] = with_overflows(json.dumps(body), data)
                headers.setdefault("Content-Type", "application/json")
        else:
            fields = {
                name: str(data.draw(query_value(), label=name))
                for name in data.draw(
                    st.lists(st.sampled_from(_form_fields()), max_size=6, unique=True),
                    label="fields",
                )
            }
            if cookies and data.draw(st.integers(0, 9), label="csrf") > 0:
                fields["csrf_token"] = csrf
            headers.pop("Content-Type", None)
            if path == "/submit" and data.draw(st.booleans(), label="file"):
                kwargs["files"] = {"file": ("x.tar.gz", data.draw(st.binary(max_size=300), label="file bytes"))}  # fmt: skip
                kwargs["data"] = {
                    k: v.encode("utf-8", "replace").decode() for k, v in fields.items()
                }
            else:  # a lone surrogate goes as the bytes a broken client would send
                kwargs["content"] = urlencode(fields, encoding="utf-8", errors="surrogatepass")
                headers["Content-Type"] = "application/x-www-form-urlencoded"
    call(service, method, url, headers=headers, cookies=cookies, **kwargs)


def test_every_route_and_form_is_fuzzed(service: Service) -> None:
    """The fuzz reaches REST and page routes alike, and the callers reach the handlers."""
    paths = {p for _, p, _ in service.routes}
    for expected in ("/api/jobs/{job_id}", "/api/jobs", "/api/token", "/api/agent/poll",
                     "/api/agent/jobs/{job_id}/finish", "/api/exports", "/compare",
                     "/jobs/{job_id}", "/jobs/{job_id}/progress", "/history/series",
                     "/campaigns/{campaign_id}", "/admin/users", "/admin/boards/{name}/drain",
                     "/api/boards/{name}/drain", "/boards/{name}/health/{run_id}/log",
                     "/submit", "/login"):  # fmt: skip
        assert expected in paths, sorted(paths)
    assert {"base", "cand", "username", "password", "next", "destination"} <= set(_form_fields())
    token, _ = service.session("alice")
    assert call(service, "GET", "/jobs", cookies={"farm_session": token}).status_code == 200
    user = service.bearer("/api/jobs", "alice")
    assert call(service, "GET", "/api/jobs", headers=user).status_code == 200
    agent = service.bearer("/api/agent/heartbeat", "alice")
    assert call(service, "POST", "/api/agent/heartbeat", json={"running": []}, headers=agent).status_code == 200  # fmt: skip
