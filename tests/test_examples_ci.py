"""``examples/ci``: the worked example of model tests in CI runs green on emulated boards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from envparts import needs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ci"


def test_ci_configs_keep_bundles_junit_and_metrics() -> None:
    gitlab = yaml.safe_load((EXAMPLE / ".gitlab-ci.yml").read_text())
    job = gitlab["hil-tests"]
    assert "bundles/" in job["artifacts"]["paths"]
    assert job["artifacts"]["reports"] == {"junit": "junit.xml", "metrics": "bundles/metrics.om"}
    assert any("--aidge-report-dir bundles" in line for line in job["script"])
    assert any("--aidge-history results.db" in line for line in job["script"])
    # the first pipeline starts the series (a history with no earlier result fails otherwise)
    assert any("--aidge-update-baseline" in line for line in job["script"])
    assert job["cache"]["paths"] == ["results.db"]
    github = yaml.safe_load((EXAMPLE / "github-actions.yml").read_text())
    steps = github["jobs"]["hil"]["steps"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert "bundles/" in upload["with"]["path"] and upload["if"] == "always()"
    assert any("--aidge-report-dir bundles" in s.get("run", "") for s in steps)
    assert any(s.get("with", {}).get("path") == "results.db" for s in steps)


@pytest.mark.slow
@pytest.mark.qemu
@needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm and the Arm cross toolchain are needed",
)
def test_example_project_runs_green_on_host_and_emulated_boards(tmp_path: Path) -> None:
    project = tmp_path / "ci"
    shutil.copytree(EXAMPLE, project)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--aidge-report-dir",
            "bundles",
            "--junitxml",
            "junit.xml",
            "--aidge-history",
            "results.db",
            "--aidge-update-baseline",  # the first run: no results.db yet (as the CI jobs do)
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "4 passed" in proc.stdout
    cases = list(ET.parse(project / "junit.xml").getroot().iter("testcase"))
    assert len(cases) == 4
    props = {p.get("name") for c in cases for p in c.iter("property")}
    assert "aidge.mps2-an386.emulated_instructions[instructions]" in props
    assert (project / "bundles" / "metrics.om").read_text().rstrip().endswith("# EOF")
    reports = sorted((project / "bundles").rglob("report.html"))
    assert len(reports) == 4
