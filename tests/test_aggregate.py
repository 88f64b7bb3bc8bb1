"""Reduction of per-iteration samples: methods, wrap/frozen rejection, and its bookkeeping."""

from __future__ import annotations

import math

import pytest

from aidge_deploy.config import Aggregation
from aidge_deploy.profiling.aggregate import (
    RejectReason,
    aggregate_rows,
    aggregate_samples,
)


def test_median_is_the_default_and_robust_to_an_outlier() -> None:
    agg = aggregate_samples([1.0, 1.1, 0.9, 50.0])
    assert agg.method == Aggregation.MEDIAN and agg.method_used == Aggregation.MEDIAN
    assert agg.value == pytest.approx(1.05)
    assert (agg.n_used, agg.n_rejected) == (4, 0)


def test_mean_and_trimmed() -> None:
    samples = [1.0, 2.0, 3.0, 10.0]
    assert aggregate_samples(samples, "mean").value == pytest.approx(4.0)
    trimmed = aggregate_samples(samples, Aggregation.TRIMMED)
    assert trimmed.value == pytest.approx(2.5)  # drops 1.0 and 10.0
    assert trimmed.method_used == Aggregation.TRIMMED


def test_trimmed_needs_three_samples_and_says_so() -> None:
    agg = aggregate_samples([1.0, 3.0], Aggregation.TRIMMED)
    assert agg.method == Aggregation.TRIMMED and agg.method_used == Aggregation.MEDIAN
    assert agg.value == pytest.approx(2.0)
    assert "needs at least 3" in agg.describe()


def test_wrapped_and_negative_counter_samples_are_rejected() -> None:
    agg = aggregate_samples([1000, 2**31 + 5, 1002, -3, 998], counter_bits=32)
    assert agg.value == pytest.approx(1000)
    assert (agg.n_used, agg.n_rejected) == (3, 2)
    assert dict(agg.rejected) == {RejectReason.WRAPPED: 1, RejectReason.NEGATIVE: 1}
    assert "2 rejected" in agg.describe()


def test_value_just_below_the_wrap_limit_is_kept() -> None:
    agg = aggregate_samples([2**31 - 1], counter_bits=32)
    assert agg.value == 2**31 - 1 and agg.n_rejected == 0


def test_timings_are_not_wrap_checked_but_nan_is_rejected() -> None:
    agg = aggregate_samples([3e9, 3e9, math.nan])
    assert agg.value == 3e9
    assert dict(agg.rejected) == {RejectReason.NOT_FINITE: 1}


def test_zero_timing_is_a_coarse_reading_not_a_frozen_one() -> None:
    agg = aggregate_samples([0.0, 1.0, 0.0], "mean")
    assert agg.n_rejected == 0 and agg.value == pytest.approx(1 / 3)


def test_zero_among_counter_readings_is_frozen_unless_all_are_zero() -> None:
    agg = aggregate_samples([0, 500, 502], counter_bits=32)
    assert dict(agg.rejected) == {RejectReason.FROZEN: 1} and agg.value == 501
    all_zero = aggregate_samples([0, 0, 0], counter_bits=32)
    assert all_zero.value == 0 and all_zero.n_rejected == 0


def test_everything_rejected_gives_no_value() -> None:
    agg = aggregate_samples([2**32 - 1, 2**31], counter_bits=32)
    assert agg.value is None and agg.n_used == 0 and agg.n_rejected == 2


def test_empty_series() -> None:
    agg = aggregate_samples([])
    assert agg.value is None and agg.n_total == 0


def test_rows_reject_frozen_rows_then_wrapped_values() -> None:
    rows = [
        {"cycles": 100, "inst": 80},
        {"cycles": 0, "inst": 0},  # counters not running this iteration
        {"cycles": 104, "inst": 2**31 + 1},  # inst wrapped
        {"cycles": 102, "inst": 82},
    ]
    out = aggregate_rows(rows, counter_bits=32)
    assert out["cycles"].value == 102 and dict(out["cycles"].rejected) == {RejectReason.FROZEN: 1}
    assert out["inst"].value == 81
    assert dict(out["inst"].rejected) == {RejectReason.FROZEN: 1, RejectReason.WRAPPED: 1}


def test_rows_all_frozen_keep_zero() -> None:
    out = aggregate_rows([{"a": 0}, {"a": 0}], "mean", counter_bits=32)
    assert out["a"].value == 0 and out["a"].n_rejected == 0


def test_rows_with_a_counter_missing_in_some_iterations() -> None:
    out = aggregate_rows([{"a": 1, "b": 5}, {"a": 3}], counter_bits=32)
    assert out["a"].n_used == 2 and out["b"].n_used == 1 and out["b"].value == 5


def test_result_is_frozen_and_serialisable() -> None:
    agg = aggregate_samples([1, 2, 3], counter_bits=32)
    with pytest.raises(AttributeError):
        agg.value = 0  # type: ignore[misc]
    assert agg.as_dict() == {
        "value": 2.0,
        "n_used": 3,
        "n_rejected": 0,
        "method": "median",
        "method_used": "median",
        "rejected": {},
    }
