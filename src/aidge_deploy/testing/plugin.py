"""The pytest plugin: deploy Aidge models on targets from users' tests.

Loaded through the ``pytest11`` entry point in every pytest session, so it must stay inert
until used: it only registers options, the ``aidge_targets`` marker and fixtures, imports
nothing heavy at load time, and changes nothing for tests that use none of them.

* ``@pytest.mark.aidge_targets("host", "mps2-an386")`` parametrizes ``aidge_target`` (a
  target name, or a board name of ``--aidge-lab``); ``--aidge-target`` (repeatable) narrows
  the marker's list, or sets the targets of tests that take ``aidge_target`` unmarked.
* ``aidge_run(model_or_export, target=None, **options) -> DeployResult``: exports an ONNX
  model (``dtype``, ``iterations``, ``warmup``, ``kind``, ``profiling``, ``inputs``), takes
  a board of the lab for the rest of the test (a file lock other workers and jobs respect),
  deploys, and writes the result bundle under ``--aidge-report-dir``.
* Each run's headline metrics become JUnit XML properties (``aidge.<run>.<metric>[<unit>]``)
  and lines of ``<report dir>/metrics.om`` (OpenMetrics); its bundle and log are attached to
  the test's report.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

MARKER = "aidge_targets"
_SESSION_KEY = pytest.StashKey["Any"]()
_RUNS_KEY = pytest.StashKey["Any"]()
METRICS_FILE = "metrics.om"
#: a JUnit property of a run's metric: aidge.<run>.<metric>[<unit>]
PROPERTY_PREFIX = "aidge."
LOG_TAIL_LINES = 40


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aidge-deploy", "Aidge model deployment (aidge_deploy.testing)")
    group.addoption(
        "--aidge-target",
        action="append",
        default=[],
        metavar="TARGET",
        help="Target (or lab board) to run on; repeatable. Narrows @aidge_targets lists.",
    )
    group.addoption("--aidge-lab", type=Path, metavar="FILE", help="Lab file naming the boards.")
    group.addoption(
        "--aidge-report-dir",
        type=Path,
        metavar="DIR",
        help="Keep each run's result bundle here (and metrics.om, OpenMetrics).",
    )
    group.addoption(
        "--aidge-baseline",
        type=Path,
        metavar="DIR",
        help="Baseline bundles (an earlier --aidge-report-dir) for the aidge_baseline fixture.",
    )
    group.addoption(
        "--aidge-lock-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="How long a test waits for a busy board of the lab (default 600).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*targets): run the test on each target (parametrizes the aidge_target "
        "fixture; aidge-deploy plugin)",
    )
    config.pluginmanager.register(_MetricsFile(config), "aidge-deploy-metrics")


def _selected(config: pytest.Config) -> list[str]:
    return list(config.getoption("aidge_target") or [])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    direct = "aidge_target" in metafunc.definition._fixtureinfo.argnames
    if marker is None and not direct:
        return
    if "aidge_target" not in metafunc.fixturenames:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: @{MARKER} needs the aidge_target or aidge_run fixture"
        )
    selected = _selected(metafunc.config)
    if marker is None:
        metafunc.parametrize("aidge_target", selected or ["host"])
        return
    targets = [str(t) for t in marker.args]
    if not targets:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @{MARKER}() names no target")
    params = [
        t
        if not selected or t in selected
        else pytest.param(t, marks=pytest.mark.skip(reason=f"{t} not selected by --aidge-target"))
        for t in targets
    ]
    metafunc.parametrize("aidge_target", params)


def _session(config: pytest.Config, factory: pytest.TempPathFactory) -> Any:
    """The session state, made on first use (a session that never uses it never pays)."""
    from aidge_deploy.testing.session import AidgeSession

    if _SESSION_KEY not in config.stash:
        config.stash[_SESSION_KEY] = AidgeSession(
            targets=_selected(config),
            lab_path=config.getoption("aidge_lab"),
            report_dir=config.getoption("aidge_report_dir"),
            baseline_dir=config.getoption("aidge_baseline"),
            lock_timeout_s=float(config.getoption("aidge_lock_timeout")),
            work_root=factory.getbasetemp() / "aidge",
        )
    return config.stash[_SESSION_KEY]


@pytest.fixture
def aidge_target(request: pytest.FixtureRequest) -> str:
    """The target this test runs on (parametrized by @aidge_targets / --aidge-target)."""
    param = getattr(request, "param", None)
    if param is not None:
        return str(param)
    selected = _selected(request.config)
    return selected[0] if selected else "host"


def _test_dir(item: pytest.Item) -> Path:
    from aidge_deploy.testing.session import safe_name

    module = Path(str(item.path)).stem if hasattr(item, "path") else "tests"
    return Path(safe_name(module)) / safe_name(item.name)


@pytest.fixture
def aidge_run(
    request: pytest.FixtureRequest, aidge_target: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Any]]:
    """``aidge_run(model_or_export, target=None, **options) -> DeployResult``."""
    from aidge_deploy.testing.session import TestRuns

    runs = TestRuns(
        _session(request.config, tmp_path_factory), _test_dir(request.node), aidge_target
    )
    request.node.stash[_RUNS_KEY] = runs
    try:
        yield runs.run
    finally:
        runs.close()


@pytest.fixture
def aidge_board(
    request: pytest.FixtureRequest, aidge_target: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The lab board (``aidge_deploy.lab.LabBoard``) that runs ``aidge_target``, held for the
    test (None for the host and emulated boards); ``aidge_run`` then uses it."""
    from aidge_deploy.testing.session import TestRuns

    runs = request.node.stash.get(_RUNS_KEY, None)
    own = runs is None
    if own:
        runs = TestRuns(
            _session(request.config, tmp_path_factory), _test_dir(request.node), aidge_target
        )
        request.node.stash[_RUNS_KEY] = runs
    _, board = runs.board_for(aidge_target)
    try:
        yield board
    finally:
        if own:
            runs.close()


