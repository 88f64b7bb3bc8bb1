"""Change-point detection in the results history: noise measured per series, steps found by
PELT (``ruptures``) beside the median + MAD rule, and a series made noisy classed unstable —
said by the gate, never failed."""

from __future__ import annotations

import random
from pathlib import Path

from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.history.changepoint import (
    UNSTABLE_PCT,
    Stability,
    change_points,
    series_noise,
)
from aidge_deploy.history.gate import GateStatus, check_regression
from aidge_deploy.history.identity import Comparability, RunIdentity
from aidge_deploy.history.series import series_of
from aidge_deploy.history.store import HistoryStore
from aidge_deploy.report.compare import Figure, Verdict, parse_thresholds
from aidge_deploy.testing.assertions import DEFAULT_THRESHOLDS

GCC = {"c++": "c++ (Debian 12.2.0-14+deb12u1) 12.2.0"}
COMP = Comparability("host", "0.10.1", GCC)
IDENT = RunIdentity("t::latency", "host", iterations=10)


def _noisy(rng: random.Random, n: int, level: float, pct: float) -> list[float]:
    return [rng.gauss(level, level * pct / 100) for _ in range(n)]


def test_a_5_percent_step_is_found_where_it_is_and_a_flat_series_has_none() -> None:
    rng = random.Random(3)
    values = _noisy(rng, 20, 1.0, 1.0) + _noisy(rng, 20, 1.05, 1.0)
    assert change_points(values, "host") == [20]
    assert change_points(_noisy(rng, 40, 1.0, 1.0), "host") == []
    # exact figures: every change is a change
    assert change_points([5, 5, 6, 6, 6, 7], "emulated") == [2, 5]
    assert change_points([1.0, 1.1, 1.0], "host") == []  # too short to know its noise


def test_each_series_gets_its_noise_and_a_noisy_one_is_unstable() -> None:
    rng = random.Random(5)
    quiet = series_noise(_noisy(rng, 30, 2.0, 1.0), "host")
    assert quiet.stability is Stability.STABLE
    assert quiet.pct is not None and 0.5 < quiet.pct < 1.5  # the 1 % it was made with
    noisy = series_noise(_noisy(rng, 30, 2.0, 12.0), "host")
    assert noisy.stability is Stability.UNSTABLE and noisy.pct is not None
    assert noisy.pct > UNSTABLE_PCT
    assert "too noisy to gate" in noisy.describe()
    # a step is no noise: the level moves once, the noise every run
    stepped = series_noise([1.0, 1.01, 0.99, 1.0] * 5 + [2.0, 2.01, 1.99, 2.0] * 5, "host")
    assert stepped.stability is Stability.STABLE
    assert series_noise([10, 10, 11], "emulated").stability is Stability.EXACT
    assert series_noise([1.0, 1.2], "host").stability is Stability.UNKNOWN


def _record(store: HistoryStore, value: float) -> int:
    figures = {"latency": Figure(value, "ms", "host", 0.001)}
    return store.add(IDENT, figures, COMP, source="test").id


def test_a_series_made_noisy_is_said_unstable_not_failed(tmp_path: Path) -> None:
    rules = parse_thresholds(dict(DEFAULT_THRESHOLDS))  # latency may grow 10 %
    rng = random.Random(11)
    with HistoryStore(tmp_path / "h.db") as store:
        for value in _noisy(rng, 10, 1.0, 1.0):
            _record(store, value)
        candidate = {"latency": Figure(1.3, "ms", "host", 0.001)}
        quiet = check_regression(store, IDENT, COMP, candidate, rules)
        assert quiet.status is GateStatus.FAIL, quiet.message  # a 30 % step of a quiet series
        for value in _noisy(rng, 10, 1.0, 15.0):  # the machine got noisy
            _record(store, value)
        noisy = check_regression(store, IDENT, COMP, candidate, rules)
        assert noisy.status is GateStatus.PASS, noisy.message
        assert noisy.evaluation is not None and noisy.evaluation.verdict is Verdict.WARN
        assert "latency: not gated, its series is unstable: noise" in noisy.message
        assert "too noisy to gate" in noisy.message
        (series,) = [s for s in series_of(IDENT, store.records()) if s.metric == "latency"]
        assert series.noise is not None and series.noise.stability is Stability.UNSTABLE


def test_history_list_says_unstable_series_and_change_points(tmp_path: Path) -> None:
    rng = random.Random(2)
    db = tmp_path / "h.db"
    with HistoryStore(db) as store:
        ids = [_record(store, v) for v in _noisy(rng, 8, 1.0, 0.5) + _noisy(rng, 8, 1.2, 0.5)]
        (series,) = [s for s in series_of(IDENT, store.records()) if s.metric == "latency"]
        assert series.change_points == (ids[8],)
        for value in _noisy(rng, 20, 1.0, 20.0):
            _record(store, value)
    result = CliRunner().invoke(app, ["history", "list", "--history", str(db)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "change points (PELT) in latency of t::latency on host" in text
    assert f"record {ids[8]}" in text
    assert "unstable latency of t::latency on host" in text and "too noisy to gate" in text
