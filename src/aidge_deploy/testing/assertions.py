"""Assertion helpers for users' tests: budgets, outputs against a reference, regressions.

Each fails with an ``AssertionError`` whose message names what was checked, the value
found, the budget or tolerance, the target and the result bundle, so a red CI line says
everything without opening a log.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aidge_deploy.testing.figures import Figure, result_figures

if TYPE_CHECKING:
    from aidge_deploy.results import DeployResult

#: thresholds ``assert_no_regression`` applies when none are given (the ``compare`` file
#: format): time and memory may not grow, accuracy may not drop, beyond these allowances
DEFAULT_THRESHOLDS: Mapping[str, Any] = {
    "schema_version": 1,
    "description": "aidge_deploy.testing defaults",
    "metrics": {
        "latency": {"direction": "smaller", "max_regression_pct": 10, "missing": "ignore"},
        "cycles": {"direction": "smaller", "max_regression_pct": 5, "missing": "ignore"},
        "emulated_instructions": {
            "direction": "smaller",
            "max_regression_pct": 1,
            "missing": "ignore",
        },
        "flash_bytes": {"direction": "smaller", "max_regression_pct": 1, "missing": "ignore"},
        "ram_bytes": {"direction": "smaller", "max_regression_pct": 1, "missing": "ignore"},
        # a host or Linux-board program has no flash: its sizes are the ELF's image and data
        "image_bytes": {"direction": "smaller", "max_regression_pct": 1, "missing": "ignore"},
        "static_data_bytes": {
            "direction": "smaller",
            "max_regression_pct": 1,
            "missing": "ignore",
        },
        "accuracy": {"direction": "larger", "max_regression_abs": 0.01, "missing": "ignore"},
    },
}


def _where(result: DeployResult) -> str:
    target = result.target or "?"
    bundle = f"bundle {result.report_dir}" if result.report_dir else "no bundle"
    log = f", log {result.log_path}" if result.log_path else ""
    return f"[target {target}; {bundle}{log}]"


def _figure(result: DeployResult, metric: str) -> Figure:
    figures = result_figures(result)
    if metric in figures:
        return figures[metric]
    names = ", ".join(k for k in figures if not k.startswith("layers/")) or "none"
    raise AssertionError(f"no metric {metric!r} in the run (metrics: {names}) {_where(result)}")


def assert_budget(
    result: DeployResult,
    metric: str,
    max: float | None = None,
    min: float | None = None,
) -> Figure:
    """Fail unless ``metric`` of ``result`` is within ``[min, max]`` (in the metric's unit).

    ``metric`` is a name of the run's ``summary.json`` (``latency``, ``flash_bytes``,
    ``emulated_instructions``, ``accuracy``, a measurement's name) or a per-layer figure
    ``layers/<layer>/<figure>``. A figure that is unavailable fails (a budget cannot be met
    by a missing number). Returns the figure checked.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if max is None and min is None:
        raise TypeError("assert_budget needs max=, min= or both")
    fig = _figure(result, metric)
    budget = " and ".join(
        part
        for part in (
            None if min is None else f"min {min:.6g} {fig.unit}",
            None if max is None else f"max {max:.6g} {fig.unit}",
        )
        if part
    )
    if fig.value is None:
        raise AssertionError(
            f"{metric} is unavailable ({fig.unavailable_reason or 'no value'}); budget {budget} "
            f"{_where(result)}"
        )
    value = fig.value
    if max is not None and value > max:
        raise AssertionError(
            f"{metric} = {value:.6g} {fig.unit} ({fig.provenance}) exceeds its budget: "
            f"{budget} {_where(result)}"
        )
    if min is not None and value < min:
        raise AssertionError(
            f"{metric} = {value:.6g} {fig.unit} ({fig.provenance}) is below its budget: "
            f"{budget} {_where(result)}"
        )
    return fig


def output_names(result: DeployResult) -> list[str]:
    """Names of the export's outputs, from the run's bundle (``output #i`` without one)."""
    count = len(result.output) if isinstance(result.output, list) else 0
    names = [f"output #{i}" for i in range(count)]
    if result.report_dir is not None:
        from aidge_deploy.errors import ReportError
        from aidge_deploy.report.reader import read_metadata

        try:
            outputs = read_metadata(Path(result.report_dir)).export.outputs
        except ReportError:  # no readable metadata: the outputs keep their numbers
            outputs = ()
        for i, spec in enumerate(outputs[:count]):
            names[i] = spec.name or names[i]
    return names


def _as_arrays(reference: Any, names: Sequence[str]) -> list[np.ndarray]:
    from aidge_deploy.results import DeployResult

    if isinstance(reference, DeployResult):
        if not isinstance(reference.output, list):
            raise TypeError("the reference DeployResult holds no output tensors")
        return [np.asarray(o) for o in reference.output]
    if isinstance(reference, Mapping):
        missing = [n for n in names if n not in reference]
        if missing:
            raise TypeError(f"reference has no output {missing[0]!r} (keys: {list(reference)})")
        return [np.asarray(reference[n]) for n in names]
    if isinstance(reference, np.ndarray):
        return [reference]
    if isinstance(reference, Sequence) and all(
        isinstance(r, np.ndarray | Sequence) for r in reference
    ):
        arrays = [np.asarray(r) for r in reference]
        if len(names) == 1 and len(arrays) != 1 and all(a.ndim == 0 for a in arrays):
            return [np.asarray(reference)]
        return arrays
    return [np.asarray(reference)]


def assert_outputs_close(
    result: DeployResult,
    reference: Any,
    atol: float | None = None,
    rtol: float | None = None,
) -> None:
    """Fail unless every output of ``result`` is within ``atol + rtol * |reference|``.

    ``result`` comes from an output-mode export (``aidge_run(model, kind="output")``);
    ``reference`` is an array (one output), a sequence of arrays (in output order), a
    mapping output name -> array, or another ``DeployResult``. Values are compared flat,
    in the exported layout the target printed them in. Float outputs default to
    ``atol=1e-5, rtol=1e-4``; int8 outputs (dequantised by the deploy) are judged as
    ``validate`` judges them: within a few quantisation steps of their export plus a
    relative part (``validation.matrix.int8_tolerance``), unless ``atol``/``rtol`` are given.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    from aidge_deploy.validation.matrix import FLOAT_ATOL, FLOAT_RTOL, int8_tolerance

    if not isinstance(result.output, list):
        raise AssertionError(
            "the run holds no output tensors (a benchmark export): export with kind='output' "
            f"{_where(result)}"
        )
    names = output_names(result)
    expected = _as_arrays(reference, names)
    if len(expected) != len(result.output):
        raise AssertionError(
            f"the target printed {len(result.output)} outputs, the reference has "
            f"{len(expected)} {_where(result)}"
        )
    steps = [q.scale for q in result.output_quantisation]
    failures = []
    for i, (name, got, want) in enumerate(zip(names, result.output, expected, strict=True)):
        step = steps[i] if i < len(steps) else None
        tol = int8_tolerance(step) if step is not None else None
        a = atol if atol is not None else (tol.atol if tol else FLOAT_ATOL)
        r = rtol if rtol is not None else (tol.rtol if tol else FLOAT_RTOL)
        g = np.asarray(got, dtype=np.float64).reshape(-1)
        w = np.asarray(want, dtype=np.float64).reshape(-1)
        if g.size != w.size:
            failures.append(f"{name}: {g.size} values, reference has {w.size}")
            continue
        err = np.abs(g - w)
        allowed = a + r * np.abs(w)
        bad = ~(err <= allowed)  # NaN counts as bad
        if bad.any():
            idx = int(np.argmax(np.where(bad, err / np.maximum(allowed, 1e-300), -math.inf)))
            within = f"atol={a:g}, rtol={r:g}" + (
                f" ({a / step:g} steps of {step:.3g})" if step and atol is None else ""
            )
            failures.append(
                f"{name}: {int(bad.sum())}/{g.size} values off beyond {within}, max abs error "
                f"{np.nanmax(err):.6g} (at [{idx}]: {g[idx]:.6g} vs {w[idx]:.6g})"
            )
    if failures:
        raise AssertionError(
            "outputs differ from the reference: " + "; ".join(failures) + f" {_where(result)}"
        )


class BaselineWarning(UserWarning):
    """A regression check that could not compare (a first run) or accepted a new baseline."""


def _rules(thresholds: str | Path | Mapping[str, Any] | None, session: Any) -> Any:
    from aidge_deploy.report.compare import load_thresholds, parse_thresholds

    if thresholds is None and session is not None and session.thresholds_path is not None:
        thresholds = session.thresholds_path
    if thresholds is None:
        return parse_thresholds(dict(DEFAULT_THRESHOLDS))
    if isinstance(thresholds, Mapping):
        return parse_thresholds(dict(thresholds))
    return load_thresholds(Path(thresholds))


def _baseline_store(
    baseline: Any, session: Any, identity: Any, record: Any
) -> tuple[Any, int | None, str | None]:
    """Where the earlier runs are, the candidate's own record id there (if any), and what
    they are, for messages (None: no baseline was asked for)."""
    from aidge_deploy.history.store import HistoryStore
    from aidge_deploy.report.destination import is_bundle
    from aidge_deploy.testing.reportdir import load_baselines

    if isinstance(baseline, HistoryStore):
        return baseline, None, f"the history {baseline.url}"
    if session is not None and baseline is not None and Path(baseline) == session.baseline_dir:
        baseline = None  # the session's own --aidge-baseline (read once per session)
    if baseline is not None:
        folder = Path(baseline)
        if is_bundle(folder):  # one bundle: the baseline of this identity
            store = HistoryStore("sqlite://")
            store.record(folder, identity, source="baseline")
            return store, None, f"the bundle {folder}"
        exclude = session.session_dir if session is not None else None
        return load_baselines(folder, exclude=exclude), None, f"the baseline folder {folder}"
    if session is not None and session.baseline_dir is not None:
        return session.baselines(), None, f"--aidge-baseline {session.baseline_dir}"
    if session is not None and session.history is not None:
        own = None if record is None else record.history_id
        return session.history, own, f"--aidge-history {session.history_path}"
    return None, None, None


#: said when a gate had nothing to compare with and was not told to start a series
_START_HINT = "run once with --aidge-update-baseline to accept this run as the first of its series"


def assert_no_regression(
    result: DeployResult,
    baseline: str | Path | Any = None,
    thresholds: str | Path | Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
) -> None:
    """Fail when ``result`` regressed against the newest comparable earlier result of its
    identity.

    The identity is what the run measured (``history.identity``): for ``aidge_run``'s
    results the test (its path in the project, without its target parameter, or the
    ``name`` it was given), the target, the kind, dtype and iterations; for another
    ``DeployResult`` that wrote a bundle, ``name`` and the bundle's facts. Earlier results
    are looked up in ``baseline`` (an earlier ``--aidge-report-dir`` at any depth, one
    bundle, or a ``HistoryStore``), else in ``--aidge-baseline``, else in
    ``--aidge-history``; a changed model is compared, that is the point. Comparability is
    the one table of ``aidge_deploy.comparability``. It is judged with ``aidge-deploy
    compare``'s semantics and ``thresholds`` (a file, its parsed document, else
    ``--aidge-thresholds``, else ``DEFAULT_THRESHOLDS``); host and silicon times against
    the spread of their last comparable results (``history.regression``).

    Fails on a regression, and when a baseline or history was asked for but holds no
    comparable earlier result (the first run of a series, another dtype, iteration count
    or provenance: said with what differs), unless the session runs with
    ``--aidge-update-baseline`` (then it passes with a ``BaselineWarning`` and the run is
    the new baseline). With no baseline asked for, only this check is skipped (a
    ``BaselineWarning`` says so, the test's budgets still decide it), and it fails in CI
    (``CI=true``). What the run was compared against is said in the test's report.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    import os
    import warnings

    from aidge_deploy.errors import DeployError
    from aidge_deploy.history.gate import GateStatus, check_regression
    from aidge_deploy.history.identity import bundle_facts
    from aidge_deploy.history.store import bundle_figures
    from aidge_deploy.testing.session import active_session

    if result.report_dir is None:
        raise AssertionError(
            "the run wrote no result bundle to compare: set DeployConfig.report_dir "
            f"(aidge_run does) {_where(result)}"
        )
    session = active_session()
    record = session.record_of(result) if session is not None else None

    def said(line: str) -> str:
        if record is not None:
            record.gate = line
        return line

    try:
        facts = bundle_facts(
            Path(result.report_dir), board=record.board if record is not None else None
        )
        identity = record.identity if record is not None and name is None else None
        if identity is None:
            if name is None:
                raise AssertionError(
                    "this result did not come from aidge_run: pass name= to say what it "
                    f"measures {_where(result)}"
                )
            per_board = session is not None and session.board_series
            board = record.board if record is not None and per_board else None
            identity = facts.identity(name, board)
        rules = _rules(thresholds, session)
        store, record_id, source = _baseline_store(baseline, session, identity, record)
        if store is None:
            message = (
                "regression check skipped: no baseline asked for (pass --aidge-baseline DIR, "
                "an earlier --aidge-report-dir, or --aidge-history FILE)"
            )
            if os.environ.get("CI", "").lower() == "true":
                said(f"failed: {message}; CI=true")
                raise AssertionError(
                    f"{message}; in CI (CI=true) a gate must gate {_where(result)}"
                )
            warnings.warn(BaselineWarning(said(message)), stacklevel=2)
            return
        verdict = check_regression(
            store,
            identity,
            facts.comparability,
            bundle_figures(Path(result.report_dir)),
            rules,
            record_id=record_id,
        )
    except DeployError as exc:
        said(f"failed: cannot compare with the baseline: {exc}")
        raise AssertionError(f"cannot compare with the baseline: {exc} {_where(result)}") from None
    if verdict.status is GateStatus.PASS:
        said(verdict.message)
        return
    update = session is not None and session.update_baseline
    if update:
        accepted = f"--aidge-update-baseline: this run is the new baseline; {verdict.message}"
        warnings.warn(BaselineWarning(said(accepted)), stacklevel=2)
        return
    if session is not None and record is not None:
        session.reject(record)
    if verdict.status is GateStatus.FAIL:
        hint = " (if this is intended, run with --aidge-update-baseline)"
    else:
        hint = f" in {source}; {_START_HINT}"
    said(f"failed: {verdict.message}")
    raise AssertionError(f"{verdict.message}{hint} {_where(result)}")
