"""Pass planning and merging: every counter for every layer, each pass a complete run."""

from __future__ import annotations

from pathlib import Path

import pytest

from aidge_deploy.errors import CaptureError, ConfigError
from aidge_deploy.profiling.counters import select_counters
from aidge_deploy.profiling.passes import (
    CounterPass,
    LayerCounters,
    PassResult,
    fold_counter_profile,
    merge_passes,
    pass_result_from_samples,
    plan_passes,
)
from aidge_deploy.results import LayerFigure, Metric, Provenance

LAYERS = ("conv1", "relu1", "fc")


def _per_layer_run(counter_pass: CounterPass) -> PassResult:
    """What a per-layer target reports: a value for every counter of the pass, every layer.

    Values are a deterministic function of (layer, counter) so the merge can be checked.
    """
    layers = tuple(
        LayerCounters(i, name, {c: float(100 * i + len(c)) for c in counter_pass.names})
        for i, name in enumerate(LAYERS)
    )
    totals = {
        c: float(sum(100 * i + len(c) for i in range(len(LAYERS)))) for c in counter_pass.names
    }
    return PassResult(
        counter_pass, layers=layers, totals=totals, basis="median over 5 iterations per layer"
    )


def test_large_selection_is_split_by_group_and_limit() -> None:
    sel = select_counters("cpu,memory,mve,system", "armv8m-pmu")
    passes = plan_passes(sel, 4)
    assert len(passes) > 3
    for p in passes:
        assert p.slots <= 4
        groups = {c.group for c in p.counters if c.slots}
        assert len(groups) == 1, "a pass mixes groups"
        assert p.name.startswith(groups.pop() + "_")
    planned = [n for p in passes for n in p.names]
    assert sorted(planned) == sorted(sel.names), "every counter exactly once"
    # the cycle counter takes no slot and rides in the first pass
    assert "CPU_CYCLES" in passes[0].names
    assert [p.index for p in passes] == list(range(len(passes)))


def test_software_counters_take_no_slot() -> None:
    sel = select_counters("software,cycles,instructions", "linux-perf")
    passes = plan_passes(sel, 1)
    assert [p.name for p in passes] == ["cpu_0", "cpu_1"]
    assert set(sel.names) - {"cycles", "instructions"} <= set(passes[0].names)
    assert passes[1].names == ("instructions",)
    only_sw = plan_passes(select_counters("task-clock,page-faults", "linux-perf"), 4)
    assert len(only_sw) == 1 and only_sw[0].names == ("task-clock", "page-faults")


def test_unavailable_counters_are_not_planned() -> None:
    sel = select_counters(
        "task-clock,cycles", "linux-perf", {"task-clock": None, "cycles": "ENOENT"}
    )
    assert [p.names for p in plan_passes(sel, 4)] == [("task-clock",)]
    none = select_counters("cycles", "linux-perf", {"cycles": "ENOENT"})
    assert plan_passes(none, 4) == ()
    with pytest.raises(ConfigError):
        plan_passes(sel, 0)


def test_merged_table_has_every_counter_for_every_layer() -> None:
    sel = select_counters("default,memory,mve", "armv8m-pmu", None)
    passes = plan_passes(sel, 2)
    assert len(passes) >= 4
    profile = merge_passes(sel, [_per_layer_run(p) for p in passes])
    assert [layer.name for layer in profile.layers] == list(LAYERS)
    for layer in profile.layers:
        assert set(layer.values) == set(sel.names)
        for name, value in layer.values.items():
            assert value == 100 * layer.index + len(name)
    assert profile.provenance is Provenance.SILICON
    assert profile.measured == sel.names and not profile.unavailable
    assert profile.totals["INST_RETIRED"] == sum(100 * i + len("INST_RETIRED") for i in range(3))
    assert {p.name for p in profile.passes} == {p.name for p in passes}


def test_a_sum_of_per_layer_medians_is_never_a_per_inference_total() -> None:
    """Issue 9 item 4: a pass with per-layer values only used to publish their sum."""
    sel = select_counters("CPU_CYCLES", "armv8m-pmu")
    (only,) = plan_passes(sel, 4)
    run = _per_layer_run(only)
    profile = merge_passes(sel, [PassResult(only, layers=run.layers, basis=run.basis)])
    assert "CPU_CYCLES" not in profile.totals
    assert "per-layer values only" in profile.unavailable["CPU_CYCLES"]
    assert profile.measurements()[0].value is None


def test_per_inference_total_is_the_reduction_of_per_iteration_sums() -> None:
    """median(a) + median(b) is no inference's count; median(a_i + b_i) is."""
    (only,) = plan_passes(select_counters("CPU_CYCLES", "armv8m-pmu"), 4)
    conv = [{"CPU_CYCLES": v} for v in (10.0, 10.0, 30.0)]
    fc = [{"CPU_CYCLES": v} for v in (30.0, 10.0, 10.0)]
    result = pass_result_from_samples(only, [("conv", conv), ("fc", fc)], "median", counter_bits=32)
    assert [lc.values["CPU_CYCLES"] for lc in result.layers] == [10.0, 10.0]
    assert result.totals["CPU_CYCLES"] == 40.0  # sums 40, 20, 40: not 10 + 10
    assert "per-iteration sums" in result.basis
    mean = pass_result_from_samples(only, [("conv", conv), ("fc", fc)], "mean", counter_bits=32)
    assert mean.basis.startswith("mean over 3 iterations")  # it used to say "median" always
    assert "per inference: the mean of the per-iteration sums" in mean.basis
    short = pass_result_from_samples(
        only, [("conv", conv[:2]), ("fc", fc[:2])], "trimmed", counter_bits=32
    )
    assert short.basis.startswith("median (trimmed asked")


