"""Compare two result bundles: are they comparable, what changed, is it a regression?

Whether two bundles may be compared, and which of their differences only inform, is decided
by the one comparability table (``aidge_deploy.comparability``): a *blocking* difference
(target, export kind, dtype, iterations, provenance) refuses the comparison; a *figures*
one (time model, power monitor, aggregation) leaves out the figures of that instrument; an
*informative* one (model, export, versions, toolchain, backend, protocol, lab board) is
reported and the figures are compared — measuring its effect is the point of most
comparisons. A thresholds file then turns the deltas into a verdict. Two estimates inside
each other's band, with the same emulated instructions, are "no change" (the table's rule,
``comparability.no_change``), in the deltas and in the thresholds' verdict alike.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from aidge_deploy.comparability import (
    BY_NAME,
    LAYER_PREFIX,
    Difference,
    Effect,
    differences,
    instructions_key,
    no_change,
)
from aidge_deploy.errors import ReportError
from aidge_deploy.metrics import Band, Metric, format_banded, format_figure
from aidge_deploy.report.manifest import BundleManifest
from aidge_deploy.report.reader import ResultBundle, Summary, read_bundle
from aidge_deploy.report.schemas import SchemaName, validate_document

#: (the names this module has always given the table's effect and differences)
DimensionKind = Effect
DimensionDiff = Difference

#: an emulated board's timing-model estimate, shown after the cycle metric
ESTIMATED = "estimated_cycles"
#: headline metrics shown as totals, in this order (the cycle metric is added by name)
TOTAL_KEYS = (
    "latency",
    "mlperf_latency",
    "accuracy",
    "flash_bytes",
    "ram_bytes",
    "image_bytes",
    "static_data_bytes",
    "activation_memory",
    "peak_rss",
)


class Direction(StrEnum):
    SMALLER = "smaller"  # smaller is better (latency, memory)
    LARGER = "larger"  # larger is better (accuracy)
    EQUAL = "equal"  # any change is a regression


class MissingPolicy(StrEnum):
    FAIL = "fail"
    WARN = "warn"
    IGNORE = "ignore"


class Verdict(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


#: ``aidge-deploy compare`` exit codes
EXIT_PASS = 0  # comparable; no threshold failed (or no thresholds given)
EXIT_WARN = 1  # thresholds: a warning (missing metric with missing=warn, invalid bundle)
EXIT_ERROR = 2  # a bundle failed verification, or the thresholds file is invalid
EXIT_NOT_COMPARABLE = 3  # a blocking dimension differs (model, inputs/outputs, target)
EXIT_FAIL = 4  # thresholds: at least one metric regressed beyond its allowance

VERDICT_EXIT: Mapping[Verdict, int] = {
    Verdict.PASS: EXIT_PASS,
    Verdict.WARN: EXIT_WARN,
    Verdict.FAIL: EXIT_FAIL,
}


@dataclass(frozen=True)
class Figure:
    value: float | None
    unit: str
    provenance: str
    #: the step of the timer behind a time (None: a count, a size, an untimed figure)
    resolution: float | None = None
    #: why the figure has no value (None when it has one)
    unavailable_reason: str | None = None
    #: the band a model states for an estimate (None: a measurement, a count, older data)
    band: Band | None = None

    @classmethod
    def of(cls, metric: Metric) -> Figure:
        """A bundle's figure (``report.reader``) as the comparison uses it."""
        value = metric.value
        return cls(
            None if value is None else float(value),
            metric.unit,
            metric.provenance.value,
            metric.resolution,
            metric.unavailable_reason,
            metric.band if value is not None else None,
        )

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The band's low and high (None without a band or a value)."""
        if self.band is None or self.value is None:
            return None
        return self.band.low(self.value), self.band.high(self.value)

    def text(self) -> str:
        """The figure as people read it (an estimate to 3 digits with its band)."""
        if self.value is not None and self.band is not None:
            return format_banded(self.value, self.unit, self.band)
        return format_figure(
            self.value, self.unit, self.resolution, unavailable_reason=self.unavailable_reason
        )


