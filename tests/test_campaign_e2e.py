"""Campaigns end to end: real exports of small models, the host and three QEMU boards.

* ``profile lenet.onnx --targets host,mps2-an386,mps3-an547,netduinoplus2`` gives four
  bundles and a side-by-side view whose figures are those of four single-target runs.
* A campaign of 3 models x 4 targets x {float32, int8}, validated on a small labelled set:
  stopped half-way with Ctrl-C (nothing left running), then run again, it runs only the
  missing cells; the cell whose model does not fit its board is reported, the others
  complete; the CSV has a row per cell, the history a record per finished cell, and the
  report renders in Chromium with its Pareto charts.

The models are tiny (LeNet-style, the tiny CNN, and an MLP whose float32 weights overflow
netduinoplus2's 1 MiB of flash), run with few iterations; exports and builds are shared
through the content-keyed caches, so the second run of the campaign re-exports nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import modelzoo
from browser import screenshot
from envparts import needs
from test_interrupt import TreeWatch, assert_nothing_left, interrupt

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.slow,
    needs(shutil.which("qemu-system-arm") is not None, "qemu-system-arm is not installed"),
    needs(
        shutil.which("arm-none-eabi-g++") is not None, "the Arm cross toolchain is not installed"
    ),
]

TARGETS = ("host", "mps2-an386", "mps3-an547", "netduinoplus2")
EMULATED = TARGETS[1:]
#: figures that are deterministic: static facts of the build and QEMU's exact counts
EXACT = ("emulated_instructions", "flash_bytes", "ram_bytes", "image_bytes",
         "static_data_bytes", "activation_memory", "macs", "params")  # fmt: skip
ENV = {"COLUMNS": "200", "AIDGE_DEPLOY_API_PASSWORD": ""}


def cli(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aidge_deploy.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **ENV, **(env or {})},
    )


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three models, each with 4 calibration inputs and 6 labelled samples."""
    root = tmp_path_factory.mktemp("campaign-zoo")
    for name, make in (("lenet", modelzoo.lenet), ("tiny", modelzoo.tiny_cnn),
                       ("fat", modelzoo.fat_mlp)):  # fmt: skip
        model = make(root / "models" / f"{name}.onnx")
        xs, ys = modelzoo.labelled_set(model, 10, seed=3)
        (root / "calib" / name).mkdir(parents=True)
        np.savez(root / "calib" / name / "calib.npz", *list(xs[6:]))
        (root / "data" / name).mkdir(parents=True)
        np.savez(root / "data" / name / "val.npz", x=xs[:6], y=ys[:6])
    return root


def summaries(folder: Path) -> dict[str, dict[str, Any]]:
    """target -> summary.json of each cell bundle of a campaign folder."""
    out = {}
    for path in sorted(folder.glob("cells/*/bundle/summary.json")):
        doc = json.loads(path.read_text())
        out[doc["target"]] = doc
    return out


# ----------------------------------------------------------------------------- profile


