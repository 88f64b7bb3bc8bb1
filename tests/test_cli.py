"""The CLI is thin: it parses, calls the API and renders; errors are message + hint, no traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app

runner = CliRunner()


def flat(text: str) -> str:
    """Rich wraps at the terminal width: compare on whitespace-normalised text."""
    return " ".join(text.split())


@pytest.mark.slow
def test_run_json_prints_the_result(export_factory) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark", nb_iterations=5)
    res = runner.invoke(app, ["run", str(artifact.path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert len(data["timings_ms"]) == 5 and data["latency"]["n"] == 5
    assert data["target"] == "host" and data["measurements"]


@pytest.mark.slow
def test_run_prints_latency_layers_memory_and_log(export_factory) -> None:  # type: ignore[no-untyped-def]
    res = runner.invoke(app, ["run", str(export_factory("benchmark").path)])
    assert res.exit_code == 0, res.output
    for text in (
        "Latency per inference",
        "median",
        "p90",
        "Per-layer profile",
        "_3_FC_0",
        "Activation memory",
        "Log:",
        "measured on host",
    ):
        assert text in flat(res.output), text


@pytest.mark.slow
def test_errors_print_message_and_hint_without_traceback(export_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    export_dir = tmp_path / "e"
    shutil.copytree(export_factory("benchmark").path, export_dir)
    res = runner.invoke(app, ["run", str(export_dir), "--target", "raspberrypi"])
    assert res.exit_code == 2
    assert "Error:" in res.output and "Hint:" in res.output
    assert "Traceback" not in res.output


def test_missing_export_dir_is_a_clean_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(tmp_path / "missing")])
    assert (
        res.exit_code == 2
        and "does not exist" in flat(res.output)
        and "Traceback" not in res.output
    )


def test_targets_lists_pairs_with_hardware_facts() -> None:
    res = runner.invoke(app, ["targets"])
    assert res.exit_code == 0, res.output
    assert "host" in res.output and "local" in res.output


def test_doctor_reports_tools() -> None:
    res = runner.invoke(app, ["doctor"])
    assert res.exit_code in (0, 1), res.output
    assert "cmake" in res.output and "aidge-core" in res.output


@pytest.mark.slow
def test_profile_prints_per_layer_and_latency_stats(tiny_cnn: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "profile",
            str(tiny_cnn),
            "--target",
            "host",
            "--iterations",
            "7",
            "--work-dir",
            str(tmp_path / "w"),
        ],
    )
    assert res.exit_code == 0, res.output
    out = flat(res.output)
    assert "Per-layer profile" in out and "Latency per inference" in out
    assert "│ 7 │" in out, "n = 7 samples in the latency table"


@pytest.mark.slow
def test_profile_json_has_requested_iterations(tiny_cnn: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "profile",
            str(tiny_cnn),
            "--iterations",
            "9",
            "--json",
            "--work-dir",
            str(tmp_path / "w"),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout[res.stdout.index("{") :])
    assert data["latency"]["n"] == 9 and len(data["layers"]) >= 3


def test_profile_rejects_bad_dtype(tiny_cnn: Path) -> None:
    res = runner.invoke(app, ["profile", str(tiny_cnn), "--dtype", "int4"])
    assert res.exit_code == 2 and "int8" in flat(res.output)