def unchanged_estimate(
    key: str, base: Mapping[str, Figure], cand: Mapping[str, Figure]
) -> str | None:
    """Why the estimate ``key`` is no change between two runs (None: it may have changed):
    each inside the other's band, and the emulated instructions the same."""
    fb, fc = base.get(key), cand.get(key)
    if fb is None or fc is None or fb.value is None or fc.value is None:
        return None
    bb, bc = fb.bounds, fc.bounds
    if bb is None or bc is None:
        return None
    ikey = instructions_key(key)
    ib, ic = base.get(ikey), cand.get(ikey)
    instructions = (ib.value if ib else None, ic.value if ic else None)
    if not no_change(fb.value, bb, fc.value, bc, *instructions):
        return None
    return (
        f"no change: {fb.text()} -> {fc.text()}, each inside the other's band, and the "
        f"emulated instructions unchanged ({format_figure(instructions[0], 'instructions')})"
    )


@dataclass(frozen=True)
class MetricDelta:
    key: str
    unit: str
    base: float | None
    cand: float | None
    #: the coarser of the two figures' resolutions (what a difference can resolve)
    resolution: float | None = None
    #: two estimates the model cannot tell apart: why they are no change (None otherwise)
    no_change: str | None = None
    #: the bands' (low, high) of the two estimates (None: not banded)
    band_base: tuple[float, float] | None = None
    band_cand: tuple[float, float] | None = None

    @property
    def delta(self) -> float | None:
        if self.base is None or self.cand is None:
            return None
        return self.cand - self.base

    @property
    def pct(self) -> float | None:
        d = self.delta
        if d is None or not self.base:
            return None
        return 100.0 * d / abs(self.base)

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "unit": self.unit,
            "base": self.base,
            "cand": self.cand,
            "delta": self.delta,
            "pct": self.pct,
            "resolution": self.resolution,
            # optional: estimates with their model's band
            **(
                {}
                if self.band_base is None and self.band_cand is None
                else {
                    "band": {
                        "base": None if self.band_base is None else list(self.band_base),
                        "cand": None if self.band_cand is None else list(self.band_cand),
                    },
                    "no_change": self.no_change is not None,
                    "no_change_reason": self.no_change,
                }
            ),
        }


@dataclass(frozen=True)
class Comparison:
    base: BundleManifest
    cand: BundleManifest
    differences: tuple[DimensionDiff, ...]
    totals: tuple[MetricDelta, ...]
    layer_deltas: Mapping[str, tuple[MetricDelta, ...]]  # figure key -> deltas, largest first
    figures_base: Mapping[str, Figure]
    figures_cand: Mapping[str, Figure]
    validity_base: str
    validity_cand: str

    @property
    def blocking(self) -> tuple[DimensionDiff, ...]:
        return tuple(d for d in self.differences if d.effect is Effect.BLOCKING)

    @property
    def comparable(self) -> bool:
        return not self.blocking

    def as_dict(self, top: int | None = None) -> dict[str, Any]:
        return {
            "base": {
                "path": str(self.base.root),
                "run_id": self.base.run_id,
                "validity": self.validity_base,
            },
            "cand": {
                "path": str(self.cand.root),
                "run_id": self.cand.run_id,
                "validity": self.validity_cand,
            },
            "comparable": self.comparable,
            "differences": [d.as_dict() for d in self.differences],
            "totals": [t.as_dict() for t in self.totals],
            "layers": {
                key: [d.as_dict() for d in deltas[:top]]
                for key, deltas in self.layer_deltas.items()
            },
        }


@dataclass(frozen=True)
class ThresholdRule:
    pattern: str
    direction: Direction
    max_regression_pct: float | None = None
    max_regression_abs: float | None = None
    missing: MissingPolicy = MissingPolicy.FAIL
    unit: str | None = None

    def allowance(self, base: float) -> float:
        """The larger of the relative and the absolute allowance (0 when neither is set)."""
        pct = 0.0 if self.max_regression_pct is None else abs(base) * self.max_regression_pct / 100
        return max(pct, self.max_regression_abs or 0.0)

    def regression(self, base: float, cand: float) -> float:
        """How much worse ``cand`` is than ``base`` (negative: better)."""
        if self.direction == Direction.SMALLER:
            return cand - base
        if self.direction == Direction.LARGER:
            return base - cand
        return abs(cand - base)