@pytest.fixture
def aidge_baseline(request: pytest.FixtureRequest) -> Path | None:
    """The ``--aidge-baseline`` folder, or None when not given."""
    value = request.config.getoption("aidge_baseline")
    return None if value is None else Path(value)


def _properties(record: Any) -> list[tuple[str, object]]:
    head = f"{PROPERTY_PREFIX}{record.label}"
    props: list[tuple[str, object]] = [(f"{head}.target", record.target)]
    if record.board:
        props.append((f"{head}.board", record.board))
    if record.provenance:
        props.append((f"{head}.provenance", record.provenance))
    for name, fig in record.figures.items():
        if fig.value is not None:
            props.append((f"{head}.{name}[{fig.unit}]", fig.value))
    if record.bundle is not None:
        props.append((f"{head}.bundle", str(record.bundle)))
    if record.log is not None:
        props.append((f"{head}.log", str(record.log)))
    if record.error:
        props.append((f"{head}.error", record.error.splitlines()[0]))
    return props


def _section(record: Any) -> str:
    lines = [f"target {record.target}" + (f" (board {record.board})" if record.board else "")]
    if record.bundle is not None:
        lines.append(f"bundle: {record.bundle}")
    if record.log is not None:
        lines.append(f"log: {record.log}")
    if record.error:
        lines.append(f"error: {record.error}")
    for name, fig in record.figures.items():
        lines.append(f"{name}: {fig.describe()} ({fig.provenance})")
    if record.log is not None and Path(record.log).is_file():
        tail = Path(record.log).read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        lines.append(f"--- last {len(tail)} lines of the log ---")
        lines.extend(tail)
    return "\n".join(lines)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    runs = item.stash.get(_RUNS_KEY, None)
    if runs is None or call.when != "call":
        return report
    for record in runs.records:
        props = _properties(record)
        item.user_properties.extend(props)
        report.user_properties.extend(props)
        report.sections.append((f"aidge-deploy {record.label}", _section(record)))
    return report


class _MetricsFile:
    """Collects the runs' metric properties where the OpenMetrics file is written (the xdist
    controller, or the only process), from the reports every worker sends it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.entries: list[tuple[str, list[tuple[str, object]]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        props = [
            (str(k), v) for k, v in report.user_properties if str(k).startswith(PROPERTY_PREFIX)
        ]
        if props:
            self.entries.append((report.nodeid, props))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):  # an xdist worker: the controller writes it
            return
        report_dir = self.config.getoption("aidge_report_dir")
        if report_dir is None or not self.entries:
            return
        from aidge_deploy.testing.openmetrics import write_openmetrics

        write_openmetrics(Path(report_dir) / METRICS_FILE, self.entries)
