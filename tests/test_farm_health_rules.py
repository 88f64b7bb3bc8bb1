"""The health checks' rules on their own (``farm.health``, ``farm.golden``): which failed
jobs count against a board, when printed outputs are the golden ones, which figure a run
is held to, and the settings' bounds. The whole flow runs on a real farm in
``test_farm_health.py``."""

from __future__ import annotations

import numpy as np
import pytest

from aidge_deploy.results import DeployResult, Metric


def _result(output: list[np.ndarray] | None, *metrics: Metric) -> DeployResult:
    return DeployResult(
        output=output, metrics={}, memory_peak_bytes=None, timings=None, measurements=metrics
    )


def test_only_failures_that_are_not_the_users_count_against_a_board() -> None:
    from aidge_deploy.farm.failures import classify
    from aidge_deploy.farm.health import counts_against_board

    def counts(kind: str, error_type: str | None) -> bool:
        return counts_against_board(classify(kind, error_type).value)

    assert counts("deploy", "BoardFault")  # QEMU or the board died
    assert counts("deploy", "FlashError")
    assert counts("agent_lost", None)
    for theirs in ("BuildError", "ConfigError", "MemoryFitError", "ManifestError"):
        assert not counts("deploy", theirs), theirs
    assert not counts("config", "ConfigError")
    assert not counts_against_board(None)  # a job that did not fail


def test_golden_outputs_are_the_numpy_reference_within_the_tolerance() -> None:
    from aidge_deploy.farm.golden import GOLDEN_B, GOLDEN_W, GOLDEN_X, expected_outputs
    from aidge_deploy.farm.health import judge_outputs

    want = expected_outputs()
    assert want.tolist() == pytest.approx(np.maximum(GOLDEN_X @ GOLDEN_W.T + GOLDEN_B, 0)[0])
    assert want.min() == 0.0 and want.max() > 1.0  # the ReLU clips one, the others pass
    assert judge_outputs(_result([want.copy()])) is None
    off = want.copy()
    off[2] += 1e-2
    assert "outputs differ" in str(judge_outputs(_result([off])))
    assert "no outputs" in str(judge_outputs(_result(None)))
    assert "outputs differ" in str(judge_outputs(_result([want[:2]])))


def test_the_figure_is_the_boards_cycles_then_the_models_then_the_latency() -> None:
    from aidge_deploy.farm.health import figure_of

    latency = Metric("latency", 0.0148, "ms", "estimated", "per inference", resolution=4e-05)
    model = Metric("estimated_cycles", 369.0, "cycles", "estimated", "timing model")
    board = Metric("cycles", 400.0, "cycles", "silicon", "DWT")
    assert figure_of(_result(None, latency)) == (0.0148, "ms", "latency: estimated")
    assert figure_of(_result(None, latency, model)) == (
        369.0,
        "cycles",
        "estimated_cycles: estimated",
    )
    assert figure_of(_result(None, model, board))[0] == 400.0
    unavailable = Metric("cycles", None, "cycles", "silicon", "DWT", unavailable_reason="no DWT")
    assert figure_of(_result(None, unavailable, model))[0] == 369.0
    assert figure_of(_result(None)) is None


def test_health_settings_are_bounded() -> None:
    from aidge_deploy.farm.settings import HealthSettings

    assert HealthSettings().failures == 3 and HealthSettings().clean == 2
    for bad in ({"failures": 0}, {"clean": 0}, {"band": 0.0}, {"band": 1.5}, {"interval_s": -1}):
        with pytest.raises(ValueError):
            HealthSettings(**bad)  # type: ignore[arg-type]
