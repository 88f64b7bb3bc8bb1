"""Every REST route of the farm service, fuzzed (hypothesis): no value a client can send
gets a 500 — ids past what the database stores, NaN and infinite numbers, durations out
of range, strings where numbers go, bodies of the wrong shape, unknown fields.

The service runs in-process (``TestClient``, the dispatcher not started: no coordinator
is needed to answer a request), with a real SQLite database holding users, an agent, its
board, an export and jobs, so that valid-looking ids reach the handlers' code. Routes are
read from the REST routers themselves: a route added later is fuzzed too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farmkit import ALICE, needs_farm

pytestmark = [
    needs_farm(),
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`"),
]

HUGE = [2**63, 2**63 - 1, 2**64, -(2**63) - 1, 10**30]
NASTY_TEXT = ["nan", "NaN", "inf", "-inf", "1e309", "-1", "0", "", " ", "x" * 300, "\x00", "../../etc/passwd", "%00", "1.5", "true", "null", "[]", "{}"]  # fmt: skip


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(),
        st.sampled_from(HUGE),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(NASTY_TEXT),
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
        st.integers(min_value=-5, max_value=5).map(str),
        st.sampled_from(HUGE).map(str),
        st.sampled_from(["1", "2", "e" * 64, "E" * 64, "nan", "inf", "%2e%2e", "1e3"]),
        st.text(alphabet="abcdef0123456789x-_.", min_size=1, max_size=70),
    )


class Service:
    """The app with a populated database, and who may call what."""

    def __init__(self, root: Path) -> None:
        from starlette.testclient import TestClient

        from aidge_deploy.farm.agents import register_agent
        from aidge_deploy.farm.auth import (
            Principal,
            add_user,
            create_api_token,
            issue_agent_token,
        )
        from aidge_deploy.farm.db import Database, ExportOwner, ExportRecord
        from aidge_deploy.farm.jobs import submit_job
        from aidge_deploy.farm.models import BoardSpec, RegisterRequest, SubmitRequest
        from aidge_deploy.farm.service import create_app
        from aidge_deploy.farm.settings import FarmSettings
        from aidge_deploy.farm.states import Role

        db = Database(f"sqlite:///{root / 'farm.db'}")
        with db.session() as s:
            add_user(s, "admin", "admin-pass-123", role=Role.ADMIN)
            alice = add_user(s, *ALICE)
            self.user_token, _ = create_api_token(s, "admin", "fuzz")
            self.agent_token = issue_agent_token(s, "fuzz-agent")
            s.add(ExportRecord(hash="e" * 64, size=1, target="mps2-an386", application="a", protocol="p"))  # fmt: skip
            s.flush()
            s.add(ExportOwner(export_hash="e" * 64, user_id=alice.id))
            agent = Principal(user_id=None, name="fuzz-agent", role=None, agent="fuzz-agent")
            register_agent(s, agent, RegisterRequest(boards=[BoardSpec(name="b1", target="mps2-an386")]))  # fmt: skip
            who = Principal(user_id=alice.id, name=ALICE[0], role=Role.USER)
            for _ in range(2):
                submit_job(s, who, SubmitRequest(export="e" * 64, board="b1"))
        db.dispose()
        settings = FarmSettings(data_dir=root, long_poll_max=0.05)
        self.app = create_app(settings, start_dispatcher=False)
        self.client = TestClient(self.app, raise_server_exceptions=False)
        self.client.__enter__()
        from aidge_deploy.farm import routes_agent, routes_user

        self.routes = [
            (method, "/api" + route.path, route)
            for router in (routes_user.router, routes_agent.router)
            for route in router.routes
            for method in sorted(getattr(route, "methods", ()) or ())
        ]

    def headers(self, path: str) -> dict[str, str]:
        token = self.agent_token if path.startswith("/api/agent/") else self.user_token
        return {"Authorization": f"Bearer {token}"}

    def close(self) -> None:
        self.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = Service(tmp_path_factory.mktemp("farm-fuzz"))
    yield svc
    svc.close()


def test_every_route_is_fuzzed_and_the_reported_500s_are_refusals(service: Service) -> None:
    """The fuzz reaches the handlers (the callers are authenticated), and each input the
    issue found answered 500 is now a refusal with its reason."""
    paths = {p for _, p, _ in service.routes}
    for expected in ("/api/jobs/{job_id}", "/api/jobs", "/api/token", "/api/agent/poll",
                     "/api/agent/jobs/{job_id}/finish", "/api/exports"):  # fmt: skip
        assert expected in paths, paths
    c = service.client
    user, agent = service.headers("/api/jobs"), service.headers("/api/agent/poll")
    assert c.get("/api/jobs", headers=user).status_code == 200
    assert c.post("/api/agent/heartbeat", json={"running": []}, headers=agent).status_code == 200
    big = 2**63
    refused = [
        c.get(f"/api/jobs/{big}", headers=user),
        c.post(f"/api/jobs/{big}/cancel", headers=user),
        c.get("/api/jobs/1/events", params={"after": big}, headers=user),
        c.get("/api/jobs/1/events", params={"wait": "nan"}, headers=user),
        c.post(
            "/api/token",
            content='{"username": "a", "password": "b", "expires_in": NaN}',
            headers={"Content-Type": "application/json"},
        ),
        c.post(
            "/api/jobs",
            content='{"export": "' + "e" * 64 + '", "priority": NaN}',
            headers={**user, "Content-Type": "application/json"},
        ),
        c.post(
            "/api/jobs",
            json={"export": "e" * 64, "board": "b1", "config": {"run_timeout": "inf"}},
            headers=user,
        ),
    ]
    for r in refused:
        assert r.status_code in (400, 404, 422), (r.request.url, r.status_code, r.text)
        assert r.json()["error"]["message"], r.text
    assert "timeout" in refused[-1].json()["error"]["message"]


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_request_gets_a_500(service: Service, data: st.DataObject) -> None:
    method, path, route = data.draw(st.sampled_from(service.routes), label="route")
    url = re.sub(r"\{(\w+)(:\w+)?\}", lambda _m: data.draw(path_value(), label="path"), path)
    names = [p.alias for p in route.dependant.query_params]
    params = {
        name: data.draw(st.one_of(scalars(), st.lists(scalars(), max_size=3)), label=name)
        for name in names
        if data.draw(st.booleans(), label=f"send {name}")
    }
    params = {k: v for k, v in params.items() if v is not None}
    kwargs: dict[str, Any] = {"params": params, "headers": service.headers(path)}
    if method in ("POST", "PUT"):
        body = data.draw(st.one_of(json_values(), _model_like(route)), label="body")
        if data.draw(st.booleans(), label="raw body"):
            kwargs["content"] = data.draw(st.binary(max_size=200), label="bytes")
        else:  # NaN and Infinity sent as such (Python's JSON reads them back)
            kwargs["content"] = json.dumps(body)
            kwargs["headers"]["Content-Type"] = "application/json"
    r = service.client.request(method, url, **kwargs)
    assert r.status_code < 500, (method, url, kwargs, r.status_code, r.text[:500])


def _model_like(route: Any) -> st.SearchStrategy[Any]:
    """A body shaped like the route's model, each field a random value (or left out)."""
    fields = [p for p in route.dependant.body_params]
    if not fields:
        return st.just({})
    model = getattr(fields[0], "type_", None) or getattr(fields[0].field_info, "annotation", None)
    names = list(getattr(model, "model_fields", {}) or {})
    if not names:
        return st.just({})
    return st.fixed_dictionaries({}, optional={n: json_values() for n in names})
