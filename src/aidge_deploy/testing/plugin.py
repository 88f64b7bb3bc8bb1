"""The pytest plugin: deploy Aidge models on targets from users' tests.

Loaded through the ``pytest11`` entry point ``aidge-deploy`` (the name pytest prints in its
``plugins:`` line, and the one ``-p no:aidge-deploy`` takes) in every pytest session, so it
must stay inert until used: it only registers options, the ``aidge_targets`` marker and
fixtures, imports nothing heavy at load time, and changes nothing for tests that use none
of them.

* ``@pytest.mark.aidge_targets("host", "mps2-an386")`` parametrizes ``aidge_target``;
  ``--aidge-target`` (repeatable: a target, or a board of ``--aidge-lab``, which selects the
  tests of its target and runs them on that board) narrows the marker's list, or sets the
  targets of tests that take ``aidge_target`` unmarked. A name that is neither fails the
  session at once, with a did-you-mean; one no selected test runs on makes the session exit
  non-zero with the reason (``sessionreport``).
* ``aidge_run(model_or_export, target=None, name=None, **options) -> DeployResult``:
  checks the run (``configcheck.check_run``: counts, model file, inputs against the model),
  exports an ONNX model (``dtype``, ``iterations``, ``warmup``, ``kind``, ``profiling``,
  ``inputs``; through the export cache), takes a board of the lab for the rest of the test
  (a file lock other workers and jobs respect), deploys, writes the result bundle under
  ``--aidge-report-dir`` (one folder per session, ``reportdir``) and records the run in
  ``--aidge-history`` under its identity: the test's node id relative to the project's own
  root (``projectroot``) without the target, or ``name``; the lab board is a fact of the
  run, in its identity only with ``--aidge-board-series``.
* ``assert_no_regression(result)`` compares with the newest comparable run of the same
  identity in ``--aidge-baseline`` or ``--aidge-history``, and fails when there is none;
  ``--aidge-update-baseline`` accepts a run that has no comparable earlier run or
  regressed as the new baseline. Each gated run's line names its baseline.
* Each run's headline metrics become JUnit XML properties (``aidge.<run>.<metric>[<unit>]``)
  and samples of ``metrics.om`` (OpenMetrics, each figure with its own provenance, in base
  units); its bundle and log are attached to the test's report.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

MARKER = "aidge_targets"
_SESSION_KEY = pytest.StashKey["Any"]()
_RUNS_KEY = pytest.StashKey["Any"]()
_NAME_KEY = pytest.StashKey[str]()
_ROOT_KEY = pytest.StashKey[Path]()
METRICS_FILE = "metrics.om"
#: a JUnit property of a run's metric: aidge.<run>.<metric>[<unit>]
PROPERTY_PREFIX = "aidge."
LOG_TAIL_LINES = 40
#: the xdist worker inputs carrying the session folder's name and the project's root
_WORKER_SESSION = "aidge_deploy_session"
_WORKER_ROOT = "aidge_deploy_project_root"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aidge-deploy", "Aidge model deployment (aidge_deploy.testing)")
    group.addoption(
        "--aidge-target",
        action="append",
        default=[],
        metavar="TARGET",
        help="Target, or board of --aidge-lab (its target's tests run on it); repeatable. "
        "Narrows @aidge_targets lists; an unknown name fails the session.",
    )
    group.addoption("--aidge-lab", type=Path, metavar="FILE", help="Lab file naming the boards.")
    group.addoption(
        "--aidge-report-dir",
        type=Path,
        metavar="DIR",
        help="Keep each run's result bundle here, in a folder per session (and metrics.om, "
        "OpenMetrics).",
    )
    group.addoption(
        "--aidge-baseline",
        type=Path,
        metavar="DIR",
        help="An earlier --aidge-report-dir: assert_no_regression compares each run with the "
        "latest accepted run of the same identity there.",
    )
    group.addoption(
        "--aidge-history",
        metavar="FILE",
        help="Results history (a SQLite file, or a database URL): every run is recorded; "
        "assert_no_regression compares with the previous runs of the same identity.",
    )
    group.addoption(
        "--aidge-thresholds",
        type=Path,
        metavar="FILE",
        help="Thresholds file of assert_no_regression (the `aidge-deploy compare` format).",
    )
    group.addoption(
        "--aidge-update-baseline",
        action="store_true",
        default=False,
        help="Accept runs that are not comparable with their baseline, or regressed, as the "
        "new baseline (assert_no_regression passes, with a warning).",
    )
    group.addoption(
        "--aidge-board-series",
        action="store_true",
        default=False,
        help="Keep each lab board's runs a series of their own (default: the runs of a "
        "target continue one series whichever board of it ran them; the board is named).",
    )
    group.addoption(
        "--aidge-lock-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="How long a test waits for a busy board of the lab (default 600).",
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _check_options(config: pytest.Config) -> None:
    """The plugin's options, checked before collection: a bad one fails the session."""
    from aidge_deploy.errors import DeployError

    try:
        names = _selected(config)
        if names:
            from aidge_deploy.lab import load_lab
            from aidge_deploy.testing.session import check_target_names

            lab_path = config.getoption("aidge_lab")
            check_target_names(names, load_lab(lab_path) if lab_path else None)
        history = config.getoption("aidge_history")
        if history and not _is_worker(config):
            from aidge_deploy.history.store import HistoryStore

            HistoryStore(history).close()  # created (or opened) once, up front
        baseline, report_dir = (
            config.getoption("aidge_baseline"),
            config.getoption("aidge_report_dir"),
        )
        if baseline is not None and not Path(baseline).is_dir() and baseline != report_dir:
            from aidge_deploy.errors import ConfigError

            raise ConfigError(
                f"--aidge-baseline {baseline} is not a folder",
                hint="Pass an earlier --aidge-report-dir (it may be this session's own "
                "--aidge-report-dir, even before its first session).",
            )
        thresholds = config.getoption("aidge_thresholds")
        if thresholds is not None:
            from aidge_deploy.report.compare import load_thresholds

            load_thresholds(thresholds)
    except DeployError as exc:
        raise pytest.UsageError(
            f"aidge-deploy: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        ) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*targets): run the test on each target (parametrizes the aidge_target "
        "fixture; aidge-deploy plugin)",
    )
    _check_options(config)
    if _is_worker(config):
        name = config.workerinput.get(_WORKER_SESSION)  # type: ignore[attr-defined]
        if name:
            config.stash[_NAME_KEY] = str(name)
        root = config.workerinput.get(_WORKER_ROOT)  # type: ignore[attr-defined]
        config.stash[_ROOT_KEY] = Path(root) if root else Path(config.rootpath)
    else:
        if config.getoption("aidge_report_dir") is not None:
            from aidge_deploy.testing.reportdir import new_session_name

            config.stash[_NAME_KEY] = new_session_name()
        config.stash[_ROOT_KEY] = _project_root(config)
        from aidge_deploy.testing.sessionreport import SessionReport

        config.pluginmanager.register(SessionReport(config), "aidge-deploy-session-report")
    config.pluginmanager.register(_MetricsFile(config), "aidge-deploy-metrics")


