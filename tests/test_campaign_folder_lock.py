"""User errors that were bugs (issue 33): a campaign folder held by one run at a time (a second
run refused with the holder's pid, another campaign's folder refused, the file's ``history:``
honoured), a history file that is not a database (exit 2 everywhere, a usage error in pytest),
a report destination checked, and ``validate``'s exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import modelzoo
from aidge_deploy.campaign.folder import OWNER_NAME, PLAN_NAME, hold_folder
from aidge_deploy.cli.main import app
from aidge_deploy.errors import ConfigError
from aidge_deploy.history.store import HistoryStore

runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def corrupt(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    path.write_text("not a database, a text file\n" * 50, encoding="utf-8")
    return path


def _campaign_file(folder: Path, model: Path, **extra: Any) -> Path:
    doc = {
        "version": 1,
        "name": "locked",
        "models": [str(model)],
        "targets": ["host"],
        "options": {"iterations": [2, 3], "warmup": 1},
        **extra,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_a_folder_is_held_by_one_run_and_belongs_to_one_campaign(tmp_path: Path) -> None:
    root = tmp_path / "camp"
    lease = hold_folder(root, "mine")
    owner = json.loads((root / OWNER_NAME).read_text())
    assert owner["pid"] == os.getpid() and owner["campaign"] == "mine"
    with pytest.raises(
        ConfigError, match=rf"in use by another run \(campaign 'mine', pid {os.getpid()} on"
    ):
        hold_folder(root, "mine")
    lease.release()
    assert not (root / OWNER_NAME).exists()
    hold_folder(root, "mine").release()  # free again
    (root / PLAN_NAME).write_text(json.dumps({"name": "other"}))
    with pytest.raises(ConfigError, match="is the folder of campaign 'other', not of 'mine'"):
        hold_folder(root, "mine")
    hold_folder(root, "other").release()  # its own campaign may


def _history_count(db: Path) -> int:
    with HistoryStore(db) as store:
        return len(store.records())


@pytest.mark.slow
def test_two_campaigns_on_one_folder_one_refused_each_cell_once(tmp_path: Path) -> None:
    model = modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
    db = tmp_path / "results.db"
    spec = _campaign_file(tmp_path, model, history="results.db")  # against the file
    out = tmp_path / "camp"
    env = {**os.environ, "AIDGE_DEPLOY_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "aidge_deploy.cli.main", "campaign", str(spec)]
    first = subprocess.Popen(
        [*cmd, "--out", str(out), "--quiet"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / OWNER_NAME).is_file():
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the first campaign never took its folder"
            time.sleep(0.05)
        second = subprocess.run(
            [*cmd, "--out", str(out), "--quiet"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        output, _ = first.communicate(timeout=900)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, output
    assert second.returncode == 2, second.stdout + second.stderr
    said = _flat(second.stdout + second.stderr)
    assert f"in use by another run (campaign 'locked', pid {first.pid} on" in said
    records = sorted(out.glob("cells/*/cell.json"))
    assert len(records) == 2
    assert {json.loads(p.read_text())["status"] for p in records} == {"done"}
    assert _history_count(db) == 2  # the file's history: key, one record per cell
    again = subprocess.run(
        [*cmd, "--out", str(out), "--quiet"], env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stdout
    assert _history_count(db) == 2  # nothing ran again, nothing recorded twice


def test_a_history_that_is_not_a_database_is_a_user_error(corrupt: Path, tmp_path: Path) -> None:
    expected = f"{corrupt} is not a usable database: file is not a database"
    res = runner.invoke(app, ["history", "list", "--history", str(corrupt)])
    assert res.exit_code == 2 and expected in _flat(res.output), res.output
    model = modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
    res = runner.invoke(app, ["profile", str(model), "--history", str(corrupt)])
    assert res.exit_code == 2 and expected in _flat(res.output), res.output
    res = runner.invoke(
        app, ["validate", str(model), "--targets", "host", "--history", str(corrupt)]
    )
    assert res.exit_code == 2 and expected in _flat(res.output), res.output
    spec = _campaign_file(tmp_path / "c", model, history=str(corrupt))
    res = runner.invoke(app, ["campaign", str(spec), "--out", str(tmp_path / "camp"), "--quiet"])
    assert res.exit_code == 2 and expected in _flat(res.output), res.output
    assert not list((tmp_path / "camp").glob("cells/*/cell.json"))  # no cell ran


def test_pytest_with_a_corrupt_history_is_a_usage_error(
    pytester: pytest.Pytester, corrupt: Path
) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--aidge-history", str(corrupt))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = _flat(result.stderr.str() + result.stdout.str())
    assert "INTERNALERROR" not in text
    assert f"{corrupt} is not a usable database" in text


def test_a_report_destination_is_checked_as_profile_checks_it(tmp_path: Path) -> None:
    model = modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
    spec = _campaign_file(tmp_path / "c", model)
    res = runner.invoke(app, ["campaign", str(spec), "--out", "/proc/x", "--quiet"])
    assert res.exit_code == 2, res.output
    assert "/proc/x" in _flat(res.output)
    res = runner.invoke(app, ["validate", str(model), "--targets", "host", "--report", "/proc/x"])
    assert res.exit_code == 2 and "/proc/x" in _flat(res.output), res.output


@pytest.mark.slow
def test_validate_tells_a_broken_target_from_wrong_numbers(tmp_path: Path) -> None:
    from aidge_deploy.cli.validate import EXIT_TARGET_FAILED

    model = modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
    args = ["validate", str(model), "--targets", "host", "--work-dir", str(tmp_path / "w")]
    res = runner.invoke(app, [*args, "--timeout", "0.001"])  # the run cannot finish in time
    assert res.exit_code == EXIT_TARGET_FAILED == 4, res.output
    assert "FAIL host:" in res.stderr
    res = runner.invoke(app, args)  # the same build, given time: its numbers are right
    assert res.exit_code == 0, res.output