@dataclass(frozen=True)
class Thresholds:
    rules: tuple[ThresholdRule, ...]
    path: Path | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class Check:
    key: str
    pattern: str
    status: Verdict
    message: str
    base: float | None = None
    cand: float | None = None
    regression: float | None = None
    allowance: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "pattern": self.pattern,
            "status": self.status.value,
            "message": self.message,
            "base": self.base,
            "cand": self.cand,
            "regression": self.regression,
            "allowance": self.allowance,
        }


@dataclass(frozen=True)
class Evaluation:
    verdict: Verdict
    checks: tuple[Check, ...]
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return VERDICT_EXIT[self.verdict]

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "checks": [c.as_dict() for c in self.checks],
            "notes": list(self.notes),
        }


def figures(summary: Summary) -> dict[str, Figure]:
    """Every figure of a summary by key: headline metrics by name, layer figures as
    ``layers/<layer>/<figure>``."""
    return {key: Figure.of(metric) for key, metric in summary.figures().items()}


def _delta(key: str, base: Mapping[str, Figure], cand: Mapping[str, Figure]) -> MetricDelta:
    fb, fc = base.get(key), cand.get(key)
    unit = (fb or fc).unit if (fb or fc) is not None else ""  # type: ignore[union-attr]
    steps = [f.resolution for f in (fb, fc) if f is not None and f.resolution is not None]
    return MetricDelta(
        key,
        unit,
        fb.value if fb else None,
        fc.value if fc else None,
        max(steps, default=None),
        unchanged_estimate(key, base, cand),
        fb.bounds if fb else None,
        fc.bounds if fc else None,
    )


def _manifest(bundle: ResultBundle) -> BundleManifest:
    if bundle.manifest is None:  # pragma: no cover - read_bundle verifies by default
        raise ReportError(f"{bundle.path}: the bundle was not verified")
    return bundle.manifest


def compare_bundles(base_dir: Path, cand_dir: Path) -> Comparison:
    """Verify and read both bundles, of any version this tool reads (``ReportError`` if
    either fails), and diff them."""
    read_base, read_cand = read_bundle(Path(base_dir)), read_bundle(Path(cand_dir))
    base, cand = _manifest(read_base), _manifest(read_cand)
    sb, sc = read_base.summary, read_cand.summary
    fb, fc = figures(sb), figures(sc)
    cycle_keys = list(dict.fromkeys((sb.cycles_name, sc.cycles_name)))
    totals = tuple(
        _delta(key, fb, fc)
        for key in (TOTAL_KEYS[0], *cycle_keys, ESTIMATED, *TOTAL_KEYS[1:])
        if key in fb or key in fc
    )
    by_figure: dict[str, list[MetricDelta]] = {}
    for key in dict.fromkeys([*fb, *fc]):
        if not key.startswith(LAYER_PREFIX):
            continue
        figure_key = key.rsplit("/", 1)[1]
        by_figure.setdefault(figure_key, []).append(_delta(key, fb, fc))
    layer_deltas = {
        k: tuple(sorted(v, key=lambda d: -abs(d.delta) if d.delta is not None else 0.0))
        for k, v in by_figure.items()
    }
    return Comparison(
        base=base,
        cand=cand,
        differences=differences(read_base.table_facts(), read_cand.table_facts()),
        totals=totals,
        layer_deltas=layer_deltas,
        figures_base=fb,
        figures_cand=fc,
        validity_base=sb.validity.status.value,
        validity_cand=sc.validity.status.value,
    )


def parse_thresholds(
    doc: Any, *, path: Path | None = None, sha256: str | None = None
) -> Thresholds:
    validate_document(SchemaName.THRESHOLDS, doc, where=str(path) if path else "thresholds")
    rules = []
    for pattern, raw in doc["metrics"].items():
        rules.append(
            ThresholdRule(
                pattern=pattern,
                direction=Direction(raw["direction"]),
                max_regression_pct=raw.get("max_regression_pct"),
                max_regression_abs=raw.get("max_regression_abs"),
                missing=MissingPolicy(raw.get("missing", MissingPolicy.FAIL.value)),
                unit=raw.get("unit"),
            )
        )
    return Thresholds(tuple(rules), path, sha256)


