"""``aidge-deploy compare`` on bundles of real host deploys, and the threshold arithmetic."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import modelzoo
from aidge_deploy.cli.main import app
from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ReportError
from aidge_deploy.report.compare import (
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_NOT_COMPARABLE,
    EXIT_PASS,
    EXIT_WARN,
    Direction,
    Figure,
    ThresholdRule,
    Verdict,
    compare_bundles,
    evaluate,
    parse_thresholds,
)
from test_report_bundle import deploy_with_report

runner = CliRunner()


@pytest.fixture(scope="module")
def bundles(export_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two runs of one export, and one run of another model (same architecture, new weights).

    Their layers have long names, as real models' do (rendering must not cut them)."""
    root = tmp_path_factory.mktemp("compare")
    same = export_factory("benchmark", model=modelzoo.gap_cnn(root / "gap_cnn.onnx"))
    other_model = modelzoo.gap_cnn(root / "gap_cnn_seed1.onnx", seed=1)
    other = export_factory("benchmark", model=other_model)
    out = {}
    for name, artifact in (("a", same), ("b", same), ("other", other)):
        config = DeployConfig(report_dir=root / name)
        deploy_with_report(artifact, config, root / f"work-{name}")
        out[name] = root / name
    return out


def _thresholds(tmp_path: Path, metrics: dict[str, Any]) -> Path:
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"schema_version": 1, "metrics": metrics}))
    return path


def _run(*args: str) -> Any:
    return runner.invoke(app, ["compare", *args])


pytestmark = pytest.mark.slow


def test_same_model_same_target_is_comparable(bundles: dict[str, Path]) -> None:
    comparison = compare_bundles(bundles["a"], bundles["b"])
    assert comparison.comparable
    assert {d.name for d in comparison.differences} <= {"export_hash"}  # same export: none
    keys = [t.key for t in comparison.totals]
    assert keys[0] == "latency" and "image_bytes" in keys  # a host program has no flash
    flash = next(t for t in comparison.totals if t.key == "image_bytes")
    assert flash.delta == 0  # the same cached binary
    time_deltas = comparison.layer_deltas["time"]
    assert len(time_deltas) == 5
    magnitudes = [abs(d.delta or 0) for d in time_deltas]
    assert magnitudes == sorted(magnitudes, reverse=True)


def test_cli_prints_totals_and_layer_table(bundles: dict[str, Path]) -> None:
    result = _run(str(bundles["a"]), str(bundles["b"]), "--top", "2")
    assert result.exit_code == EXIT_PASS, result.output
    assert "Totals" in result.output and "latency" in result.output
    assert "Per-layer time: 2 largest changes" in result.output


@pytest.mark.parametrize("columns", ["80", None])
def test_names_are_never_cut_at_80_columns_nor_in_a_ci_log(
    bundles: dict[str, Path], tmp_path: Path, columns: str | None
) -> None:
    """Layer and metric names are printed whole (a CI log has no terminal: rich then
    renders 80 columns and shortened ``layers/_3_GlobalAveragePooling_…``)."""
    import os
    import subprocess
    import sys

    path = _thresholds(
        tmp_path, {"layers/*/time": {"direction": "smaller", "max_regression_abs": 1.0}}
    )
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [sys.executable, "-m", "aidge_deploy.cli.main", "compare", str(bundles["a"]),
         str(bundles["b"]), "--thresholds", str(path), "--top", "100"],
        capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == EXIT_PASS, done.stderr
    assert "…" not in done.stdout
    comparison = compare_bundles(bundles["a"], bundles["b"])
    layer_keys = [d.key for d in comparison.layer_deltas["time"]]
    assert max(len(k) for k in layer_keys) > 30, "the names are long enough to be cut"
    lines = done.stdout.splitlines()
    for key in layer_keys:
        layer = key.split("/", 1)[1].rsplit("/", 1)[0]
        assert any(layer in line for line in lines), f"layer {layer} is not shown whole"
        assert any(key in line for line in lines), f"threshold metric {key} is not shown whole"
    for delta in comparison.totals:
        assert any(delta.key in line for line in lines), delta.key


