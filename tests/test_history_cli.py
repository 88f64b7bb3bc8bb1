"""``aidge-deploy history`` over a real series: ten ``profile --history`` runs across ten
commits of a project made in the test, one commit with a slower model; the list and the
chart mark that commit, the exports validate against their documented shapes, and the
chart renders in Chromium (screenshot kept). Also: nothing is written into the working
folder — ``profile`` works from a read-only one, and a project's ``git status`` stays clean
after ``profile``, ``validate`` and the pytest plugin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

import modelzoo
from aidge_deploy.cli.main import app
from aidge_deploy.history import HistoryStore
from browser import screenshot
from envparts import missing, needs
from farmkit import ALICE, BOB, make_farm, needs_farm
from farmweb import browser_login
from gitrepo import git, new_project

runner = CliRunner()
needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm and the Arm cross toolchain are needed",
)

#: Bencher Metric Format, as bencher.dev/docs/reference/bencher-metric-format documents it
BMF_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "patternProperties": {
        ".+": {
            "type": "object",
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                }
            },
        }
    },
}
#: github-action-benchmark's customSmallerIsBetter input, as its README documents it: an
#: array of {name, unit, value, range?, extra?}
GAB_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "unit": {"type": "string"},
            "value": {"type": "number"},
            "range": {"type": "string"},
            "extra": {"type": "string"},
        },
        "required": ["name", "unit", "value"],
        "additionalProperties": False,
    },
}
SLOW_COMMIT = 6
#: a CI system's variables name the commit of the CI's checkout, not of the test's project
CI_SYSTEMS = ("GITHUB_ACTIONS", "GITLAB_CI")


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Ten commits; the model of commit 6 has a four times wider dense layer."""
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        missing("qemu-system-arm and the Arm cross toolchain are needed")
    root = tmp_path_factory.mktemp("history-cli")
    repo = new_project(root / "project")
    history = root / "results.db"
    commits = []
    cwd = Path.cwd()
    os.chdir(repo)
    ci = pytest.MonkeyPatch()
    for name in CI_SYSTEMS:  # the project's commits come from its git, not this CI's
        ci.delenv(name, raising=False)
    try:
        for n in range(1, 11):
            modelzoo.lenet(repo / "model.onnx", hidden=64 if n == SLOW_COMMIT else 16)
            (repo / "notes.txt").write_text(f"commit {n}\n")
            git(repo, "add", ".")
            git(repo, "commit", "-q", "-m", f"commit {n}")
            commits.append(git(repo, "rev-parse", "HEAD"))
            res = runner.invoke(
                app,
                [
                    *("profile", "model.onnx", "--target", "mps2-an386", "--iterations", "2"),
                    *("--history", str(history), "--json"),
                ],
            )
            assert res.exit_code == 0, res.output
    finally:
        os.chdir(cwd)
        ci.undo()
    return {"repo": repo, "history": history, "commits": commits}


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_history_marks_the_commit_of_the_slower_model(series: dict[str, Any]) -> None:
    history, commits = series["history"], series["commits"]
    res = runner.invoke(app, ["history", "list", "--history", str(history), "--json"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.stdout)
    assert [r["commit"] for r in runs] == commits and {r["branch"] for r in runs} == {"main"}
    assert {r["identity"]["name"] for r in runs} == {"model"}  # the model file's stem
    stepped = {r["commit"]: {s["metric"] for s in r["stepped"]} for r in runs if r["stepped"]}
    slow, back = commits[SLOW_COMMIT - 1], commits[SLOW_COMMIT]
    # the emulated count is exact: the slower commit, and the return, are the only steps
    assert set(stepped) == {slow, back}, stepped
    assert "emulated_instructions" in stepped[slow]
    up = next(s for s in runs[SLOW_COMMIT - 1]["stepped"] if s["metric"] == "emulated_instructions")
    assert up["after"] > up["before"]
    # the terminal table lists the same runs (its text folds with the console's width)
    table = runner.invoke(app, ["history", "list", "--history", str(history)])
    assert table.exit_code == 0 and "10 runs" in table.output
    # the project's working tree: nothing was written into it
    assert (
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=series["repo"], capture_output=True, text=True
        ).stdout
        == ""
    )


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_exports_validate_against_their_documented_shapes(
    series: dict[str, Any], tmp_path: Path
) -> None:
    history, commits = series["history"], series["commits"]
    bmf, gab = tmp_path / "bmf.json", tmp_path / "gab.json"
    for fmt, out in (("bmf", bmf), ("github-action-benchmark", gab)):
        res = runner.invoke(
            app, ["history", "export", "--history", str(history), "--format", fmt,
                  "--commit", commits[SLOW_COMMIT - 1][:10], "--out", str(out)],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
    bmf_doc = json.loads(bmf.read_text())
    jsonschema.validate(bmf_doc, BMF_SCHEMA)
    (bench,) = bmf_doc.values()
    assert bench["latency"]["value"] > 0  # Bencher's Latency measure, in ns
    assert bench["latency"]["lower_value"] <= bench["latency"]["value"]
    assert bench["emulated-instructions-instructions"]["value"] > 0
    gab_doc = json.loads(gab.read_text())
    jsonschema.validate(gab_doc, GAB_SCHEMA)
    names = {e["name"].rsplit(" - ", 1)[1]: e for e in gab_doc}
    assert names["emulated_instructions"]["unit"] == "instructions"
    assert "provenance: emulated" in names["emulated_instructions"]["extra"]
    assert commits[SLOW_COMMIT - 1] in names["emulated_instructions"]["extra"]
    assert not any("accuracy" in n for n in names)  # larger is better: not exported
    bad = runner.invoke(app, ["history", "export", "--history", str(history), "--format", "csv"])
    assert bad.exit_code == 2 and "Unknown export format" in bad.output


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.browser
@needs_qemu
def test_chart_renders_in_chromium(series: dict[str, Any], tmp_path: Path, chromium: Any) -> None:
    history, commits = series["history"], series["commits"]
    out = tmp_path / "history.html"
    res = runner.invoke(app, ["history", "chart", "--history", str(history), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "stepped" in res.output
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.goto(out.as_uri())
    chart = page.locator('svg[data-chart$="::emulated_instructions"]')
    assert chart.count() == 1
    assert chart.get_attribute("data-points") == "10"
    slow = commits[SLOW_COMMIT - 1][:10]
    assert chart.get_attribute("data-steps") == f"{slow},{commits[SLOW_COMMIT][:10]}"
    steps = chart.locator("circle.point.step")
    assert steps.count() == 2 and steps.first.get_attribute("data-commit") == slow
    assert steps.first.bounding_box() is not None  # drawn, not just present
    screenshot(page, "history_chart")
    page.close()


@pytest.mark.slow
def test_profile_works_from_a_read_only_working_folder(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        missing("unshare (util-linux) is needed for a private read-only mount")
    model = modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
    folder = tmp_path / "readonly"
    folder.mkdir()
    script = 'mount -t tmpfs -o ro,size=1m tmpfs "$0" && cd "$0" && exec "$@"'
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(folder),
         sys.executable, "-m", "aidge_deploy.cli.main", "profile", str(model), "--target",
         "host", "--iterations", "2", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if "mount: " in proc.stderr and proc.returncode != 0 and "Read-only" not in proc.stderr:
        missing(f"a private read-only mount is not allowed here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["latency"]["n"] == 2
    assert list(folder.iterdir()) == []


PROJECT_TEST = """
import pytest
from aidge_deploy.testing import assert_budget

@pytest.mark.aidge_targets("host")
def test_model(aidge_run):
    assert_budget(aidge_run("model.onnx", iterations=2), "latency", max=1000.0)
"""


@pytest.mark.slow
def test_git_status_stays_clean_after_validate_and_the_plugin(tmp_path: Path) -> None:
    repo = new_project(tmp_path / "project")
    modelzoo.two_head_mlp(repo / "model.onnx")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_model.py").write_text(PROJECT_TEST)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "a model and its test")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's machine writes it
    cli = [sys.executable, "-m", "aidge_deploy.cli.main"]
    for argv in (
        [*cli, "validate", "model.onnx", "--targets", "host"],
        [sys.executable, "-m", "pytest", "-q", "--aidge-report-dir", str(tmp_path / "b")],
    ):
        proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert git(repo, "status", "--porcelain", "--ignored=no") == ""


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.browser
@needs_qemu
@needs_farm()
def test_the_farm_records_its_jobs_and_charts_the_same_series(
    series: dict[str, Any], tmp_path: Path, chromium: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same ten commits profiled on a farm board (``--backend api``): the farm records
    each job in its own database, and its history page (model x board) shows the series the
    local history holds, the slower commit marked; another user sees none of it."""
    repo, commits = series["repo"], series["commits"]
    with HistoryStore(series["history"]) as local:
        expected = [r.figures["emulated_instructions"].value for r in local.records(name="model")]
    for name in CI_SYSTEMS:
        monkeypatch.delenv(name, raising=False)
    farm = make_farm(tmp_path / "farm")
    try:
        farm.start_agent("host-a", {"an386-a": "mps2-an386"})
        monkeypatch.setenv("AIDGE_DEPLOY_API_PASSWORD", ALICE[1])
        via_farm = tmp_path / "via-farm.db"
        monkeypatch.chdir(repo)
        for sha in commits:
            git(repo, "checkout", "-q", sha)
            res = runner.invoke(
                app,
                [
                    *("profile", "model.onnx", "--target", "mps2-an386", "--iterations", "2"),
                    *("--backend", "api", "--api-url", f"{farm.url}/api"),
                    *("--api-poll-interval", "0.3"),
                    *("--api-username", ALICE[0], "--history", str(via_farm), "--json"),
                ],
            )
            assert res.exit_code == 0, res.output
        git(repo, "checkout", "-q", "main")
        with HistoryStore(via_farm) as store:
            runs = store.records()
        assert [r.identity.board for r in runs] == ["an386-a"] * 10
        assert [r.figures["emulated_instructions"].value for r in runs] == expected

        page = browser_login(chromium, farm, ALICE, "/history")
        row = page.locator("#series tr[data-model='model'][data-board='an386-a']")
        assert row.count() == 1
        row.locator("a").click()
        page.wait_for_url("**/history/series**")
        chart = page.locator('svg[data-chart$="::emulated_instructions"]')
        points = chart.locator("circle.point")
        assert [
            float(points.nth(i).get_attribute("data-value") or 0) for i in range(10)
        ] == expected
        steps = [i for i in range(10) if "step" in (points.nth(i).get_attribute("class") or "")]
        assert steps == [SLOW_COMMIT - 1, SLOW_COMMIT]
        assert page.locator("#history-jobs tbody tr").count() == 10
        screenshot(page, "farm_history_series")
        page.context.close()
        other = browser_login(chromium, farm, BOB, "/history")
        assert other.locator("#series tr[data-model]").count() == 0
        other.context.close()
    finally:
        farm.stop_all()


@pytest.mark.slow
def test_run_and_validate_record_into_the_history_too(tmp_path: Path, export_factory: Any) -> None:
    history = tmp_path / "results.db"
    export = Path(export_factory("benchmark").path)
    res = runner.invoke(app, ["run", str(export), "--history", str(history), "--json"])
    assert res.exit_code == 0, res.output
    model = modelzoo.two_head_mlp(tmp_path / "m.onnx")
    args = ["validate", str(model), "--targets", "host", "--history", str(history), "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    with HistoryStore(history) as store:
        run, check = store.records()
    assert (run.source, run.identity.name, run.identity.kind) == ("run", export.name, "benchmark")
    assert run.figures["latency"].provenance == "host" and run.bundle is not None
    assert (check.source, check.identity.kind) == ("validate", "output")
    assert check.identity.name == "m"  # the model's stem, as profile names it
    bad = runner.invoke(app, ["run", str(export), "--history", str(tmp_path)])
    assert bad.exit_code == 2 and "is a folder, not a database file" in " ".join(bad.output.split())


def test_an_export_failure_says_what_failed() -> None:
    """Not always "unsupported operators": a file that could not be written, an operator,
    or else the exporter's own words, and where its whole output is."""
    from aidge_deploy.modelexport import ExportRequest, _export_error

    request = ExportRequest(model=Path("lenet.onnx"), target="host", out_dir=Path("/ro/x"))
    log = Path("/cache/runs/r/export.log")
    write = _export_error(request, PermissionError(13, "Permission denied"), "", log)
    assert "could not write a file of the export" in write.hint and str(log) in write.hint
    op = _export_error(request, RuntimeError("No implementation for operator Foo"), "", None)
    assert "operator of the model is not supported" in op.hint
    other = _export_error(request, ValueError("bad dims"), "last words", None)
    assert "The exporter failed (ValueError)" in other.hint and "last words" in other.hint
    assert "operator" not in other.hint
