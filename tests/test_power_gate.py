"""The gate detector on messy gates, and ``power analyse`` on JLS captures written here.

No Joulescope exists on this machine: the captures are JLS v2 files written with ``pyjls``
as the instrument's recorder writes them (current, voltage, ``gpi[0]``), each named after
what it holds, with a current profile whose energy inside the true window is known
analytically. Each one is either analysed within 0.1 % of that energy, or refused as a
validity failure with its own ``power.*`` code and exit status 5 — never a wrong figure
published as valid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.errors import ConfigError
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.gate import GateScanner, find_window, gate_settings
from aidge_deploy.power.protocol import WindowRule
from aidge_deploy.profiling.validity import IssueCode
from aidge_deploy.report.summary import unlabelled_numbers
from envparts import missing
from power_support import energy_of, write_capture

try:
    import pyjls  # noqa: F401
except ImportError:
    missing("pyjls is not installed (it comes with the package's dependencies)")

IDLE_A, ACTIVE_A, VOLTS = 0.010, 0.030, 3.3
N = 1000  # inferences the captures' windows hold


# --------------------------------------------------------------------------- the detector


def _detect(
    gate: np.ndarray,
    rate: float = 1e5,
    expected_s: float | None = None,
    chunk: int = 777,
    rule: WindowRule = WindowRule.MATCH,
    **limits: float,
) -> Any:
    scanner = GateScanner(rate, "gpi[0]", "test")
    for start in range(0, len(gate), chunk):  # chunks cut the edges anywhere
        scanner.feed(gate[start : start + chunk])
    settings = gate_settings(rate, expected_s, **limits)
    return find_window(scanner, settings, expected_s=expected_s, rule=rule)


def _gate(n: int, *pulses: tuple[int, int]) -> np.ndarray:
    gate = np.zeros(n, dtype=np.uint8)
    for lo, hi in pulses:
        gate[lo:hi] = 1
    return gate


def test_glitches_and_bounce_are_not_edges_and_dropouts_are_bridged() -> None:
    gate = _gate(20_000, (5_000, 15_000))
    gate[1_000] = 1  # a one-sample glitch long before the edge
    gate[4_990:4_992] = 1  # a two-sample glitch just before it
    gate[5_001:5_008:2] = 0  # bounce after the rising edge
    gate[15_001:15_008:2] = 1  # bounce after the falling edge
    gate[7_000:15_000:800] = 0  # ten one-sample dropouts inside the window
    gate[9_000:9_008] = 0  # and an 80 µs one (bridged: up to 1e-3 x the 0.1 s window)
    found = _detect(gate, expected_s=0.1)
    # the edges settle where the level stops bouncing
    assert (found.start, found.end) == (5_008, 15_008)
    report = found.report
    assert report.glitch_count == 2 + 4 + 4 + 10  # glitches, bounces, 1-sample dropouts
    assert report.dropout_count == 1 and report.dropouts[0].width_s == pytest.approx(8e-5)
    assert report.pulse_count == 1 and report.chosen == 0
    assert report.edges == int(np.count_nonzero(np.diff(gate.astype(int))))


def test_hysteresis_on_an_analog_gate() -> None:
    """A level between the thresholds keeps the level the gate had (0.5 is neither)."""
    gate = np.zeros(10_000, dtype=np.float32)
    gate[2_000:8_000] = 1.0
    gate[2_000:2_100] = 0.5  # rising slowly through the band: not high yet
    gate[4_000:4_100] = 0.5  # a sag inside the window: still high
    found = _detect(gate, expected_s=None)
    assert (found.start, found.end) == (2_100, 8_000)
    assert found.report.edges == 2


def test_the_window_is_the_pulse_consistent_with_n_times_the_latency() -> None:
    gate = _gate(100_000, (10_000, 20_000), (40_000, 70_000))
    assert (_detect(gate, expected_s=0.3).start) == 40_000
    assert (_detect(gate, expected_s=0.1).start) == 10_000
    # no clean latency to choose with: two pulses are ambiguous, never a guess
    with pytest.raises(PowerCaptureError) as info:
        _detect(gate, expected_s=None)
    assert info.value.code is IssueCode.POWER_GATE_AMBIGUOUS
    assert info.value.gate is not None and info.value.gate.pulse_count == 2
    # nothing lasts N x the latency: a mismatch, not the nearest pulse
    with pytest.raises(PowerCaptureError) as info:
        _detect(gate, expected_s=0.2)
    assert info.value.code is IssueCode.POWER_WINDOW_MISMATCH
    # windows of whole program runs: at least N x clean latency (both qualify here)
    with pytest.raises(PowerCaptureError, match="2 gate pulses"):
        _detect(gate, expected_s=0.05, rule=WindowRule.AT_LEAST)
    assert _detect(gate, expected_s=0.2, rule=WindowRule.AT_LEAST).start == 40_000


@pytest.mark.parametrize(
    ("gate", "code", "match"),
    [
        (_gate(5_000), IssueCode.POWER_GATE_MISSING, "never opened"),
        (_gate(5_000, (0, 3_000)), IssueCode.POWER_GATE_MISSING, "already high"),
        (np.ones(5_000), IssueCode.POWER_GATE_MISSING, "already high .* never fell"),
        (_gate(5_000, (2_000, 5_000)), IssueCode.POWER_GATE_UNCLOSED, "never closed"),
        # a fall two samples before the end: too soon to tell it from a dropout
        (_gate(5_000, (2_000, 4_998)), IssueCode.POWER_GATE_UNCLOSED, "never closed"),
        (np.arange(2_500_000) % 2, IssueCode.POWER_GATE_AMBIGUOUS, "noise, not a gate"),
    ],
    ids=[
        "never-opens",
        "already-high",
        "always-high",
        "never-closes",
        "closes-at-the-end",
        "noise",
    ],
)
def test_gate_failures_have_their_own_codes(gate: np.ndarray, code: IssueCode, match: str) -> None:
    with pytest.raises(PowerCaptureError, match=match) as info:
        _detect(gate, chunk=1 << 20)
    assert info.value.code is code and info.value.hint


def test_limits_come_from_the_plan_and_can_be_given() -> None:
    planned = gate_settings(1e6, 5.0)
    assert planned.min_pulse_s == pytest.approx(5e-4) and planned.max_dropout_s == pytest.approx(
        5e-3
    )
    assert gate_settings(1e6).min_pulse_s == pytest.approx(4e-6)  # 4 samples, no plan
    assert gate_settings(1e3, 5.0).min_pulse_s == pytest.approx(4e-3)  # 4 samples dominate
    given = gate_settings(1e6, 5.0, min_pulse_s=1e-5, max_dropout_s=0.0)
    assert (given.min_pulse_s, given.max_dropout_s) == (1e-5, 0.0) and "given" in given.basis
    with pytest.raises(ConfigError):
        gate_settings(1e6, min_pulse_s=0)


# --------------------------------------------------------------- captures through the CLI


def _analyse(path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(app, ["power", "analyse", str(path), "--json", *args])
    try:
        return res.exit_code, json.loads(res.stdout)
    except json.JSONDecodeError:
        raise AssertionError(res.output) from None


def _profile(
    rate: int, seconds: float, window: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray, float]:
    """Idle current, active inside ``window`` (s); the gate high over it; the analytic
    energy inside it (J)."""
    n = int(rate * seconds)
    lo, hi = int(window[0] * rate), int(window[1] * rate)
    current = np.full(n, IDLE_A, dtype=np.float32)
    current[lo:hi] = ACTIVE_A
    # a little structure inside the window: a square wave at 1 kHz on top
    current[lo:hi] += np.where((np.arange(hi - lo) // max(1, rate // 2000)) % 2, 0.004, 0.0).astype(
        np.float32
    )
    return current, _gate(n, (lo, hi)), energy_of(current, lo, hi, rate, VOLTS)


def _assert_energy(out: dict[str, Any], energy_j: float) -> None:
    metrics = {m["name"]: m for m in out["metrics"]}
    per_inference = metrics["energy_per_inference"]
    assert per_inference["unit"] == "uJ" and per_inference["provenance"] == "silicon"
    assert abs(per_inference["value"] - energy_j / N * 1e6) <= 1e-3 * energy_j / N * 1e6
    assert out["inferences"] == {"value": N, "unit": "inferences", "provenance": "static"}
    assert unlabelled_numbers(out) == []  # every figure of the JSON has unit and provenance


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, float]]:
    """The acceptance captures, written once: name -> (file, analytic energy J or 0)."""
    root = tmp_path_factory.mktemp("captures")
    out: dict[str, tuple[Path, float]] = {}

    def write(
        name: str, current: np.ndarray, gate: np.ndarray | None, energy: float, **kw: Any
    ) -> None:
        path = root / f"{name}.jls"
        write_capture(
            path, rate=kw.pop("rate", 100_000), current=current, gate=gate, volts=VOLTS, **kw
        )
        out[name] = (path, energy)

    rate = 100_000
    current, gate, energy = _profile(rate, 1.5, (0.4, 1.2))
    glitchy = gate.copy()
    glitchy[int(0.2 * rate)] = 1  # one sample high, 0.2 s before the real edge
    write("glitch_1_sample", current, glitchy, energy)
    fast = 1_000_000
    current_f, gate_f, energy_f = _profile(fast, 1.0, (0.3, 0.8))
    gate_f[int(0.1 * fast) : int(0.1 * fast) + 2] = 1  # 2 µs at 1 MS/s before the edge
    write("glitch_2us", current_f, gate_f, energy_f, rate=fast)
    bouncy = gate.copy()
    lo, hi = int(0.4 * rate), int(1.2 * rate)
    bouncy[lo + 1 : lo + 8 : 2] = 0  # contact bounce after the rising edge ...
    bouncy[hi + 1 : hi + 8 : 2] = 1  # ... and after the falling one
    write("bounce_both_edges", current, bouncy, energy)
    dropped = gate.copy()
    dropped[lo + 1000 : hi : (hi - lo) // 11][:10] = 0  # ten 1-sample dropouts inside
    dropped[lo + 30_000 : lo + 30_040] = 0  # and one of 0.4 ms (bridged)
    write("dropouts_in_window", current, dropped, energy)
    twice = gate.copy()
    twice[int(0.05 * rate) : int(0.3 * rate)] = 1  # a second window before the real one
    write("two_candidate_windows", current, twice, energy)
    open_gate = gate.copy()
    open_gate[lo:] = 1
    write("gate_never_closes", current, open_gate, 0.0)
    write("no_gate", current, None, 0.0)
    tiny = np.zeros(len(gate), dtype=np.uint8)
    tiny[lo : lo + 5] = 1  # a window of 5 samples
    write("window_of_5_samples", current, tiny, 0.0, gate_rate_factor=1)
    write("annotated_n", current, gate, energy, annotation={"inferences": N})
    whole = (root / "glitch_1_sample.jls").read_bytes()
    (root / "truncated.jls").write_bytes(whole[: len(whole) * 2 // 3])
    out["truncated"] = (root / "truncated.jls", 0.0)
    (root / "random_bytes.jls").write_bytes(np.random.default_rng(7).bytes(200_000))
    out["random_bytes"] = (root / "random_bytes.jls", 0.0)
    return out


@pytest.mark.parametrize(
    "name", ["glitch_1_sample", "glitch_2us", "bounce_both_edges", "dropouts_in_window"]
)
def test_messy_gates_give_the_analytic_energy(
    captures: dict[str, tuple[Path, float]], name: str
) -> None:
    path, energy = captures[name]
    status, out = _analyse(path, "--inferences", str(N))
    assert status == 0, out["issues"]
    _assert_energy(out, energy)
    gate = out["gate_detection"]
    assert gate["pulses"]["value"] == 1 and gate["chosen_pulse"] == 0
    assert gate["glitches"]["value"] + gate["dropouts"]["value"] >= 1  # what it ignored, said
    assert not [i for i in out["issues"] if i["severity"] == "error"]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("two_candidate_windows", "power.gate_ambiguous"),
        ("gate_never_closes", "power.gate_unclosed"),
        ("no_gate", "power.gate_missing"),
        ("truncated", "power.capture_truncated"),
        ("random_bytes", "power.capture_not_jls"),
        ("window_of_5_samples", "power.samples_too_few"),
    ],
)
def test_bad_captures_are_validity_failures_with_their_own_code(
    captures: dict[str, tuple[Path, float]], name: str, code: str
) -> None:
    path, _ = captures[name]
    status, out = _analyse(path, "--inferences", str(N))
    assert status == 5, out
    assert code in [i["code"] for i in out["issues"]], out["issues"]
    metrics = {m["name"]: m for m in out["metrics"]}
    # no window, or an invalid one: no figure at all, never 0 (nor the window's energy)
    assert metrics["energy_per_inference"]["value"] is None
    assert code in metrics["energy_per_inference"]["unavailable_reason"]


def test_two_windows_are_told_apart_by_the_clean_latency(
    captures: dict[str, tuple[Path, float]],
) -> None:
    path, energy = captures["two_candidate_windows"]
    # the real window lasts 0.8 s = N x 0.8 ms; the other 0.25 s
    status, out = _analyse(path, "--inferences", str(N), "--clean-latency-ms", "0.8")
    assert status == 0, out["issues"]
    _assert_energy(out, energy)
    assert out["gate_detection"]["pulses"]["value"] == 2


def test_n_comes_from_the_user_or_the_capture_never_from_the_tool(
    captures: dict[str, tuple[Path, float]],
) -> None:
    path, energy = captures["annotated_n"]
    status, out = _analyse(path)  # the file records its N
    assert status == 0 and out["plan"]["inferences_from"] == "recorded in the capture"
    _assert_energy(out, energy)
    res = CliRunner().invoke(app, ["power", "analyse", str(path), "--inferences", "999"])
    assert res.exit_code == 2 and "disagree" in res.output
    plain, _ = captures["glitch_1_sample"]
    res = CliRunner().invoke(app, ["power", "analyse", str(plain)], env={"COLUMNS": "200"})
    assert res.exit_code == 2
    assert "cannot tell how many inferences this capture holds" in res.output
    # a file that is not JLS says so even without N
    random, _ = captures["random_bytes"]
    status, out = _analyse(random)
    assert status == 5 and out["error"] == "power.capture_not_jls"


def test_every_edge_is_reported_in_the_terminal(captures: dict[str, tuple[Path, float]]) -> None:
    path, _ = captures["bounce_both_edges"]
    res = CliRunner().invoke(
        app, ["power", "analyse", str(path), "--inferences", str(N)], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "Gate gpi[0]:" in text and "8 glitch(es) ignored" in text and "1 pulse(s)" in text