def test_unavailable_counter_becomes_a_metric_with_reason_never_zero() -> None:
    sel = select_counters(
        "task-clock,page-faults,instructions",
        "linux-perf",
        {"task-clock": None, "page-faults": None, "instructions": "ENOENT: no PMU"},
    )
    (only,) = plan_passes(sel, 4)
    result = PassResult(
        only,
        totals={"task-clock": 1e6},
        unavailable={"page-faults": "EACCES: paranoid"},
        running_ratio={"task-clock": 0.5},
        basis="per inference",
    )
    profile = merge_passes(sel, [result])
    metrics = {m.name: m for m in profile.measurements()}
    assert metrics["task-clock"].value == 1e6 and metrics["task-clock"].unit == "ns"
    assert (
        "multiplexed" in metrics["task-clock"].description
        and "per inference" in metrics["task-clock"].description
    )
    assert (
        metrics["page-faults"].value is None
        and metrics["page-faults"].unavailable_reason == "EACCES: paranoid"
    )
    assert (
        metrics["instructions"].value is None
        and metrics["instructions"].unavailable_reason == "ENOENT: no PMU"
    )


def test_layer_name_mismatch_between_passes_is_an_error() -> None:
    sel = select_counters("cpu", "armv8m-pmu")
    first, second, *_ = plan_passes(sel, 2)
    good = _per_layer_run(first)
    bad = PassResult(
        second,
        layers=(
            LayerCounters(0, "conv1", dict.fromkeys(second.names, 1.0)),
            LayerCounters(1, "other", dict.fromkeys(second.names, 1.0)),
            LayerCounters(2, "fc", dict.fromkeys(second.names, 1.0)),
        ),
    )
    with pytest.raises(CaptureError, match="layer 1 as 'other'"):
        merge_passes(sel, [good, bad])
    short = PassResult(second, layers=_per_layer_run(second).layers[:2])
    with pytest.raises(CaptureError, match="different layers"):
        merge_passes(sel, [good, short])
    holes = PassResult(
        second, layers=(LayerCounters(0, "conv1", {}), *_per_layer_run(second).layers[1:])
    )
    with pytest.raises(CaptureError, match="no value"):
        merge_passes(sel, [good, holes])
    totals_only = PassResult(second, totals=dict.fromkeys(second.names, 1.0))
    with pytest.raises(CaptureError, match="no per-layer values"):
        merge_passes(sel, [good, totals_only])


def test_pass_result_from_samples_rejects_wrapped_and_frozen() -> None:
    counter_pass = CounterPass(
        0, "cpu_0", tuple(select_counters("CPU_CYCLES,INST_RETIRED", "armv8m-pmu").requested)
    )
    rows_conv = [
        {"CPU_CYCLES": 100.0, "INST_RETIRED": 50.0},
        {"CPU_CYCLES": 2.0**32 - 5, "INST_RETIRED": 51.0},
        {"CPU_CYCLES": 104.0, "INST_RETIRED": 52.0},
        {"CPU_CYCLES": 0.0, "INST_RETIRED": 0.0},
    ]
    rows_fc = [{"CPU_CYCLES": 10.0, "INST_RETIRED": 2.0**31 + 1}] * 3
    result = pass_result_from_samples(
        counter_pass, [("conv", rows_conv), ("fc", rows_fc)], "median", counter_bits=32
    )
    assert result.layers[0].values == {"CPU_CYCLES": 102.0}
    assert "INST_RETIRED" in result.unavailable and "fc" in result.unavailable["INST_RETIRED"]
    assert "rejected" in result.basis
    profile = merge_passes(select_counters("CPU_CYCLES,INST_RETIRED", "armv8m-pmu"), [result])
    assert [lc.values for lc in profile.layers] == [{"CPU_CYCLES": 102.0}, {"CPU_CYCLES": 10.0}]
    assert profile.measurements()[1].value is None


def test_fold_joins_layers_by_name_and_appends_metrics() -> None:
    sel = select_counters("emulated", "emulated")
    (only,) = plan_passes(sel, 4)
    profile = merge_passes(sel, [_per_layer_run(only)])
    layers = (LayerFigure("conv1", 1.5, {"cycles": 7.0}), LayerFigure("fc", 0.5))
    base = (Metric("latency_median", 1.0, "ms", Provenance.EMULATED, resolution=0.1),)
    folded, metrics = fold_counter_profile(profile, layers, base)
    assert [f.name for f in folded] == ["conv1", "fc", "relu1"]
    assert folded[0].time_ms == 1.5 and folded[0].counters["cycles"] == 7.0
    assert all(set(sel.names) <= set(f.counters) for f in folded)
    assert metrics[0] is base[0] and [m.name for m in metrics[1:]] == list(sel.names)
    assert all(m.provenance is Provenance.EMULATED for m in metrics[1:])


def test_stage_refuses_counters_on_a_target_that_cannot_count(tmp_path: Path) -> None:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.pipeline.context import PipelineContext
    from aidge_deploy.pipeline.stages.profile_passes import ProfilePassesStage
    from aidge_deploy.registry import get_deploy_target

    config = DeployConfig(target="stm32f746", counters=("task-clock",))
    ctx = PipelineContext(config=config, artifact=None, work_dir=tmp_path)  # type: ignore[arg-type]
    ctx.target = get_deploy_target("stm32f746", "local", config)  # a real board target, no counters
    ctx.target_name = "stm32f746"
    stage = ProfilePassesStage()
    assert not stage.should_skip(ctx)
    with pytest.raises(ConfigError, match="cannot count") as info:
        stage.run(ctx)
    assert info.value.hint and "host/local" in info.value.hint
    ctx.config = DeployConfig()
    assert stage.should_skip(ctx)
