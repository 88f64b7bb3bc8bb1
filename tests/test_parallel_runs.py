"""Runs of one model on one target go in parallel, and an unchanged model is not redone.

Four ``aidge-deploy profile`` processes of the same model start together on an empty cache
(host, then the emulated mps2-an386): all must succeed with the same figures — the same
outputs; on the emulated board the same flash/RAM sizes and the same (deterministic)
instruction counts. A second profile of an unchanged model reuses its export and its
build. The caches are written by renaming a private folder into place, so nothing of a
run ever lands half-written where another run reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aidge_deploy.boards.sbc.layout import RemoteLayout, eviction_command
from envparts import missing

pytestmark = [pytest.mark.slow]


def parallel_profiles(
    model: Path, target: str, cache: Path, *, as_json: bool, n: int = 4
) -> list[str]:
    """``n`` simultaneous ``profile`` processes on an empty cache; their standard outputs."""
    env = {**os.environ, "AIDGE_DEPLOY_CACHE_DIR": str(cache), "COLUMNS": "200"}
    argv = [sys.executable, "-m", "aidge_deploy.cli.main", "profile", str(model),
            "--target", target, "--iterations", "3", *(["--json"] if as_json else [])]  # fmt: skip
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(n)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        outputs.append(out)
    return outputs


def test_four_parallel_profiles_on_host(tiny_cnn: Path, tmp_path: Path) -> None:
    results = [
        json.loads(out)
        for out in parallel_profiles(tiny_cnn, "host", tmp_path / "cache", as_json=True)
    ]
    for data in results:
        assert data["latency"]["n"] == 3 and data["latency"]["median"] > 0
        assert len(data["layers"]) >= 3
        first = results[0]
        assert [la["name"] for la in data["layers"]] == [la["name"] for la in first["layers"]]
        assert all(la["time_ms"] and la["time_ms"] > 0 for la in data["layers"])
        assert data["memory_peak_bytes"] == first["memory_peak_bytes"]
        assert data["memory_peak_bytes"]["total"] > 0
        # every run read the complete binary of the one shared build (never 0 B mid-write)
        sizes = (data["binary"]["image_bytes"], data["binary"]["static_data_bytes"])
        assert sizes[0] > 1000 and sizes[1] > 0, data["binary"]
        assert sizes == (first["binary"]["image_bytes"], first["binary"]["static_data_bytes"])
        rss = [m for m in data["measurements"] if m["name"] == "peak_rss"]
        assert rss and rss[0]["value"] > 100_000, "peak RSS of the program itself"
    exports = list((tmp_path / "cache" / "exports").iterdir())
    builds = list((tmp_path / "cache" / "builds").iterdir())
    assert len(exports) == 1 and len(builds) == 1, (exports, builds)  # no private leftovers


@pytest.mark.qemu
def test_four_parallel_profiles_on_mps2_an386(tiny_cnn: Path, tmp_path: Path) -> None:
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        missing("qemu-system-arm or the Arm cross toolchain is not installed")
    outputs = parallel_profiles(tiny_cnn, "mps2-an386", tmp_path / "cache", as_json=True)
    figures = []
    for out in outputs:
        data = json.loads(out)
        binary = data["binary"]
        counts = {m["name"]: m for m in data["measurements"]}["emulated_instructions"]
        layers = tuple(
            (la["name"], la["counters"]["emulated_instructions"]) for la in data["layers"]
        )
        assert counts["provenance"] == "emulated" and len(layers) >= 3, out[-3000:]
        assert binary["flash_bytes"] > 1000 and binary["ram_bytes"] > 1000, binary
        figures.append((binary["flash_bytes"], binary["ram_bytes"], counts["value"], layers))
    # every run read the same complete ELF and counted the same (icount is exact)
    assert len(set(figures)) == 1, figures


def test_second_profile_neither_reexports_nor_rebuilds(
    tiny_cnn: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aidge_deploy
    from aidge_deploy.exportcache import is_cached, prepare_export
    from aidge_deploy.modelexport import ExportRequest
    from aidge_deploy.progress import ProgressKind, ProgressUpdate

    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    request = ExportRequest(model=tiny_cnn, target="host", out_dir=Path("."), nb_iterations=3)
    statuses: list[str] = []

    def progress(update: ProgressUpdate) -> None:
        if update.stage == "Build" and update.kind == ProgressKind.STATUS:
            statuses.append(update.message)

    assert not is_cached(request)
    first = prepare_export(request)
    assert is_cached(request)
    aidge_deploy.deploy(first.artifact, aidge_deploy.DeployConfig(), progress=progress)
    manifest_time = (first.path / ".aidge-export.json").stat().st_mtime_ns
    second = prepare_export(request)
    aidge_deploy.deploy(second.artifact, aidge_deploy.DeployConfig(), progress=progress)
    assert not first.reused and second.reused and second.path == first.path
    assert (second.path / ".aidge-export.json").stat().st_mtime_ns == manifest_time
    assert statuses == ["built", "cached"]
    # another setting is another export (the key covers what determines it)
    other = prepare_export(ExportRequest(**{**request.__dict__, "nb_iterations": 4}))
    assert not other.reused and other.path != first.path
    # the model's bytes are in the key, not its name or time
    copy = tmp_path / "copy.onnx"
    shutil.copy(tiny_cnn, copy)
    renamed = prepare_export(ExportRequest(**{**request.__dict__, "model": copy}))
    assert renamed.key == first.key


def test_cli_says_where_the_export_went_and_that_it_was_reused(
    tiny_cnn: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "AIDGE_DEPLOY_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    argv = [sys.executable, "-m", "aidge_deploy.cli.main", "profile", str(tiny_cnn),
            "--iterations", "3"]  # fmt: skip
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    export_dir = tmp_path / "cache" / "exports"
    (entry,) = list(export_dir.iterdir())
    assert f"Export: {entry}" in first.stdout and "exported in" in first.stdout
    second = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"Export: {entry}" in second.stdout and "reused" in second.stdout
    assert (tmp_path / "cache" / "runs").is_dir()
    logs = sorted((tmp_path / "cache" / "runs").glob("*/export.log"))
    assert len(logs) == 2 and "reused the export" in logs[1].read_text()


def test_parallel_builds_of_one_export_share_one_cache_entry(
    export_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aidge_deploy.artifact import load_export_artifact
    from aidge_deploy.buildsys import build_export, plan_build

    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    export = tmp_path / "export"
    shutil.copytree(Path(export_factory("benchmark").path), export)
    artifact = load_export_artifact(export)
    outcomes: list[Any] = []
    barrier = threading.Barrier(3)

    def build(i: int) -> None:
        barrier.wait()
        try:
            outcomes.append(
                build_export(artifact, plan_build(artifact, None), tmp_path / f"b{i}.log")
            )
        except Exception as exc:  # collected, asserted below
            outcomes.append(exc)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert all(not isinstance(o, Exception) for o in outcomes), outcomes
    paths = {o.artifact_path for o in outcomes}
    assert len(paths) == 1 and next(iter(paths)).is_file()
    entries = list((tmp_path / "cache" / "builds").iterdir())
    assert len(entries) == 1, entries  # the losers' private folders are gone
    run = subprocess.run([str(next(iter(paths)))], cwd=export, capture_output=True, timeout=60)
    assert run.returncode == 0


def test_eviction_spares_folders_another_run_may_be_using(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    now = time.time()
    for i in range(6):
        folder = exports / f"e{i}"
        folder.mkdir(parents=True)
        age_h = 5 - i if i < 3 else 0.1  # e0..e2 hours old, e3..e5 used minutes ago
        os.utime(folder, (now - age_h * 3600, now - age_h * 3600 - i))
    layout = RemoteLayout(str(tmp_path), "e5", user_workdir=False)
    subprocess.run(["sh", "-c", eviction_command(layout, keep=2)], check=True, timeout=30)
    assert sorted(p.name for p in exports.iterdir()) == ["e3", "e4", "e5"]