def test_profile_targets_gives_four_bundles_side_by_side_as_single_runs(
    zoo: Path, tmp_path: Path
) -> None:
    model = zoo / "models" / "lenet.onnx"
    out = tmp_path / "side"
    done = cli("profile", str(model), "--targets", ",".join(TARGETS), "--iterations", "4",
               "--report", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    bundles = summaries(out)
    assert sorted(bundles) == sorted(TARGETS)  # four bundles, one per target
    # the side-by-side view: a terminal table and a page, each figure with its provenance
    text = " ".join(done.stdout.split())
    assert "lenet: targets side by side" in text
    assert "(emulated)" in text and "(estimated)" in text and "(host)" in text
    page = (out / "report.html").read_text()
    cells = json.loads((out / "cells.json").read_text())["cells"]
    assert len(cells) == 4 and all(c["status"] == "done" for c in cells)
    for cell in cells:
        # the view shows exactly the bundle's figures
        summary = bundles[cell["target"]["target"]]
        assert cell["figures"] == summary["metrics"]
        lat = summary["metrics"]["latency"]
        assert f'data-value="{lat["value"]!r}"' in page
        assert f'data-provenance="{lat["provenance"]}"' in page
    # four single-target runs give the same figures
    for target in TARGETS:
        single = tmp_path / f"single-{target}"
        run = cli("profile", str(model), "--target", target, "--iterations", "4",
                  "--report", str(single))  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        one = json.loads((single / "summary.json").read_text())["metrics"]
        many = bundles[target]["metrics"]
        assert one.keys() == many.keys()
        for name in EXACT:
            if name in one:
                assert one[name] == many[name], (target, name)
        assert one["latency"]["provenance"] == many["latency"]["provenance"]
        assert one["latency"]["resolution"] == many["latency"]["resolution"]
        if target in EMULATED:  # an instruction count at the core clock: exact too
            assert one["latency"]["value"] == many["latency"]["value"]


def test_profile_targets_with_a_labelled_set_shows_each_targets_accuracy(
    zoo: Path, tmp_path: Path
) -> None:
    """``--dataset``: the top-1 accuracy on each target: a board answers sample by sample
    (its validation protocol); the host's output export is built once and every sample
    run through it."""
    model = zoo / "models" / "tiny.onnx"
    out = tmp_path / "acc"
    done = cli("profile", str(model), "--targets", "host,mps2-an386", "--iterations", "2",
               "--dataset", str(zoo / "data" / "tiny"), "--report", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    cells = {c["target"]["label"]: c for c in json.loads((out / "cells.json").read_text())["cells"]}
    board = cells["mps2-an386"]["figures"]["accuracy"]
    # the labels are the float model's own predictions: the board's float32 build agrees
    assert (board["value"], board["samples"], board["provenance"]) == (1.0, 6, "emulated")
    host = cells["host"]["figures"]["accuracy"]
    assert (host["value"], host["samples"], host["provenance"]) == (1.0, 6, "host")
    text = " ".join(done.stdout.split())
    assert "Top-1 accuracy on target" in text
    assert 'data-quantity="accuracy"' in (out / "report.html").read_text()


def test_run_an_export_on_several_boards_of_its_target(export_factory: Any, tmp_path: Path) -> None:
    """``run EXPORT --targets``: the same firmware on QEMU here and on a lab's emulated board."""
    export = Path(export_factory("benchmark", target="mps2-an386", nb_iterations=3).path)
    lab = tmp_path / "lab.yaml"
    lab.write_text("version: 1\nboards:\n  an386-b: {target: mps2-an386, emulated: true}\n")
    out = tmp_path / "two"
    done = cli("run", str(export), "--targets", "mps2-an386,lab:an386-b", "--lab", str(lab),
               "--report", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    cells = json.loads((out / "cells.json").read_text())["cells"]
    assert [c["target"]["label"] for c in cells] == ["mps2-an386", "lab:an386-b"]
    a, b = (c["figures"] for c in cells)
    assert a["emulated_instructions"] == b["emulated_instructions"]
    # an export runs on its own target only: said before anything runs
    refused = cli("run", str(export), "--targets", "mps2-an386,host")
    assert refused.returncode == 2
    assert "is an export for mps2-an386" in " ".join(refused.stderr.split())


# ----------------------------------------------------------------------------- campaign


def campaign_file(zoo: Path, folder: Path, targets: list[str], **extra: Any) -> Path:
    doc: dict[str, Any] = {
        "version": 1,
        "name": "three-models",
        "models": [
            {
                "path": str(zoo / "models" / f"{n}.onnx"),
                "calibration": str(zoo / "calib" / n),
                "dataset": str(zoo / "data" / n),
            }
            for n in ("lenet", "tiny", "fat")
        ],
        "targets": targets,
        "options": {"dtype": ["float32", "int8"], "iterations": 2, "warmup": 1},
        "run": {"jobs": 2},
        **extra,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def finished(folder: Path) -> dict[str, tuple[str, str]]:
    """cell id -> (status, time finished) of the cells with a record."""
    out = {}
    for path in folder.glob("cells/*/cell.json"):
        doc = json.loads(path.read_text())
        out[path.parent.name] = (doc["status"], doc["finished"])
    return out


@pytest.fixture(scope="module")
def local_campaign(zoo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The 24-cell campaign, stopped with Ctrl-C once a few cells finished, then re-run."""
    root = tmp_path_factory.mktemp("campaign-local")
    spec = campaign_file(zoo, root, list(TARGETS))
    out = root / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aidge_deploy.cli.main", "campaign", str(spec), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **ENV},
    )
    watch = TreeWatch(proc.pid)
    try:
        # stopped while cells run: once some are finished and QEMU or a compiler is busy
        deadline = time.monotonic() + 900
        while len(finished(out)) < 6 or not any(
            p.name().startswith(("qemu-system", "cc1", "arm-none", "make")) for p in watch.poll()
        ):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the campaign never got going"
            time.sleep(0.05)
        stderr = interrupt(proc, signal.SIGINT, watch)
        assert_nothing_left(watch)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = finished(out)
    again = cli("campaign", str(spec), "--out", str(out), timeout=1800)
    yield {"root": root, "out": out, "spec": spec, "before": before, "stderr": stderr,
           "again": again}  # fmt: skip


#: the 24-cell campaign runs twice (stopped, then finished) in its fixture: past the
#: default per-test timeout on a loaded machine
CAMPAIGN_TIMEOUT = pytest.mark.timeout(1800)


@CAMPAIGN_TIMEOUT
def test_campaign_interrupted_then_rerun_runs_only_the_missing_cells(
    local_campaign: dict[str, Any],
) -> None:
    out, before, again = local_campaign["out"], local_campaign["before"], local_campaign["again"]
    assert 6 <= len(before) < 24, before
    assert again.returncode == 1, again.stderr[-3000:]  # one cell failed (does not fit)
    text = " ".join(again.stdout.split())
    ran = int(re.search(r"(\d+) cell\(s\) run, (\d+) kept from earlier runs", text).group(1))
    kept = int(re.search(r"(\d+) kept from earlier runs", text).group(1))
    assert (ran, kept) == (24 - len(before), len(before))
    after = finished(out)
    # the cells of the first run kept their records (same time finished): not run again
    assert len(after) == 24 and {k: after[k] for k in before} == before
    # Ctrl-C said where the campaign is, and the report was written from what finished
    assert str(out) in " ".join(local_campaign["stderr"].split())


def test_the_cell_that_does_not_fit_is_reported_and_the_others_complete(
    local_campaign: dict[str, Any],
) -> None:
    out, again = local_campaign["out"], local_campaign["again"]
    cells = json.loads((out / "cells.json").read_text())["cells"]
    failed = [c for c in cells if c["status"] == "failed"]
    assert [(c["model"]["name"], c["target"]["label"], c["options"]["dtype"]) for c in failed] == [
        ("fat", "netduinoplus2", "float32")
    ]
    error = failed[0]["error"]
    assert error["type"] == "MemoryFitError" and error["does_not_fit"]
    assert "overflow" in error["message"] and Path(error["log"]).is_file()
    assert "Failed (does not fit): fat on netduinoplus2 (float32)" in " ".join(again.stderr.split())
    done = [c for c in cells if c["status"] == "done"]
    assert len(done) == 23
    for cell in done:
        assert (out / "cells" / cell["id"] / "bundle" / "summary.json").is_file()
        acc = cell["figures"]["accuracy"]
        provenance = "host" if cell["target"]["label"] == "host" else "emulated"
        assert 0.0 <= acc["value"] <= 1.0 and acc["provenance"] == provenance, cell["id"]
        assert acc["samples"] == 6
        if cell["options"]["dtype"] == "float32":  # labels are the float model's own
            assert acc["value"] == 1.0, cell["id"]
        if cell["options"]["dtype"] == "int8":
            quant = cell["quantisation"]
            assert "aidge_quantization" in quant["method"]
            assert quant["calibration_samples"] == 4 and quant["calibration"] == "samples"
        else:
            assert cell["quantisation"] is None
    # the int8 fat model fits the board its float32 twin overflows
    fat_int8 = next(c for c in done if c["id"].startswith("fat-netduinoplus2-int8"))
    assert fat_int8["fits"] is True


def test_the_campaign_files_csv_json_history(local_campaign: dict[str, Any]) -> None:
    import csv

    from aidge_deploy.history import HistoryStore

    out = local_campaign["out"]
    with (out / "cells.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 24
    header = list(rows[0])
    for column in ("latency [ms]", "emulated_instructions [instructions]", "flash_bytes [B]",
                   "accuracy [ratio]", "latency provenance"):  # fmt: skip
        assert column in header
    doc = json.loads((out / "cells.json").read_text())
    assert len(doc["cells"]) == 24 and doc["int8_cost"]
    with HistoryStore(out / "history.db") as history:
        records = history.records(source="campaign")
    assert len(records) == 23  # one per finished cell, over both runs
    names = {(r.identity.name, r.identity.target, r.identity.dtype) for r in records}
    assert ("lenet.onnx", "mps3-an547", "int8") in names  # as profile --history names it


def test_the_campaign_report_renders_with_its_pareto_charts(
    local_campaign: dict[str, Any], chromium: Any
) -> None:
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.goto((local_campaign["out"] / "report.html").as_uri())
    charts = page.locator("svg.scatter")
    assert charts.count() == 2 * len(TARGETS)
    assert page.locator("svg.scatter circle.point").count() >= 23
    box = charts.first.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 100
    assert page.locator('td[data-state="does-not-fit"]').count() >= 1
    assert page.locator('table[data-table="int8"] tr').count() > 1
    screenshot(page, "campaign-report")
    page.close()


# ----------------------------------------------------------------------------- farm

FARM_ADMIN = ("admin", "admin-pass-123")
FARM_TARGETS = [f"farm:{t}" for t in EMULATED]


@pytest.fixture(scope="module")
def farm_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``aidge-deploy farm up``: coordinator, service and one agent with the three emulated
    boards, as a lab runs it on one machine; its API URL."""
    from farmkit import farm_available

    reason = farm_available()
    if reason is not None:
        from envparts import missing

        missing(reason)
    data = tmp_path_factory.mktemp("campaign-farm") / "farm"
    env = {**os.environ, "AIDGE_DEPLOY_API_PASSWORD": FARM_ADMIN[1]}
    exe = str(Path(sys.executable).parent / "aidge-deploy")
    subprocess.run([exe, "farm", "user", "add", FARM_ADMIN[0], "--admin", "--data-dir",
                    str(data)], env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    log = (data.parent / "farm-up.log").open("wb")
    up = subprocess.Popen(
        [exe, "farm", "up", "--data-dir", str(data), "--port", "0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        url = _farm_ready(data, up)
        yield url
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait(10)
        log.close()


def _farm_ready(data: Path, up: subprocess.Popen[bytes]) -> str:
    import contextlib

    import httpx

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert up.poll() is None, (data.parent / "farm-up.log").read_text()[-3000:]
        url_file = data / "service.url"
        if url_file.exists():
            url = url_file.read_text().strip()
            with contextlib.suppress(httpx.HTTPError, KeyError):
                token = httpx.post(
                    url + "/api/token",
                    json={"username": FARM_ADMIN[0], "password": FARM_ADMIN[1]},
                ).json()["access_token"]
                boards = httpx.get(
                    url + "/api/boards", headers={"Authorization": f"Bearer {token}"}
                ).json()
                if len(boards) == 3 and all(b["state"] == "idle" for b in boards):
                    return url
        time.sleep(0.3)
    raise AssertionError("farm up never had its three boards idle")


def _farm_jobs(url: str, ids: list[int]) -> list[dict[str, Any]]:
    import httpx

    token = httpx.post(
        url + "/api/token", json={"username": FARM_ADMIN[0], "password": FARM_ADMIN[1]}
    ).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    return [httpx.get(f"{url}/api/jobs/{i}", headers=headers).json() for i in ids]


@pytest.mark.timeout(2400)  # 30 firmware builds on the farm's agent, at its lower priority
def test_the_same_campaign_on_the_farm_runs_concurrent_jobs_with_the_same_figures(
    zoo: Path, local_campaign: dict[str, Any], farm_up: str, tmp_path: Path
) -> None:
    spec = campaign_file(zoo, tmp_path, FARM_TARGETS,
                         farm={"url": farm_up + "/api", "username": FARM_ADMIN[0]})  # fmt: skip
    out = tmp_path / "out"
    done = cli("campaign", str(spec), "--out", str(out), timeout=2400,
               env={"AIDGE_DEPLOY_API_PASSWORD": FARM_ADMIN[1]})  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]  # the float32 MLP does not fit there either
    farm_cells = json.loads((out / "cells.json").read_text())["cells"]
    local_cells = json.loads((local_campaign["out"] / "cells.json").read_text())["cells"]
    local = {
        (c["model"]["name"], c["target"]["target"], c["options"]["dtype"]): c for c in local_cells
    }
    assert len(farm_cells) == 3 * 3 * 2
    for cell in farm_cells:
        twin = local[cell["model"]["name"], cell["target"]["target"], cell["options"]["dtype"]]
        assert cell["status"] == twin["status"], cell["id"]
        if cell["status"] != "done":
            assert cell["error"]["does_not_fit"] and cell["error"]["type"] == "MemoryFitError"
            continue
        assert cell["farm"]["job_id"] and cell["farm"]["board"] == cell["target"]["target"]
        # the board host's bundle, downloaded: the same figures as the local run's
        for name in (*EXACT, "latency", "accuracy"):
            if name in twin["figures"]:
                mine, theirs = cell["figures"][name], twin["figures"][name]
                assert (mine["value"], mine["unit"], mine["provenance"]) == (
                    theirs["value"], theirs["unit"], theirs["provenance"]
                ), (cell["id"], name)  # fmt: skip
    # the cells ran as farm jobs at the same time: some held a board (from its build to its
    # end) while another held its own
    jobs = _farm_jobs(farm_up, [c["farm"]["job_id"] for c in farm_cells if c.get("farm")])
    spans = [
        (j["times"]["building"], j["times"].get("done") or j["times"]["failed"])
        for j in jobs
        if "building" in j["times"]
    ]
    overlapping = sum(
        1 for i, (s1, e1) in enumerate(spans) for s2, e2 in spans[i + 1 :] if s1 < e2 and s2 < e1
    )
    assert overlapping >= 1, spans
    assert {j["board"] for j in jobs} == set(EMULATED)
    # the farm's dashboard shows the campaign's farm cells, as its live view did
    page = _dashboard(farm_up, "/campaigns")
    assert 'data-campaign="three-models-' in page
    flat = " ".join(page.split())
    assert "18</b> farm cells" in flat and "17</b> done" in flat and "1</b> failed" in flat


def _dashboard(url: str, path: str) -> str:
    """A dashboard page, logged in through its login form."""
    import httpx

    from farmweb import csrf

    with httpx.Client(base_url=url, timeout=60) as client:
        token = csrf(client.get("/login").text)
        login = {"username": FARM_ADMIN[0], "password": FARM_ADMIN[1], "csrf_token": token}
        assert client.post("/login", data={**login, "next": "/jobs"}).status_code == 303
        return client.get(path).text