def test_loose_threshold_passes(bundles: dict[str, Path], tmp_path: Path) -> None:
    path = _thresholds(
        tmp_path,
        {
            "latency": {
                "direction": "smaller",
                "max_regression_pct": 10000,
                "max_regression_abs": 1.0,
            },
            "layers/*/time": {"direction": "smaller", "max_regression_abs": 1.0},
            "image_bytes": {"direction": "smaller", "max_regression_pct": 0, "unit": "B"},
        },
    )
    result = _run(str(bundles["a"]), str(bundles["b"]), "--thresholds", str(path))
    assert result.exit_code == EXIT_PASS, result.output
    assert "PASS" in result.output


def test_strict_threshold_fails(bundles: dict[str, Path], tmp_path: Path) -> None:
    # two real runs never time identically: any change in the mean or a layer regresses
    path = _thresholds(
        tmp_path,
        {
            "latency_mean": {"direction": "equal", "max_regression_pct": 0},
            "layers/*/time": {"direction": "equal", "max_regression_abs": 0},
        },
    )
    result = _run(str(bundles["a"]), str(bundles["b"]), "--thresholds", str(path), "--json")
    assert result.exit_code == EXIT_FAIL, result.output
    doc = json.loads(result.output)
    assert doc["thresholds"]["verdict"] == "fail"
    assert any(c["status"] == "fail" for c in doc["thresholds"]["checks"])
    assert len(doc["thresholds_sha256"]) == 64


def test_missing_metric_policy_warn_and_fail(bundles: dict[str, Path], tmp_path: Path) -> None:
    warn = _thresholds(tmp_path, {"accuracy": {"direction": "larger", "missing": "warn"}})
    result = _run(str(bundles["a"]), str(bundles["b"]), "--thresholds", str(warn))
    assert result.exit_code == EXIT_WARN, result.output
    fail = _thresholds(tmp_path, {"accuracy": {"direction": "larger"}})
    assert (
        _run(str(bundles["a"]), str(bundles["b"]), "--thresholds", str(fail)).exit_code == EXIT_FAIL
    )
    ignore = _thresholds(tmp_path, {"accuracy": {"direction": "larger", "missing": "ignore"}})
    assert (
        _run(str(bundles["a"]), str(bundles["b"]), "--thresholds", str(ignore)).exit_code
        == EXIT_PASS
    )


def test_different_models_are_compared_and_named(bundles: dict[str, Path]) -> None:
    """A changed model is what a comparison measures (the comparability table: informative):
    its figures are compared, the difference is named."""
    result = _run(str(bundles["a"]), str(bundles["other"]))
    assert result.exit_code == EXIT_PASS, result.output
    assert "informative: model (layers and parameters) differs" in " ".join(result.output.split())
    as_json = json.loads(_run(str(bundles["a"]), str(bundles["other"]), "--json").output)
    assert as_json["comparable"] is True
    kinds = {d["name"]: d["kind"] for d in as_json["differences"]}
    assert kinds["model_hash"] == "informative" and "io_signature" not in kinds


def test_different_target_is_refused(bundles: dict[str, Path], tmp_path: Path) -> None:
    """Rewrite a copy's target and re-seal it: the manifest verifies, the target differs."""
    from aidge_deploy.report.manifest import MANIFEST_NAME, sha256_bytes

    copy = tmp_path / "copy"
    shutil.copytree(bundles["b"], copy)
    manifest = json.loads((copy / MANIFEST_NAME).read_text())
    manifest["comparability"]["target"] = "stm32h7"
    manifest["comparability"]["toolchain"] = {"arm-none-eabi-gcc": "13.2"}
    summary_entry = next(f for f in manifest["files"] if f["path"] == "summary.json")
    summary = json.loads((copy / "summary.json").read_text())
    summary["target"] = summary["identity"]["target"] = "stm32h7"
    raw = (json.dumps(summary) + "\n").encode()
    (copy / "summary.json").write_bytes(raw)
    summary_entry.update(size=len(raw), sha256=sha256_bytes(raw))
    (copy / MANIFEST_NAME).write_text(json.dumps(manifest))
    comparison = compare_bundles(bundles["a"], copy)
    assert [d.name for d in comparison.blocking] == ["target"]
    assert "toolchain" in {d.name for d in comparison.differences if d.kind == "informative"}
    result = _run(str(bundles["a"]), str(copy))
    assert result.exit_code == EXIT_NOT_COMPARABLE and "target differs" in result.output


