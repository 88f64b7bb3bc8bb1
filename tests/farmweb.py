"""Helpers of the dashboard tests: log in through the real login form, in Chromium or with
httpx (a browser-like client that keeps the session cookie and reads the forms' CSRF
tokens from the pages)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx

from farmkit import Farm

CSRF_RE = re.compile(r'name="csrf_token" value="([^"]*)"')


def browser_login(chromium: Any, farm: Farm, user: tuple[str, str], path: str = "/boards") -> Any:
    """A new browser context logged in as ``user``; returns its page, showing ``path``."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(farm.url + path)
    page.fill("input[name=username]", user[0])
    page.fill("input[name=password]", user[1])
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(lambda url: "/login" not in url)
    return page


@contextlib.contextmanager
def web_client(farm: Farm, user: tuple[str, str], **headers: str) -> Iterator[httpx.Client]:
    """An httpx client logged in through the login form (cookies kept)."""
    with httpx.Client(base_url=farm.url, timeout=60, headers=headers) as client:
        page = client.get("/login")
        token = csrf(page.text)
        r = client.post(
            "/login",
            data={"username": user[0], "password": user[1], "csrf_token": token, "next": "/jobs"},
        )
        assert r.status_code == 303, r.text
        yield client


def csrf(html: str) -> str:
    m = CSRF_RE.search(html)
    assert m is not None, "no CSRF field on the page"
    return m.group(1)


def wait_for(predicate: Any, timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not true after {timeout} s")


def job_state(farm: Farm, job_id: int, user: tuple[str, str]) -> str:
    with farm.client(*user) as c:
        return str(c.get(f"/api/jobs/{job_id}").json()["state"])
