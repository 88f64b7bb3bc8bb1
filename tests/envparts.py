"""Real parts a test needs from its environment, and what happens when one is missing.

Tests use real parts (sshd, dockerd, binfmt, Chromium, QEMU, cross compilers, root for network
namespaces). On a developer's machine a missing part skips the tests that need it; in CI
(``CI=true``) it must fail them, or coverage disappears silently while the run stays green.
This plugin is the one place that decides:

* ``missing(reason)`` / ``needs(available, reason)``: the part is missing — skip here, fail in CI;
* ``not_applicable(reason)``: the test does not apply to this machine (e.g. a no-PMU check on a
  machine that has a PMU) — a skip everywhere, CI included;
* in CI, every other skip (a bare ``pytest.skip``, a ``skipif`` mark, ``importorskip``, a
  module-level skip) fails too, so a new test cannot opt out by accident.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import pytest

_CI_VALUES = {"1", "true", "yes"}
#: how a not-applicable skip's reason starts (a collection report keeps only the text)
NOT_APPLICABLE = "not applicable here: "


def in_ci() -> bool:
    """True under a CI runner (``CI=true``, as GitHub, GitLab and our ``.ci/run`` set it)."""
    return os.environ.get("CI", "").strip().lower() in _CI_VALUES


class MissingPart(pytest.skip.Exception):  # type: ignore[misc,name-defined]
    """A real part this test needs is not on this machine."""


class NotApplicable(pytest.skip.Exception):  # type: ignore[misc,name-defined]
    """The test checks a situation this machine is not in; skipped in CI as well."""


def missing(reason: str) -> NoReturn:
    """The part named in ``reason`` is missing: skip on a developer's machine, fail in CI."""
    raise MissingPart(reason, allow_module_level=True)


def needs(available: bool, reason: str) -> pytest.MarkDecorator:
    """Mark form of ``missing``: ``@needs(shutil.which("x") is not None, "x is not installed")``."""
    return pytest.mark.needs_part(available, reason)


def not_applicable(reason: str) -> NoReturn:
    """The test does not apply here (not a missing part): a skip, also in CI."""
    raise NotApplicable(NOT_APPLICABLE + reason, allow_module_level=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs_part(available, reason): envparts.needs — skip here, fail in CI"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_part"):
        available, reason = mark.args
        if not available:
            missing(reason)


def _skip_reason(longrepr: Any) -> str:
    """The reason text of a skip report."""
    text = str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)
    # pytest prefixes the reason of a skip exception subclass with its qualified name
    for prefix in ("Skipped: ", "envparts.MissingPart: ", "envparts.NotApplicable: "):
        text = text.removeprefix(prefix)
    return text


def _ci_failure(kind: str, reason: str) -> str:
    return (
        f"CI=true: {kind} fails in CI instead of skipping: {reason}\n"
        "Install the part (scripts/setup.sh) or run as root; a test that does not apply to "
        "this machine calls envparts.not_applicable()."
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not in_ci() or not report.skipped or hasattr(report, "wasxfail"):
        return
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, NotApplicable):
        return
    if isinstance(error, MissingPart):
        kind, reason = "a missing part", error.msg
    else:
        kind, reason = "a skip", _skip_reason(report.longrepr)
    report.outcome = "failed"
    report.longrepr = _ci_failure(kind, str(reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if not in_ci() or not report.skipped:
        return
    if _skip_reason(report.longrepr).startswith(NOT_APPLICABLE):
        return
    report.outcome = "failed"
    report.longrepr = _ci_failure("a module-level skip", _skip_reason(report.longrepr))
