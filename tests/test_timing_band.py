"""Every estimate carries the uncertainty band its timing model states (issue 34).

The band is data in each model's file (a band for integer and for float code, each with the
derivation that sizes it; the M4's widened on a board with flash wait states, for want of the
ART accelerator); it rides on the estimated cycles and the times made of them into the
summary, the reports, ``compare`` and the history; two estimates inside each other's band
with the same emulated instructions are "no change" in ``compare`` and in the history gate.
The real runs (two layouts of one export on an emulated board) are in test_timing_layout.py.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.comparability import INSTRUCTIONS
from aidge_deploy.history import HistoryStore, RunIdentity
from aidge_deploy.history.gate import GateStatus, check_regression
from aidge_deploy.history.identity import Comparability
from aidge_deploy.metrics import Band, Metric, Provenance
from aidge_deploy.profiling.timing import CORES, CodeKind, code_kind_of, load_model
from aidge_deploy.report.compare import Figure, Verdict, evaluate_figures, parse_thresholds

#: estimates may not grow at all: only the band rule lets a moved estimate pass
STRICT = parse_thresholds(
    {
        "schema_version": 1,
        "metrics": {
            "estimated_cycles": {"direction": "smaller", "max_regression_pct": 0},
            "emulated_instructions": {"direction": "smaller", "max_regression_pct": 0},
        },
    }
)


@pytest.mark.parametrize("core", CORES)
def test_every_model_states_its_band_with_a_derivation(core: str) -> None:
    model = load_model(core)
    for code in CodeKind:
        side = model.uncertainty.bands[code]
        band = model.band(code)
        assert 0 < band.below < 1 and 0 < band.above < 1
        assert len(side.derivation) > 40 and side.derivation in band.basis
        assert model.label in band.basis and code.value in band.basis


def test_the_m4_band_is_wider_on_float_code_and_on_flash_wait_states() -> None:
    m4 = load_model("cortex-m4")
    integer, flt = m4.band(CodeKind.INTEGER), m4.band(CodeKind.FLOAT)
    # the TRM sums the float hot loop to 40 cycles, GCC ~30, llvm-mca (LLVM) 1.64 x lower
    assert flt.below == pytest.approx(0.40) and flt.below > integer.below
    assert "40" in flt.basis and "30" in flt.basis and "1.64" in flt.basis
    # netduinoplus2: up to 2.07 x the zero-wait figure, the low side widened by it
    slow = m4.band(CodeKind.INTEGER, wait_states=True)
    assert slow.below == pytest.approx(1 - (1 - integer.below) / 2.07, abs=1e-4)
    assert slow.above == integer.above and "2.07" in slow.basis
    # a model without slow memory is not widened
    m55 = load_model("cortex-m55")
    assert m55.band(CodeKind.INTEGER, wait_states=True) == m55.band(CodeKind.INTEGER)


def test_the_listed_omissions_are_in_what_the_models_leave_out() -> None:
    m4 = " ".join(load_model("cortex-m4").leaves_out)
    assert "VDIV" in m4 and "27" in m4 and "errs high" in m4
    m55 = load_model("cortex-m55").leaves_out
    for words in (("shifted register operand", "errs low"), ("independent divides", "errs low"),
                  ("LE is charged", "errs high", "5 %")):  # fmt: skip
        assert any(all(w in item for w in words) for item in m55), words


def test_the_code_kind_follows_the_exports_inputs() -> None:
    assert code_kind_of(["int8_t"]) is CodeKind.INTEGER
    assert code_kind_of(["float"]) is CodeKind.FLOAT


def test_an_estimate_prints_three_digits_with_its_band() -> None:
    band = Band(0.10, 0.15, "M4 timing model, integer code: ...")
    cycles = Metric("estimated_cycles", 1_189_461, "cycles", Provenance.ESTIMATED, band=band)
    assert cycles.formatted() == "1.19 M cycles (−10 %/+15 %)"
    time = Metric(
        "latency", 47.673, "ms", Provenance.ESTIMATED, resolution=4e-5, band=Band(0.1, 0.1)
    )
    assert time.formatted() == "47.7 ms (±10 %)"
    # carried in files as fractions and bounds, read back the same
    entry = cycles.as_dict()
    assert entry["band"]["low"] == pytest.approx(1_070_514.9)
    assert entry["band"]["high"] == pytest.approx(1_367_880.15)
    assert Metric.from_dict(entry) == cycles
    # a measured figure has none, and prints as before
    plain = Metric("emulated_instructions", 1_128_239, "instructions", Provenance.EMULATED)
    assert "band" not in plain.as_dict() and plain.formatted() == "1,128,239 instructions"


def _estimate(cycles: float, instructions: float | None, band: Band | None) -> dict[str, Figure]:
    out = {"estimated_cycles": Figure(cycles, "cycles", "estimated", 1.0, band=band)}
    if instructions is not None:
        out[INSTRUCTIONS] = Figure(instructions, "instructions", "emulated")
    return out


BAND = Band(0.10, 0.10, "M4 timing model, integer code")


def test_estimates_inside_each_others_band_are_no_change_unless_instructions_changed() -> None:
    base = _estimate(1_000_000, 880_000, BAND)
    moved = _estimate(1_050_000, 880_000, BAND)  # +5 %: inside both bands, same program
    same = evaluate_figures(base, moved, STRICT)
    assert same.verdict is Verdict.PASS
    check = next(c for c in same.checks if c.key == "estimated_cycles")
    assert "no change" in check.message and "each inside the other's band" in check.message
    # one more instruction: the program changed, the estimate is compared as any figure
    changed = evaluate_figures(base, _estimate(1_050_000, 880_001, BAND), STRICT)
    assert changed.verdict is Verdict.FAIL
    check = next(c for c in changed.checks if c.key == "estimated_cycles")
    assert "regressed" in check.message and "no change" not in check.message
    # outside the band: a change even with the same instructions
    far = evaluate_figures(base, _estimate(1_200_000, 880_000, BAND), STRICT)
    assert far.verdict is Verdict.FAIL
    # without bands (older bundles) or without instructions: no claim of no change
    assert evaluate_figures(_estimate(1e6, 8e5, None), _estimate(1.05e6, 8e5, None), STRICT)\
        .verdict is Verdict.FAIL  # fmt: skip
    assert evaluate_figures(_estimate(1e6, None, BAND), _estimate(1.05e6, None, BAND), STRICT)\
        .verdict is Verdict.FAIL  # fmt: skip


def test_the_history_keeps_the_band_and_its_gate_says_no_change(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    comp = Comparability("emulated", "0.10.1", time_model="M4 timing model")
    ident = RunIdentity("t::band", "mps2-an386", dtype="int8", iterations=3)
    with HistoryStore(db) as store:
        store.add(ident, _estimate(1_000_000, 880_000, BAND), comp, source="test")
    # a history written before bands: its figure table lacks the columns; opening adds them
    with sqlite3.connect(db) as connection:
        for column in ("band_below", "band_above", "band_basis"):
            connection.execute(f"ALTER TABLE history_figures DROP COLUMN {column}")
    with HistoryStore(db) as store:
        old = store.accepted(ident)[0].figures["estimated_cycles"]
        assert old.value == 1_000_000 and old.band is None  # recorded, band lost with it
        store.add(ident, _estimate(1_000_000, 880_000, BAND), comp, source="test")
        kept = store.accepted(ident)[0].figures["estimated_cycles"]
        assert kept.band == BAND
        moved = check_regression(store, ident, comp, _estimate(1_050_000, 880_000, BAND), STRICT)
        assert moved.status is GateStatus.PASS and "no change" in moved.message
        grown = check_regression(store, ident, comp, _estimate(1_050_000, 900_000, BAND), STRICT)
        assert grown.status is GateStatus.FAIL
        failed = [c for c in grown.evaluation.checks if c.status is Verdict.FAIL]  # type: ignore[union-attr]
        assert {c.key for c in failed} == {"estimated_cycles", INSTRUCTIONS}
    # history list --json carries the band with its bounds (an estimate without it is "none")
    listed = CliRunner().invoke(app, ["history", "list", "--history", str(db), "--json"])
    assert listed.exit_code == 0, listed.output
    figures = [r["figures"]["estimated_cycles"] for r in json.loads(listed.output)]
    assert figures[0]["band"] is None
    assert figures[1]["band"] == BAND.as_dict(1_000_000)
    assert figures[1]["band"]["low"] < 1_000_000 < figures[1]["band"]["high"]
