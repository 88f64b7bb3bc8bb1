"""Assertion helpers for users' tests: budgets, outputs against a reference, regressions.

Each fails with an ``AssertionError`` whose message names what was checked, the value
found, the budget or tolerance, the target and the result bundle, so a red CI line says
everything without opening a log.
"""

from __future__ import annotations

import json
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
        meta = Path(result.report_dir) / "run_metadata.json"
        if meta.is_file():
            outputs = json.loads(meta.read_text())["export"]["manifest"].get("outputs") or []
            for i, spec in enumerate(outputs[:count]):
                names[i] = str(spec.get("name") or names[i])
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
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Fail unless every output of ``result`` is within ``atol + rtol * |reference|``.

    ``result`` comes from an output-mode export (``aidge_run(model, kind="output")``);
    ``reference`` is an array (one output), a sequence of arrays (in output order), a
    mapping output name -> array, or another ``DeployResult``. Values are compared flat,
    in the exported layout the target printed them in.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
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
    failures = []
    for name, got, want in zip(names, result.output, expected, strict=True):
        g = np.asarray(got, dtype=np.float64).reshape(-1)
        w = np.asarray(want, dtype=np.float64).reshape(-1)
        if g.size != w.size:
            failures.append(f"{name}: {g.size} values, reference has {w.size}")
            continue
        err = np.abs(g - w)
        allowed = atol + rtol * np.abs(w)
        bad = ~(err <= allowed)  # NaN counts as bad
        if bad.any():
            idx = int(np.argmax(np.where(bad, err / np.maximum(allowed, 1e-300), -math.inf)))
            failures.append(
                f"{name}: {int(bad.sum())}/{g.size} values off, max abs error "
                f"{np.nanmax(err):.6g} (at [{idx}]: {g[idx]:.6g} vs {w[idx]:.6g})"
            )
    if failures:
        raise AssertionError(
            f"outputs differ from the reference beyond atol={atol:g}, rtol={rtol:g}: "
            + "; ".join(failures)
            + f" {_where(result)}"
        )


def _find_baseline(baseline_dir: Path, cand: Path) -> Path:
    """The bundle under ``baseline_dir`` to compare the bundle ``cand`` with.

    ``baseline_dir`` is a bundle itself, or a folder of bundles (a previous
    ``--aidge-report-dir``): there, the bundle of the same model on the same target is
    taken, and among several, the one at the same place relative to its report folder.
    """
    from aidge_deploy.report.manifest import MANIFEST_NAME

    if (baseline_dir / MANIFEST_NAME).is_file():
        return baseline_dir
    mine = json.loads((cand / MANIFEST_NAME).read_text()).get("comparability", {})
    matches = []
    for manifest in sorted(baseline_dir.rglob(MANIFEST_NAME)):
        other = json.loads(manifest.read_text()).get("comparability", {})
        if all(other.get(k) == mine.get(k) for k in ("model_hash", "target", "io_signature")):
            matches.append(manifest.parent)
    if len(matches) > 1:
        same_place = [
            m
            for m in matches
            if cand.parts[-len(m.relative_to(baseline_dir).parts) :]
            == m.relative_to(baseline_dir).parts
        ]
        matches = same_place or matches
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise AssertionError(
            f"no baseline bundle of this model on target {mine.get('target')} under "
            f"{baseline_dir} (candidate bundle {cand}); record one with --aidge-report-dir "
            "and pass that folder as the baseline"
        )
    raise AssertionError(
        f"{len(matches)} baseline bundles of this model on {mine.get('target')} under "
        f"{baseline_dir}: {', '.join(map(str, matches))}; pass the bundle itself"
    )


def assert_no_regression(
    result: DeployResult,
    baseline_dir: str | Path,
    thresholds: str | Path | Mapping[str, Any] | None = None,
) -> None:
    """Fail when ``result`` regressed against a baseline bundle (``aidge-deploy compare``).

    The run must have written a bundle (``aidge_run`` always does; with ``deploy`` set
    ``DeployConfig.report_dir``). ``thresholds`` is a thresholds file, its parsed document,
    or None for ``DEFAULT_THRESHOLDS``. Fails on a ``fail`` verdict and when the bundles
    are not comparable (another model or target); a ``warn`` verdict passes.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    from aidge_deploy.errors import DeployError
    from aidge_deploy.report.compare import (
        Verdict,
        compare_bundles,
        evaluate,
        load_thresholds,
        not_comparable_message,
        parse_thresholds,
    )

    if result.report_dir is None:
        raise AssertionError(
            "the run wrote no result bundle to compare: set DeployConfig.report_dir "
            f"(aidge_run does) {_where(result)}"
        )
    cand = Path(result.report_dir)
    try:
        base = _find_baseline(Path(baseline_dir), cand)
        if thresholds is None:
            rules = parse_thresholds(dict(DEFAULT_THRESHOLDS))
        elif isinstance(thresholds, Mapping):
            rules = parse_thresholds(dict(thresholds))
        else:
            rules = load_thresholds(Path(thresholds))
        comparison = compare_bundles(base, cand)
    except DeployError as exc:
        raise AssertionError(f"cannot compare with the baseline: {exc} {_where(result)}") from None
    if not comparison.comparable:
        raise AssertionError(
            f"not comparable with baseline {base}: "
            f"{not_comparable_message(comparison.blocking)} {_where(result)}"
        )
    evaluation = evaluate(comparison, rules)
    if evaluation.verdict is Verdict.FAIL:
        failed = [c.message for c in evaluation.checks if c.status is Verdict.FAIL]
        raise AssertionError(
            f"regression against baseline {base} (compare verdict: fail): "
            + "; ".join(failed)
            + f" {_where(result)}"
        )