def _project_root(config: pytest.Config) -> Path:
    """The project's root (``projectroot``), said when pytest's rootdir moved away from it."""
    from aidge_deploy.testing.projectroot import project_root

    root = project_root(config)
    if root != Path(config.rootpath):
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(
                f"aidge-deploy: pytest chose rootdir {config.rootpath}, not the project's "
                f"{root}: it took the value of an option given in space form for a test path "
                "(pytest-dev/pytest#8846), so it may not have read the project's ini file. "
                f"Runs are named from {root}; write the options as --aidge-history=FILE."
            ),
            stacklevel=2,
        )
    return root


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(xdist) every worker writes into the controller's session folder."""
    name = node.config.stash.get(_NAME_KEY, None)
    if name:
        node.workerinput[_WORKER_SESSION] = name
    root = node.config.stash.get(_ROOT_KEY, None)
    if root is not None:
        node.workerinput[_WORKER_ROOT] = str(root)


def _selected(config: pytest.Config) -> list[str]:
    return list(config.getoption("aidge_target") or [])


def _selected_targets(config: pytest.Config) -> list[str]:
    """The targets ``--aidge-target`` selects: lab boards stand for their targets."""
    names = _selected(config)
    lab_path = config.getoption("aidge_lab")
    if not names or lab_path is None:
        return names
    from aidge_deploy.lab import load_lab

    boards = {b.name: b.target for b in load_lab(lab_path).boards}
    return list(dict.fromkeys(boards.get(n, n) for n in names))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    direct = "aidge_target" in metafunc.definition._fixtureinfo.argnames
    if marker is None and not direct:
        return
    if "aidge_target" not in metafunc.fixturenames:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: @{MARKER} needs the aidge_target or aidge_run fixture"
        )
    selected = _selected_targets(metafunc.config)
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
        report_dir = config.getoption("aidge_report_dir")
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        config.stash[_SESSION_KEY] = AidgeSession(
            targets=_selected(config),
            lab_path=config.getoption("aidge_lab"),
            report_dir=None if report_dir is None else Path(report_dir).absolute(),
            baseline_dir=config.getoption("aidge_baseline"),
            history_path=config.getoption("aidge_history"),
            thresholds_path=config.getoption("aidge_thresholds"),
            update_baseline=bool(config.getoption("aidge_update_baseline")),
            lock_timeout_s=float(config.getoption("aidge_lock_timeout")),
            work_root=factory.getbasetemp() / "aidge",
            session_name=config.stash.get(_NAME_KEY, "session"),
            worker=str(worker),
            project_dir=config.stash.get(_ROOT_KEY, Path(config.rootpath)),
            board_series=bool(config.getoption("aidge_board_series")),
        )
    return config.stash[_SESSION_KEY]