def load_thresholds(path: Path) -> Thresholds:
    """Read and validate a thresholds file (``ReportError`` with the violations)."""
    try:
        raw = Path(path).read_bytes()
        doc = json.loads(raw)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(
            f"Cannot read thresholds file {path}: {exc}",
            hint="Pass a JSON file matching aidge_deploy/schemas/thresholds.schema.json.",
        ) from exc
    return parse_thresholds(doc, path=Path(path), sha256=hashlib.sha256(raw).hexdigest())


def _missing(key: str, rule: ThresholdRule, why: str) -> Check | None:
    if rule.missing == MissingPolicy.IGNORE:
        return None
    status = Verdict.FAIL if rule.missing == MissingPolicy.FAIL else Verdict.WARN
    return Check(key, rule.pattern, status, f"{key}: {why}")


def _check(
    key: str,
    rule: ThresholdRule,
    fb: Figure | None,
    fc: Figure | None,
    noise: float = 0.0,
    basis: str = "",
) -> Check | None:
    if fb is None or fc is None or fb.value is None or fc.value is None:
        side = "baseline" if fb is None or fb.value is None else "candidate"
        return _missing(key, rule, f"no value in the {side}")
    units = {fb.unit, fc.unit}
    if len(units) > 1 or (rule.unit is not None and rule.unit not in units):
        return Check(
            key,
            rule.pattern,
            Verdict.FAIL,
            f"{key}: unit mismatch ({fb.unit} vs {fc.unit}"
            + (f", expected {rule.unit})" if rule.unit else ")"),
        )
    regression = rule.regression(fb.value, fc.value)
    # a measured figure's own spread (``noise``) widens the allowance: noise is no regression
    allowance = max(rule.allowance(fb.value), noise)
    failed = regression > allowance
    verb = "regressed" if failed else "within allowance"
    # each figure to its own timer's step, never finer; their difference to the coarser step
    step = max((f.resolution for f in (fb, fc) if f.resolution is not None), default=None)

    def shown(value: float, resolution: float | None) -> str:
        if resolution is None:
            return f"{value:.6g}"
        return format_figure(value, fb.unit, resolution, with_unit=False)

    return Check(
        key,
        rule.pattern,
        Verdict.FAIL if failed else Verdict.PASS,
        f"{key}: {shown(fb.value, fb.resolution)} -> {shown(fc.value, fc.resolution)} "
        f"{fb.unit} ({rule.direction.value} is better; regression {shown(regression, step)}, "
        f"allowed {allowance:.6g}{basis}): {verb}",
        fb.value,
        fc.value,
        regression,
        allowance,
    )


def evaluate(comparison: Comparison, thresholds: Thresholds) -> Evaluation:
    """Apply every rule to every figure it matches; the worst check decides the verdict."""
    return evaluate_figures(
        comparison.figures_base,
        comparison.figures_cand,
        thresholds,
        differences=comparison.differences,
        validity=(comparison.validity_base, comparison.validity_cand),
    )


