"""What a session says at its end: the regression gates' baselines, and targets never run.

Two things a CI log must show without opening a report file:

* every gated run's line — what ``assert_no_regression`` compared it against (the earlier
  run's time and commit, its bundle or history record), or why it did not compare;
* a target asked for with ``--aidge-target`` that no test ran on (no selected test lists
  it, every one was deselected or skipped): a green session that measured nothing there
  would pass a CI job silently, so the session exits with ``NO_TARGET_RUN`` and says why
  in one line.

Registered on the process that reports (the xdist controller, or the only process); the
workers' reports carry what it reads (``aidge_target``, ``aidge_gates``).
"""

from __future__ import annotations

from typing import Any

import pytest

#: the exit status of a session whose selection ran no test on an asked target (pytest's
#: own "no tests ran" status: the session ran nothing where it was asked to)
NO_TARGET_RUN = pytest.ExitCode.NO_TESTS_COLLECTED


class SessionReport:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.ran: set[str] = set()
        self.gates: list[tuple[str, str, str, str]] = []  # nodeid, outcome, run, line
        self.missing: list[str] = []

    def _asked(self) -> dict[str, str]:
        """Each name given to ``--aidge-target`` -> the target it stands for."""
        names = [str(n) for n in self.config.getoption("aidge_target") or []]
        lab_path = self.config.getoption("aidge_lab")
        boards: dict[str, str] = {}
        if names and lab_path is not None:
            from aidge_deploy.lab import load_lab

            boards = {b.name: b.target for b in load_lab(lab_path).boards}
        return {n: boards.get(n, n) for n in names}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        target = getattr(report, "aidge_target", None)
        ran = report.when == "call" or (report.when == "setup" and report.failed)
        if target is not None and ran and not report.skipped:
            self.ran.add(str(target))
        gates = getattr(report, "aidge_gates", None)
        if report.when == "call" and gates:
            for run, line in gates:
                self.gates.append((report.nodeid, report.outcome, str(run), str(line)))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: Any) -> None:
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.USAGE_ERROR):
            return
        if session.config.option.collectonly:
            return
        self.missing = [n for n, t in self._asked().items() if t not in self.ran]
        if self.missing and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = NO_TARGET_RUN

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.gates:
            terminalreporter.section("aidge-deploy regression gates")
            for nodeid, outcome, run, line in self.gates:
                terminalreporter.write_line(f"{outcome.upper()} {nodeid} [{run}]: {line}")
        for name in self.missing:
            target = self._asked()[name]
            what = name if name == target else f"{name} (a board of {target})"
            terminalreporter.write_line(
                f"aidge-deploy: no test ran on --aidge-target {what}: no selected test lists "
                f"{target} in @aidge_targets (or every one was deselected or skipped)",
                red=True,
                bold=True,
            )
