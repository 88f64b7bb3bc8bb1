"""Headless Chromium for page tests: the system browser (``/usr/bin/chromium``, installed by
``scripts/setup.sh``) driven by Playwright's Python package. Nothing is downloaded: the
browser is launched from its path, never from Playwright's own browser cache.

A pytest plugin (``pytest_plugins`` in ``conftest.py``). Without Chromium or Playwright the
page tests skip on a developer's machine and fail in CI (``CI=true``). Screenshots go to
``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envparts import missing

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
#: this machine's network is closed: keep Chromium from trying to reach anything
CHROMIUM_ARGS = [
    "--no-sandbox",  # tests run as root
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
    "--disable-quic",
    "--disable-dev-shm-usage",
]


def browser_missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"chromium is not installed ({CHROMIUM}; scripts/setup.sh installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e .[dev])"
    return None


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless system Chromium (Playwright ``Browser``), one per test module.

    Not one per session: while Playwright's sync API is up, its event loop counts as the
    thread's running loop, so a later test's ``asyncio.run`` would fail."""
    reason = browser_missing()
    if reason is not None:
        missing(reason)  # a skip here, a failure in CI
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    """Keep a full-page screenshot of ``page`` as ``test-artifacts/<name>.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