def pytest_sessionfinish(session: pytest.Session) -> None:
    aidge = session.config.stash.get(_SESSION_KEY, None)
    if aidge is not None:
        aidge.finish()


def _test_name(item: pytest.Item) -> str:
    """The test's node id, its file relative to the project's root and without the
    ``aidge_target`` parameter: the name its runs are recorded under
    (``tests/test_m.py::test_latency[mps2-an386-int8]`` -> ``tests/test_m.py::test_latency[int8]``)."""
    from aidge_deploy.testing.projectroot import relative_nodeid

    nodeid = relative_nodeid(item, item.config.stash.get(_ROOT_KEY, Path(item.config.rootpath)))
    callspec = getattr(item, "callspec", None)
    if callspec is None or "aidge_target" not in callspec.params:
        return nodeid
    base = nodeid.split("[", 1)[0]
    ids = list(getattr(callspec, "_idlist", []))
    target = str(callspec.params["aidge_target"])
    if target in ids:
        ids.remove(target)
    elif ids:  # an unknown pytest: keep the full id rather than guess
        return nodeid
    return f"{base}[{'-'.join(ids)}]" if ids else base


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
    """``aidge_run(model_or_export, target=None, name=None, **options) -> DeployResult``."""

    runs = request.node.stash.get(_RUNS_KEY, None)
    own = runs is None
    if own:
        runs = _new_runs(request, aidge_target, tmp_path_factory)
    try:
        yield runs.run
    finally:
        if own:
            runs.close()


def _new_runs(
    request: pytest.FixtureRequest, aidge_target: str, factory: pytest.TempPathFactory
) -> Any:
    from aidge_deploy.testing.session import TestRuns

    runs = TestRuns(
        _session(request.config, factory),
        _test_dir(request.node),
        aidge_target,
        test_name=_test_name(request.node),
        nodeid=request.node.nodeid,
    )
    request.node.stash[_RUNS_KEY] = runs
    return runs


@pytest.fixture
def aidge_board(
    request: pytest.FixtureRequest, aidge_target: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The lab board (``aidge_deploy.lab.LabBoard``) that runs ``aidge_target``, held for the
    test (None for the host and emulated boards); ``aidge_run`` then uses it."""
    runs = request.node.stash.get(_RUNS_KEY, None)
    own = runs is None
    if own:
        runs = _new_runs(request, aidge_target, tmp_path_factory)
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
    if record.gate:
        props.append((f"{head}.regression", record.gate))
    return props


def _section(record: Any) -> str:
    lines = [f"target {record.target}" + (f" (board {record.board})" if record.board else "")]
    if record.bundle is not None:
        lines.append(f"bundle: {record.bundle}")
    if record.log is not None:
        lines.append(f"log: {record.log}")
    if record.error:
        lines.append(f"error: {record.error}")
    if record.gate:
        lines.append(f"regression: {record.gate}")
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
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "aidge_target" in callspec.params:
        # read by the target coverage check (xdist carries a report's attributes to it)
        report.aidge_target = str(callspec.params["aidge_target"])  # type: ignore[attr-defined]
    runs = item.stash.get(_RUNS_KEY, None)
    if runs is None or call.when != "call":
        return report
    for record in runs.records:
        props = _properties(record)
        item.user_properties.extend(props)
        report.user_properties.extend(props)
        report.sections.append((f"aidge-deploy {record.label}", _section(record)))
    # read by the OpenMetrics file's writer (xdist carries a report's attributes to it)
    report.aidge_runs = [_metrics_entry(r) for r in runs.records]  # type: ignore[attr-defined]
    report.aidge_gates = [  # type: ignore[attr-defined]
        (r.label, r.gate) for r in runs.records if r.gate
    ]
    return report


def _metrics_entry(record: Any) -> dict[str, Any]:
    return {
        "run": record.label,
        "target": record.target,
        "board": record.board or "",
        "figures": [
            {"name": n, "value": f.value, "unit": f.unit, "provenance": f.provenance}
            for n, f in record.figures.items()
            if f.value is not None
        ],
    }


class _MetricsFile:
    """Collects the runs' figures where the OpenMetrics file is written (the xdist
    controller, or the only process), from the reports every worker sends it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.entries: list[tuple[str, list[dict[str, Any]]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        runs = getattr(report, "aidge_runs", None)
        if report.when == "call" and runs:
            self.entries.append((report.nodeid, list(runs)))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if _is_worker(self.config):  # the controller writes it
            return
        report_dir = self.config.getoption("aidge_report_dir")
        if report_dir is None or not self.entries:
            return  # an earlier session's file stays as it was
        from aidge_deploy.testing.openmetrics import write_openmetrics

        name = self.config.stash.get(_NAME_KEY, "session")
        write_openmetrics(Path(report_dir) / name / METRICS_FILE, self.entries)
        write_openmetrics(Path(report_dir) / METRICS_FILE, self.entries)
