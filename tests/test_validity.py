"""Validity assessment: the issue-code registry and each check on real-shaped results.

The results below carry the figures of real captures from ``aidge_contract.md`` (the QEMU
``aidge-uart-benchmark/v1`` sample and the host ``aidge-stdout-benchmark/v1`` sample).
"""

from __future__ import annotations

from typing import Any

import pytest

from aidge_deploy.profiling.validity import (
    ISSUE_SPECS,
    IssueCode,
    Severity,
    ValidityStatus,
)
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.report.assess import assess
from aidge_deploy.results import DeployResult, LayerFigure, Metric, Provenance, TimingSeries
from aidge_deploy.timing import TimingInfo, protocol_timing

UART = "aidge-uart-benchmark/v1"
HOST = "aidge-stdout-benchmark/v1"


def _result(
    *,
    protocol: str = HOST,
    provenance: Provenance = Provenance.HOST,
    timings: list[float] | None = None,
    cycles: list[int] | None = None,
    layers: tuple[LayerFigure, ...] = (),
    binary: dict[str, Any] | None = None,
    measurements: tuple[Metric, ...] = (),
    timing: TimingInfo | None = None,
    app: dict[str, Any] | None = None,
) -> DeployResult:
    emulated = provenance == Provenance.EMULATED
    name = "emulated_instructions" if emulated else "cycles"
    bits = None if emulated else 32
    if timing is None and provenance != Provenance.EMULATED:
        timing = protocol_timing(
            get_protocol(protocol).timer,
            provenance,
            timings,
            app or {"nb_iterations": 5},
            has_layer_times=any(layer.time_ms is not None for layer in layers),
        )
    return DeployResult(
        output=None,
        metrics={
            "provenance": provenance.value,
            "cycles": cycles,
            "cycles_name": name,
            "cycles_unit": "instructions" if emulated else "cycles",
            "cycles_counter_bits": bits,
            "counter_bits": {name: bits},
            "binary": binary,
        },
        memory_peak_bytes=None,
        timings=TimingSeries(timings) if timings is not None else None,
        protocol=protocol,
        layers=layers,
        measurements=measurements,
        timing=timing,
    )


HOST_LAYERS = (
    LayerFigure("_0_ConvAct_0", 0.000189),
    LayerFigure("_1_Transpose_0", 0.000350),
    LayerFigure("_2_Reshape_0", 0.000047),
    LayerFigure("_3_FC_0", 0.000122),
)
HOST_TIMINGS = [0.001072, 0.000934, 0.000865, 0.000989, 0.000997, 0.000920, 0.000830]


def test_every_code_is_registered_with_a_severity_and_description() -> None:
    assert set(ISSUE_SPECS) == set(IssueCode)
    for code in IssueCode:
        assert isinstance(code.severity, Severity) and len(code.description) > 20
    assert IssueCode.COUNTER_OVERFLOW.severity == Severity.ERROR
    assert IssueCode.TIMING_EMULATED.severity == Severity.INFO
    assert IssueCode("timer.resolution_coarse") is IssueCode.TIMER_RESOLUTION_COARSE


def test_clean_host_run_is_valid() -> None:
    validity = assess(_result(timings=HOST_TIMINGS, layers=HOST_LAYERS))
    assert validity.status == ValidityStatus.VALID, validity.issues
    assert validity.issues == ()


UART_LAYERS = (
    LayerFigure("_0_ConvAct_0", 0.18, {"cycles": 4310}),
    LayerFigure("_1_Transpose_0", 0.22, {"cycles": 5291}),
    LayerFigure("_2_Reshape_0", 0.0, {"cycles": 281}),
    LayerFigure("_3_FC_0", 0.16, {"cycles": 3867}),
)


def test_uart_run_is_degraded_by_the_1ms_tick_and_quotes_the_real_steps() -> None:
    """Issue 9 item 2: the warning used to quote 1 ms for samples that step by 0.1 ms."""
    result = _result(
        protocol=UART,
        provenance=Provenance.SILICON,
        timings=[0.6, 0.5, 0.6, 0.5, 0.6],
        cycles=[14037, 14036, 14044, 14038, 14044],
        layers=UART_LAYERS,
    )
    assert result.timing is not None
    assert result.timing.resolution_ms == pytest.approx(0.1)  # 1 ms tick / 10 forwards
    assert result.timing.layer_resolution_ms == 1.0  # each call is timed by the tick itself
    validity = assess(result)
    assert validity.status == ValidityStatus.DEGRADED
    coarse = [i for i in validity.issues if i.code == IssueCode.TIMER_RESOLUTION_COARSE]
    layers_issue = next(i for i in coarse if i.subject != "latency")
    assert "steps by 1 ms" in layers_issue.message and "4 of 4" in layers_issue.message
    assert layers_issue.subject == "_2_Reshape_0"
    latency_issue = next(i for i in coarse if i.subject == "latency")
    assert "step by 0.1 ms" in latency_issue.message


def test_a_one_and_a_half_ms_layer_from_a_1ms_timer_is_flagged() -> None:
    """It used to pass: only layers shorter than one tick were reported."""
    layers = (LayerFigure("conv", 1.5, {"cycles": 99}), LayerFigure("fc", 40.0, {"cycles": 9}))
    validity = assess(
        _result(protocol=UART, provenance=Provenance.SILICON, timings=[41.5] * 5, layers=layers)
    )
    coarse = next(i for i in validity.issues if i.code == IssueCode.TIMER_RESOLUTION_COARSE)
    assert coarse.subject == "conv" and "1 of 2" in coarse.message and "0 less" in coarse.message