def test_tampered_bundle_is_an_error(bundles: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(bundles["b"], copy)
    (copy / "profile_results.csv").write_text("index,layer\n")
    result = _run(str(bundles["a"]), str(copy))
    assert result.exit_code == EXIT_ERROR
    assert "modified" in result.output


def test_invalid_thresholds_file_is_an_error(bundles: dict[str, Path], tmp_path: Path) -> None:
    path = _thresholds(tmp_path, {"latency": {"direction": "faster"}})
    result = _run(str(bundles["a"]), str(bundles["b"]), "--thresholds", str(path))
    assert result.exit_code == EXIT_ERROR
    assert "thresholds schema" in " ".join(result.output.split())  # any console width
    with pytest.raises(ReportError, match="max_regresion_pct"):
        parse_thresholds(
            {
                "schema_version": 1,
                "metrics": {"x": {"direction": "smaller", "max_regresion_pct": 1}},
            }
        )


# -- threshold arithmetic (pure) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("direction", "base", "cand", "pct", "abs_", "failed"),
    [
        (Direction.SMALLER, 100.0, 104.0, 5, None, False),  # +4 <= 5% of 100
        (Direction.SMALLER, 100.0, 106.0, 5, None, True),
        (Direction.SMALLER, 100.0, 106.0, 5, 10, False),  # the larger allowance (abs 10) wins
        (Direction.SMALLER, 100.0, 111.0, 5, 10, True),
        (Direction.SMALLER, 100.0, 50.0, 0, 0, False),  # an improvement
        (Direction.LARGER, 0.9, 0.85, None, 0.01, True),  # accuracy dropped
        (Direction.LARGER, 0.9, 0.95, None, None, False),
        (Direction.EQUAL, 10.0, 9.0, 5, None, True),
        (Direction.EQUAL, 10.0, 10.0, None, None, False),
    ],
)
def test_rule_arithmetic(
    direction: Direction,
    base: float,
    cand: float,
    pct: float | None,
    abs_: float | None,
    failed: bool,
) -> None:
    rule = ThresholdRule("m", direction, pct, abs_)
    assert (rule.regression(base, cand) > rule.allowance(base)) is failed


def test_evaluate_worst_check_decides(bundles: dict[str, Path]) -> None:
    comparison = compare_bundles(bundles["a"], bundles["b"])
    base_latency = comparison.figures_base["latency"]
    assert isinstance(base_latency, Figure) and base_latency.unit == "ms"
    thresholds = parse_thresholds(
        {
            "schema_version": 1,
            "metrics": {
                "image_bytes": {"direction": "smaller", "max_regression_pct": 0},
                "no_such_metric": {"direction": "smaller", "missing": "warn"},
            },
        }
    )
    evaluation = evaluate(comparison, thresholds)
    assert evaluation.verdict == Verdict.WARN and evaluation.exit_code == EXIT_WARN
    statuses = {c.key: c.status for c in evaluation.checks}
    assert statuses == {"image_bytes": Verdict.PASS, "no_such_metric": Verdict.WARN}


def test_a_threshold_check_prints_figures_to_their_timer_step() -> None:
    """Issue 9 item 2 in compare: a check used to say "0.606538 -> 0.612 ms" for latencies
    read in 0.1 ms steps (a median of such samples is no finer)."""
    from aidge_deploy.report.compare import Figure, _check

    rule = ThresholdRule("latency", Direction.SMALLER, 5, None)
    base = Figure(0.606538, "ms", "silicon", resolution=0.1)
    cand = Figure(0.806538, "ms", "silicon", resolution=0.1)
    check = _check("latency", rule, base, cand)
    assert check is not None
    assert check.message.startswith("latency: 0.6 -> 0.8 ms (smaller is better; regression 0.2,")
    counts = _check(
        "cycles",
        ThresholdRule("cycles", Direction.SMALLER, 5, None),
        Figure(1000.0, "cycles", "silicon"),
        Figure(1001.0, "cycles", "silicon"),
    )
    assert counts is not None and "1000 -> 1001 cycles" in counts.message
