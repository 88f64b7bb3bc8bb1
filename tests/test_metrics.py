"""The Metric contract: provenance required, times carry a resolution, printing rules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from aidge_deploy import metrics, results
from aidge_deploy.metrics import (
    Metric,
    Provenance,
    decimals_for,
    format_figure,
)


def test_results_reexports_the_leaf_module() -> None:
    assert results.Metric is Metric
    assert results.Provenance is Provenance


def test_metrics_module_is_a_leaf() -> None:
    tree = ast.parse(Path(metrics.__file__).read_text())
    imported = [
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    ] + [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    assert not [m for m in imported if m.startswith("aidge")], imported


def test_provenance_vocabulary() -> None:
    assert [p.value for p in Provenance] == ["silicon", "host", "emulated", "estimated", "static"]
    assert all(p.label for p in Provenance)


def test_provenance_is_required() -> None:
    with pytest.raises(TypeError):
        Metric("size", 3, "B")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="provenance"):
        Metric("size", 3, "B", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Metric("size", 3, "B", "measured")  # type: ignore[arg-type]
    # a vocabulary string (a bundle read back) becomes the enum
    assert Metric("size", 3, "B", "static").provenance is Provenance.STATIC  # type: ignore[arg-type]


def test_a_time_needs_its_resolution() -> None:
    with pytest.raises(ValueError, match="resolution"):
        Metric("latency", 1.5, "ms", Provenance.HOST)
    ok = Metric("latency", 1.5, "ms", Provenance.HOST, resolution=1e-6)
    assert ok.is_time and not ok.coarse
    # an unavailable time needs a reason, not a resolution
    gone = Metric.unavailable("latency", "ms", Provenance.SILICON, "the log has no timing")
    assert gone.formatted() == "unavailable (the log has no timing)"
    with pytest.raises(ValueError, match="unavailable_reason"):
        Metric("latency", None, "ms", Provenance.SILICON)
    with pytest.raises(ValueError):
        Metric("x", 1, "B", Provenance.STATIC, unavailable_reason="both")
    with pytest.raises(ValueError):
        Metric("x", 1.0, "ms", Provenance.HOST, resolution=0.0)
    with pytest.raises(ValueError, match="unit"):
        Metric("x", 1.0, "", Provenance.HOST)


def test_a_layer_of_one_and_a_half_ticks_is_flagged() -> None:
    """Issue 9 item 2: a 1.5 ms layer read from a 1 ms timer is coarse (±1 tick is 67 %)."""
    layer = Metric("conv1", 1.5, "ms", Provenance.SILICON, resolution=1.0)
    assert layer.coarse and not layer.below_resolution
    tiny = Metric("reshape", 0.0, "ms", Provenance.SILICON, resolution=1.0)
    assert tiny.below_resolution and tiny.coarse
    assert tiny.formatted() == "<1 ms"  # a 0-tick reading: less than a tick, not 0
    fine = Metric("fc", 25.0, "ms", Provenance.SILICON, resolution=1.0)
    assert not fine.coarse


@pytest.mark.parametrize(
    ("resolution", "decimals"),
    [(1.0, 0), (0.1, 1), (0.04, 2), (0.25, 1), (1e-6, 6), (4e-5, 5), (10.0, 0), (0.001, 3)],
)
def test_decimals_follow_the_resolution(resolution: float, decimals: int) -> None:
    assert decimals_for(resolution) == decimals


def test_values_print_to_their_resolution() -> None:
    assert format_figure(0.123456789, "ms", 1e-3) == "0.123 ms"
    assert format_figure(42.57344, "ms", 4e-5) == "42.57344 ms"
    assert format_figure(1.5, "ms", 1.0) == "2 ms"
    assert format_figure(0.18, "ms", 1.0) == "<1 ms"  # it used to print 0.180000
    assert Metric("t", 68.1, "ms", Provenance.SILICON, resolution=0.1).formatted() == "68.1 ms"


def test_counts_print_as_integers() -> None:
    assert format_figure(7173.1, "instructions") == "7,173 instructions"
    assert format_figure(1064350.5, "instructions", with_unit=False) == "1,064,350"
    assert format_figure(None, "instructions", unavailable_reason="no plugin") == (
        "unavailable (no plugin)"
    )


def test_round_trip_through_a_dict() -> None:
    m = Metric("latency_median", 1.25, "ms", Provenance.ESTIMATED, "median", resolution=4e-5)
    d = m.as_dict()
    assert d["resolution"] == 4e-5 and d["provenance"] == "estimated"
    assert Metric.from_dict(d) == m


def test_a_target_without_timing_provenance_is_refused() -> None:
    """Issue 9 item 5: forgetting to say what a target's timings are fails at registration
    (it used to be labelled silicon)."""
    from aidge_deploy.errors import ConfigError
    from aidge_deploy.registry import DeployTarget, register_deploy_target, registered_targets

    class Forgetful(DeployTarget):  # abstract methods are irrelevant: registration refuses it
        pass

    with pytest.raises(ConfigError, match="timing_provenance"):
        register_deploy_target("host", "forgetful-backend")(Forgetful)
    assert ("host", "forgetful-backend") not in registered_targets()
    for cls in registered_targets().values():
        if issubclass(cls, DeployTarget):  # a remote backend's result says what it measured
            assert isinstance(cls.timing_provenance, Provenance)