def test_the_sample_step_is_detected_when_finer_than_the_protocol_says() -> None:
    nominal = protocol_timing(
        get_protocol(UART).timer, Provenance.SILICON, [0.6, 0.5, 0.7], {"nb_iterations": 5}
    )
    assert nominal is not None and nominal.resolution_ms == pytest.approx(0.1)
    assert not nominal.detected
    finer = protocol_timing(
        get_protocol(UART).timer, Provenance.SILICON, [0.55, 0.6, 0.65], {"nb_iterations": 5}
    )
    assert finer is not None and finer.detected and finer.resolution_ms == pytest.approx(0.05)
    host = protocol_timing(get_protocol(HOST).timer, Provenance.HOST, HOST_TIMINGS, {})
    assert host is not None and host.resolution_ms == 1e-6


def test_emulated_counts_past_2_31_are_not_declared_wrapped() -> None:
    """Issue 9 item 5: the 32-bit rule applied to 64-bit converted QEMU counts."""
    long_run = [2**31 + 5, 2**31 + 7, 2**31 + 6]
    emulated = assess(
        _result(
            provenance=Provenance.EMULATED,
            protocol=UART,
            cycles=long_run,
            layers=(LayerFigure("a", None, {"emulated_instructions": 2**31 + 6}),),
        )
    )
    assert IssueCode.COUNTER_OVERFLOW not in emulated.codes
    assert IssueCode.SAMPLES_REJECTED not in emulated.codes
    silicon = assess(_result(protocol=UART, provenance=Provenance.SILICON, cycles=long_run))
    assert IssueCode.COUNTER_OVERFLOW in silicon.codes  # a DWT counter is 32 bits wide


def test_wrapped_cycle_samples_are_rejected_and_reported() -> None:
    validity = assess(_result(timings=HOST_TIMINGS, cycles=[14037, 2**31 + 7, 14040, 14039]))
    assert validity.status == ValidityStatus.DEGRADED
    rejected = next(i for i in validity.issues if i.code == IssueCode.SAMPLES_REJECTED)
    assert "1 of 4" in rejected.message and "wrapped" in rejected.message


def test_every_cycle_sample_wrapped_is_an_overflow_and_invalid() -> None:
    validity = assess(_result(timings=HOST_TIMINGS, cycles=[2**32 - 5, 2**31 + 1, 2**31 + 9]))
    assert validity.status == ValidityStatus.INVALID
    assert IssueCode.COUNTER_OVERFLOW in validity.codes


def test_wrapped_layer_counter_is_an_overflow() -> None:
    layers = (LayerFigure("a", 0.1, {"cycles": 2**31 + 3}), LayerFigure("b", 0.1, {"cycles": 10}))
    validity = assess(_result(timings=[0.2, 0.2, 0.2], layers=layers))
    assert validity.status == ValidityStatus.INVALID
    overflow = next(i for i in validity.issues if i.code == IssueCode.COUNTER_OVERFLOW)
    assert overflow.subject == "a/cycles"


def test_too_few_samples() -> None:
    validity = assess(_result(timings=[0.001, 0.0011]))
    assert IssueCode.SAMPLES_TOO_FEW in validity.codes
    assert validity.status == ValidityStatus.DEGRADED


def test_layer_sum_far_from_end_to_end_time() -> None:
    # layer times in microseconds by mistake: 1000x the end-to-end figure
    layers = tuple(LayerFigure(f.name, f.time_ms * 1000) for f in HOST_LAYERS if f.time_ms)
    validity = assess(_result(timings=HOST_TIMINGS, layers=layers))
    mismatch = next(i for i in validity.issues if i.code == IssueCode.PROFILE_LAYER_SUM_MISMATCH)
    assert "times" in mismatch.message


def test_layer_cycle_sum_far_from_total_cycles() -> None:
    layers = (LayerFigure("a", None, {"cycles": 100}), LayerFigure("b", None, {"cycles": 100}))
    validity = assess(_result(timings=HOST_TIMINGS, cycles=[1000, 1000, 1000], layers=layers))
    assert IssueCode.PROFILE_LAYER_SUM_MISMATCH in validity.codes


def test_unavailable_and_requested_counters() -> None:
    layers = (LayerFigure("a", None, {"cycles": 100}), LayerFigure("b", None, {}))
    missing_metric = Metric("energy", None, "uJ", Provenance.SILICON, unavailable_reason="no probe")
    validity = assess(
        _result(timings=HOST_TIMINGS, layers=layers, measurements=(missing_metric,)),
        requested_counters=("cycles", "L1D_CACHE_REFILL"),
    )
    messages = [i.message for i in validity.issues if i.code == IssueCode.COUNTER_UNAVAILABLE]
    assert any("cycles was reported for 1 of 2 layers" in m for m in messages)
    assert any("L1D_CACHE_REFILL was requested" in m for m in messages)
    assert any("energy is unavailable: no probe" in m for m in messages)


def test_memory_near_capacity() -> None:
    binary = {"flash_bytes": 950, "flash_capacity": 1000, "ram_bytes": 10, "ram_capacity": 1000}
    validity = assess(_result(timings=HOST_TIMINGS, binary=binary))
    assert validity.codes == (IssueCode.MEMORY_NEAR_CAPACITY,)
    assert validity.issues[0].subject == "flash"


@pytest.mark.parametrize("method", ["median", "mean", "trimmed"])
def test_validity_serialises(method: str) -> None:
    doc = assess(_result(timings=[0.1, 0.2]), aggregation=method).as_dict()
    assert doc["status"] == "degraded"
    assert doc["issues"][0]["code"] == "samples.too_few"
    assert doc["issues"][0]["severity"] == "warning"
