"""The regression gate: a new result against the earlier results of its identity.

The baseline is the newest *accepted* record of the same identity (see ``store``) that the
comparability table (``aidge_deploy.comparability``) lets it be compared with, found by
identity, never by the model's content: a changed model is exactly what a regression check
compares. Another dtype, kind or iteration count of the same test and target, or another
provenance, is "no comparable earlier result" (said with both values); an instrument that
differs (time model, power monitor) leaves its figures out; what was built (model, versions,
toolchain, lab board) is named beside the verdict.
Figures are then judged with ``aidge-deploy compare``'s thresholds and semantics
(``report.compare.evaluate_figures``); a measured figure (host, silicon) is compared with
the median of its last comparable results and its allowance widened to their noise band,
an exact one (emulated, static) with the previous value (``regression``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from aidge_deploy.comparability import Difference, Effect, describe
from aidge_deploy.history import changepoint, regression
from aidge_deploy.history.identity import Comparability, RunIdentity
from aidge_deploy.history.store import HistoryRecord, HistoryStore
from aidge_deploy.report.compare import (
    Evaluation,
    Figure,
    Thresholds,
    Verdict,
    evaluate_figures,
)

#: the ``source`` of records read from a baseline folder (``testing.reportdir``)
BASELINE_SOURCE = "baseline"


class GateStatus(StrEnum):
    PASS = "pass"  # comparable, no threshold failed
    FAIL = "fail"  # a figure regressed beyond its allowance
    NOT_COMPARABLE = "not comparable"  # a blocking difference (dtype, toolchain, ...)
    NO_BASELINE = "no baseline"  # the first result of its identity


@dataclass(frozen=True)
class GateResult:
    status: GateStatus
    message: str
    baseline: HistoryRecord | None = None
    evaluation: Evaluation | None = None


def describe_record(record: HistoryRecord) -> str:
    """``the run of 2025-01-02 10:00:00 UTC (commit 3f2a9c1d0e; record 12; bundle ...)``:
    what a gate compared against, as its report line names it (a baseline folder's runs are
    named by their bundle: their record numbers exist only in memory)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.recorded_at))
    commit = f"commit {record.vcs.short}" if record.vcs.commit else "no commit known"
    where = [] if record.source == BASELINE_SOURCE else [f"record {record.id}"]
    if record.bundle:
        where.append(f"bundle {record.bundle}")
    return f"the run of {when} ({commit}; {'; '.join(where)})"


def _baseline_figures(
    store: HistoryStore,
    identity: RunIdentity,
    comparability: Comparability,
    previous: HistoryRecord,
    candidate: Mapping[str, Figure],
    before_id: int | None,
    window_size: int,
) -> tuple[dict[str, Figure], dict[str, float], dict[str, str], dict[str, str]]:
    """Per figure: the value to compare with, the noise band, what that value is, and (a
    series too noisy to gate, ``changepoint``) why it is not gated."""
    base: dict[str, Figure] = dict(previous.figures)
    noise: dict[str, float] = {}
    basis: dict[str, str] = {}
    unstable: dict[str, str] = {}
    measured = [
        k
        for k, f in candidate.items()
        if f.value is not None and not regression.is_exact(f.provenance)
    ]
    if not measured:
        return base, noise, basis, unstable
    window = store.window(identity, comparability, window_size, before_id=before_id)
    for key in measured:
        fig = candidate[key]
        earlier = [
            r.figures[key].value
            for r in window
            if key in r.figures and r.figures[key].value is not None
        ]
        values = [v for v in earlier if v is not None]
        if len(values) < regression.MIN_WINDOW or fig.value is None:
            continue
        spread = changepoint.series_noise(values, fig.provenance, resolution=fig.resolution)
        if spread.stability is changepoint.Stability.UNSTABLE:
            unstable[key] = f"its series is unstable: {spread.describe()}"
            continue
        verdict = regression.judge(values, fig.value, fig.provenance, resolution=fig.resolution)
        if verdict is None:
            continue
        old = previous.figures.get(key, fig)
        base[key] = Figure(verdict.reference, old.unit, old.provenance, old.resolution)
        noise[key] = verdict.band
        basis[key] = f"; baseline = {verdict.basis}"
    return base, noise, basis, unstable


def _informative(diffs: tuple[Difference, ...]) -> str:
    named = [d for d in diffs if d.effect is not Effect.BLOCKING]
    return f" (differs: {describe(named)})" if named else ""


def check_regression(
    store: HistoryStore,
    identity: RunIdentity,
    comparability: Comparability,
    candidate: Mapping[str, Figure],
    thresholds: Thresholds,
    *,
    record_id: int | None = None,
    window_size: int = regression.WINDOW,
) -> GateResult:
    """Judge a result (already recorded as ``record_id``, or not recorded) against the
    newest comparable accepted result of ``identity`` in ``store``.

    Its series' records are searched newest first for one with no blocking difference
    (``comparability``); without one, the newest record of the same test says what differs.
    """
    earlier = store.accepted(identity, before_id=record_id)
    previous = next(
        (r for r in earlier if not r.comparability.blocking_differences(comparability)), None
    )
    if previous is None and earlier:
        newest = earlier[0]
        return GateResult(
            GateStatus.NOT_COMPARABLE,
            "no comparable earlier result: "
            f"{'; '.join(newest.comparability.blocking_differences(comparability))} "
            f"(newest earlier result: {describe_record(newest)})",
            newest,
        )
    if previous is None:
        other = store.previous_of_test(identity, before_id=record_id)
        if other is not None:
            before = other.identity
            if identity.board is not None and before.board is None:  # per-board from now on
                before = dataclasses.replace(before, board=other.comparability.board)
            what = "; ".join(before.differences(identity))
            return GateResult(
                GateStatus.NOT_COMPARABLE,
                f"no comparable earlier result: {what} "
                f"(earlier result of this test: {describe_record(other)})",
                other,
            )
        return GateResult(
            GateStatus.NO_BASELINE,
            f"no earlier result of {identity.describe()}: this run would be the first of its "
            "series",
        )
    diffs = previous.comparability.differences(comparability)
    base, noise, basis, unstable = _baseline_figures(
        store, identity, comparability, previous, candidate, record_id, window_size
    )
    evaluation = evaluate_figures(
        base,
        candidate,
        thresholds,
        differences=diffs,
        noise=noise,
        basis=basis,
        not_gated=unstable,
    )
    against = f"{describe_record(previous)}{_informative(diffs)}"
    if evaluation.verdict is Verdict.FAIL:
        failed = [c.message for c in evaluation.checks if c.status is Verdict.FAIL]
        return GateResult(
            GateStatus.FAIL,
            f"regression against {against} (compare verdict: fail): " + "; ".join(failed),
            previous,
            evaluation,
        )
    return GateResult(
        GateStatus.PASS,
        f"no regression against {against} "
        f"(compare verdict: {evaluation.verdict.value}): "
        + ("; ".join(c.message for c in evaluation.checks) or "no figure matched a threshold"),
        previous,
        evaluation,
    )