def evaluate_figures(
    figures_base: Mapping[str, Figure],
    figures_cand: Mapping[str, Figure],
    thresholds: Thresholds,
    *,
    differences: Sequence[DimensionDiff] = (),
    validity: tuple[str, str] = ("valid", "valid"),
    noise: Mapping[str, float] | None = None,
    basis: Mapping[str, str] | None = None,
    not_gated: Mapping[str, str] | None = None,
) -> Evaluation:
    """``evaluate`` on two sets of figures (two bundles, or a result and its history).

    ``noise`` widens a figure's allowance to the spread of its earlier measurements and
    ``basis`` says in the message what the baseline value is (both by figure key);
    ``not_gated`` names the figures whose series is too noisy to gate, and why: they are
    said (a warning), never failed.
    """
    keys = list(dict.fromkeys([*figures_base, *figures_cand]))
    checks: list[Check] = []
    # an instrument differs (comparability.Effect.FIGURES): its figures are not compared
    instruments = [
        d for d in differences if d.name in BY_NAME and BY_NAME[d.name].effect is Effect.FIGURES
    ]
    for rule in thresholds.rules:
        matched = [k for k in keys if fnmatch.fnmatchcase(k, rule.pattern)]
        if not matched:
            missing = _missing(rule.pattern, rule, "no figure of either bundle matches")
            if missing is not None:
                checks.append(missing)
            continue
        for key in matched:
            if key in (not_gated or {}):
                reason = (not_gated or {})[key]
                checks.append(Check(key, rule.pattern, Verdict.WARN, f"{key}: not gated, {reason}"))
                continue
            left_out = next((d for d in instruments if d.concerns(key)), None)
            if left_out is not None:
                checks.append(
                    Check(key, rule.pattern, Verdict.WARN, f"{key}: {_not_compared(left_out)}")
                )
                continue
            unchanged = unchanged_estimate(key, figures_base, figures_cand)
            if unchanged is not None:  # the model cannot tell them apart: no regression
                fb, fc = figures_base[key], figures_cand[key]
                checks.append(
                    Check(
                        key, rule.pattern, Verdict.PASS, f"{key}: {unchanged}", fb.value, fc.value
                    )
                )
                continue
            check = _check(
                key,
                rule,
                figures_base.get(key),
                figures_cand.get(key),
                (noise or {}).get(key, 0.0),
                (basis or {}).get(key, ""),
            )
            if check is not None:
                checks.append(check)
    notes = []
    for side, status in (("baseline", validity[0]), ("candidate", validity[1])):
        if status == "invalid":
            notes.append(f"the {side} bundle is invalid: its figures cannot be trusted")
    statuses = {c.status for c in checks}
    if Verdict.FAIL in statuses:
        verdict = Verdict.FAIL
    elif Verdict.WARN in statuses or notes:
        verdict = Verdict.WARN
    else:
        verdict = Verdict.PASS
    return Evaluation(verdict, tuple(checks), tuple(notes))


def _not_compared(diff: Difference) -> str:
    """Why a figure of an instrument that differs between the runs is not compared."""
    if diff.name == "time_model":
        return (
            f"not compared, the times come from different models ({diff.base} vs {diff.cand}; "
            "--timing cpi1 reproduces the older figure)"
        )
    if diff.name == "power_source":  # an estimate against a measurement, or two instruments
        return f"not compared, the power monitors differ ({diff.base} vs {diff.cand})"
    return f"not compared, the {diff.label} differs ({diff.base} vs {diff.cand})"


def not_comparable_message(diffs: Sequence[DimensionDiff]) -> str:
    return "; ".join(f"{d.label} differs ({d.base} vs {d.cand})" for d in diffs)


@dataclass(frozen=True)
class CompareOutcome:
    """``compare``'s answer: the comparison, its evaluation against thresholds (if any),
    and the exit status the CLI gives it."""

    comparison: Comparison
    evaluation: Evaluation | None
    thresholds_sha256: str | None = None

    @property
    def exit_code(self) -> int:
        if not self.comparison.comparable:
            return EXIT_NOT_COMPARABLE
        return EXIT_PASS if self.evaluation is None else self.evaluation.exit_code

    @property
    def error(self) -> str | None:
        """Why the bundles are not comparable (None when they are)."""
        if self.comparison.comparable:
            return None
        return f"not comparable: {not_comparable_message(self.comparison.blocking)}"

    def as_dict(self, top: int) -> dict[str, Any]:
        """``compare --json``: the comparison, and the thresholds' verdict or the error."""
        payload: dict[str, Any] = self.comparison.as_dict(top)
        if self.error is not None:
            payload["error"] = self.error
            return payload
        payload["thresholds"] = None if self.evaluation is None else self.evaluation.as_dict()
        if self.thresholds_sha256 is not None:
            payload["thresholds_sha256"] = self.thresholds_sha256
        return payload


def compare_with_thresholds(base: Path, cand: Path, thresholds: Path | None) -> CompareOutcome:
    """Compare two bundles and, when they are comparable, evaluate ``thresholds``."""
    comparison = compare_bundles(base, cand)
    rules = load_thresholds(thresholds) if thresholds is not None else None
    if rules is None or not comparison.comparable:
        return CompareOutcome(comparison, None, None if rules is None else rules.sha256)
    return CompareOutcome(comparison, evaluate(comparison, rules), rules.sha256)
