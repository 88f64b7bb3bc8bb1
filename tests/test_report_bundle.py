"""Result bundles written from real host deploys: files, schemas, manifest, secrets, atomicity."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from aidge_deploy.artifact import load_export_artifact
from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ReportError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.pipeline.default import build_default_pipeline
from aidge_deploy.pipeline.runner import PipelineRunner
from aidge_deploy.pipeline.stages.report import ReportStage
from aidge_deploy.report import ProfileFormat, verify_bundle, write_bundle
from aidge_deploy.report.manifest import MANIFEST_NAME
from aidge_deploy.report.redact import Scrubber
from aidge_deploy.report.schemas import SchemaName, load_schema, schema_errors
from aidge_deploy.report.summary import unlabelled_numbers
from aidge_deploy.results import TimingSeries
from envparts import missing

pytestmark = pytest.mark.slow

SECRETS = ("s3cr3t-Password-4242", "tok-0123456789abcdef", "urlpw-9f8e7d")


def deploy_with_report(artifact: Any, config: DeployConfig, work_dir: Path) -> PipelineContext:
    """Run the default pipeline, with the ReportStage appended when it is not wired yet."""
    runner = build_default_pipeline()
    stages = list(runner.stages)
    if not any(isinstance(s, ReportStage) for s in stages):
        stages.append(ReportStage())
    ctx = PipelineContext(config=config, artifact=load_export_artifact(artifact), work_dir=work_dir)
    try:
        PipelineRunner(stages).run(ctx)
    finally:
        if ctx.target is not None and ctx.deploy_context is not None:
            ctx.target.cleanup(ctx.deploy_context)
    return ctx


@pytest.fixture(scope="module")
def secret_run(export_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> PipelineContext:
    root = tmp_path_factory.mktemp("bundle")
    config = DeployConfig(
        report_dir=root / "bundle",
        api_password=SECRETS[0],
        api_url=f"https://alice:{SECRETS[2]}@farm.example/api",
        extra={"auth_token": SECRETS[1], "note": "token above"},
    )
    return deploy_with_report(export_factory("benchmark"), config, root / "work")


@pytest.fixture(scope="module")
def bundle_dir(secret_run: PipelineContext) -> Path:
    assert secret_run.config.report_dir is not None
    return secret_run.config.report_dir


def _load(bundle: Path, name: str) -> Any:
    return json.loads((bundle / name).read_text())


def test_stage_records_paths_and_result_report_dir(
    secret_run: PipelineContext, bundle_dir: Path
) -> None:
    assert secret_run.deploy_result.report_dir == bundle_dir
    names = {p.relative_to(bundle_dir).as_posix() for p in secret_run.report_paths}
    assert {
        "summary.json",
        "profile_results.csv",
        "run_metadata.json",
        "report.html",
        "manifest.json",
        "model_explorer/me_overlay_time.json",
    } <= names
    assert any(n.startswith("logs/") for n in names)
    assert all(p.is_file() for p in secret_run.report_paths)
    # no staging directory left next to the bundle
    assert [p.name for p in bundle_dir.parent.iterdir() if p.name.startswith(".")] == []


def test_manifest_lists_every_file_and_verifies(bundle_dir: Path) -> None:
    manifest = verify_bundle(bundle_dir)
    on_disk = {
        p.relative_to(bundle_dir).as_posix() for p in bundle_dir.rglob("*") if p.is_file()
    } - {MANIFEST_NAME}
    assert {e.path for e in manifest.entries} == on_disk
    assert manifest.comparability["target"] == "host"


def test_json_documents_match_the_shipped_schemas(bundle_dir: Path) -> None:
    for name, schema in (
        ("summary.json", SchemaName.SUMMARY),
        ("run_metadata.json", SchemaName.RUN_METADATA),
        ("manifest.json", SchemaName.MANIFEST),
    ):
        assert schema_errors(schema, _load(bundle_dir, name)) == [], name
    for schema in SchemaName:
        assert load_schema(schema)["$schema"].startswith("https://json-schema.org/draft/2020-12")


def test_schema_rejects_a_metric_without_provenance(bundle_dir: Path) -> None:
    summary = _load(bundle_dir, "summary.json")
    del summary["metrics"]["latency"]["provenance"]
    errors = schema_errors(SchemaName.SUMMARY, summary)
    assert errors and "provenance" in errors[0]


def test_summary_figures_carry_unit_and_provenance(
    bundle_dir: Path, secret_run: PipelineContext
) -> None:
    summary = _load(bundle_dir, "summary.json")
    result = secret_run.deploy_result
    assert summary["provenance"] == "host"
    latency = summary["metrics"]["latency"]
    assert latency["unit"] == "ms" and latency["provenance"] == "host"
    assert latency["aggregate"]["n_used"] == len(result.timings or [])
    assert summary["latency"]["samples"] == list(result.timings or [])
    # a host program is a file: its loadable size is no "flash", and sizes are static facts
    assert "flash_bytes" not in summary["metrics"]
    assert summary["metrics"]["image_bytes"]["unit"] == "B"
    for key in ("image_bytes", "static_data_bytes", "activation_memory", "macs", "params"):
        assert summary["metrics"][key]["provenance"] == "static", key
    assert latency["resolution"] == 1e-6  # steady_clock printed to 1 ns
    for metric in summary["metrics"].values():
        assert metric["unit"] and metric["provenance"] in ("host", "static")
    assert [layer["name"] for layer in summary["layers"]] == [layer.name for layer in result.layers]
    for layer in summary["layers"]:
        assert layer["metrics"]["time"]["unit"] == "ms"
    assert summary["validity"]["status"] in ("valid", "degraded")


def test_run_metadata(bundle_dir: Path, secret_run: PipelineContext) -> None:
    meta = _load(bundle_dir, "run_metadata.json")
    assert meta["tool"]["name"] == "aidge-deploy"
    assert meta["packages"]["aidge-core"] == "0.10.1"
    assert meta["target"]["hardware"]["name"] == "host"
    assert meta["export"]["manifest"]["protocol"] == "aidge-stdout-benchmark/v1"
    assert set(meta["toolchain"]) == {"cmake", "c++"}
    assert meta["toolchain"]["cmake"].startswith("cmake version")
    for stage in ("Build", "Execute", "ParseOutput", "Assemble"):
        assert meta["stage_durations_ms"][stage] >= 0
    assert meta["run_id"] == _load(bundle_dir, "summary.json")["run_id"]
    assert meta["config"]["api_password"] == "***"
    log_rel = meta["log"]["file"]
    assert secret_run.execution is not None and secret_run.execution.log_path is not None
    assert (bundle_dir / log_rel).read_bytes() == secret_run.execution.log_path.read_bytes()


def test_profile_csv_and_overlay(bundle_dir: Path, secret_run: PipelineContext) -> None:
    rows = list(csv.DictReader((bundle_dir / "profile_results.csv").open()))
    result = secret_run.deploy_result
    assert [r["layer"] for r in rows] == [layer.name for layer in result.layers]
    assert [float(r["time_ms"]) for r in rows] == [layer.time_ms for layer in result.layers]
    assert {r["provenance"] for r in rows} == {"host"}
    overlay = _load(bundle_dir, "model_explorer/me_overlay_time.json")
    ((graph_id, graph),) = overlay.items()
    assert graph_id == Path(secret_run.artifact.path).name
    assert graph["results"] == {layer.name: {"value": layer.time_ms} for layer in result.layers}
    assert graph["gradient"][0]["stop"] == 0 and graph["gradient"][-1]["stop"] == 1


def test_no_secret_in_any_bundle_file(bundle_dir: Path) -> None:
    files = [p for p in bundle_dir.rglob("*") if p.is_file()]
    assert len(files) >= 7
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} leaked into {path.name}"
    meta = _load(bundle_dir, "run_metadata.json")
    assert meta["config"]["extra"]["auth_token"] == "***"
    assert meta["config"]["api_url"] == "https://farm.example/api"


def test_secret_echoed_in_the_log_is_scrubbed(secret_run: PipelineContext, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(f"board says: password={SECRETS[0]}\ninference_time: 0.1 ms\n")
    bundle = write_bundle(
        tmp_path / "b",
        secret_run.deploy_result,
        secret_run.config,
        secret_run.artifact,
        log_path=log,
        toolchain={},
    )
    copied = (bundle.path / "logs" / "run.log").read_text()
    assert SECRETS[0] not in copied and "password=***" in copied
    verify_bundle(bundle.path)


def test_a_secret_that_is_also_a_number_masks_text_but_never_numbers(
    secret_run: PipelineContext, tmp_path: Path
) -> None:
    """A 4-digit secret ("1234") is masked where text can carry it (the log, the config
    snapshot, notices) but a latency, a layer time or a digest that contains it stays intact."""
    secret = "1234"
    config = dataclasses.replace(
        secret_run.config, api_password=secret, extra={"auth_token": secret, "pin": secret}
    )
    base = secret_run.deploy_result
    layers = tuple(dataclasses.replace(layer, time_ms=1234.0) for layer in base.layers)
    result = dataclasses.replace(
        base,
        timings=TimingSeries([1234.0, 1234.5, 12345.0, 1234.0]),
        layers=layers,
        metrics={**base.metrics, "notices": [f"the board echoed pin {secret}"]},
    )
    log = tmp_path / "run.log"
    log.write_text(f"pin={secret}\ninference_time: 1234 ms\n")
    bundle = write_bundle(
        tmp_path / "b", result, config, secret_run.artifact, log_path=log, toolchain={}
    )
    summary = _load(bundle.path, "summary.json")
    assert summary["latency"]["samples"] == [1234.0, 1234.5, 12345.0, 1234.0]
    assert {layer["metrics"]["time"]["value"] for layer in summary["layers"]} == {1234.0}
    assert summary["notices"] == ["the board echoed pin ***"]
    rows = list(csv.DictReader((bundle.path / "profile_results.csv").open()))
    assert rows and {row["time_ms"] for row in rows} == {"1234.0"}
    meta = _load(bundle.path, "run_metadata.json")
    assert meta["config"]["extra"] == {"auth_token": "***", "pin": "***"}
    assert (bundle.path / "logs" / "run.log").read_text() == "pin=***\ninference_time: *** ms\n"
    verify_bundle(bundle.path)  # digests in manifest.json were not rewritten either
    # a chance match inside a digest is not a leak: digests are never scrubbed
    with_secret = Scrubber([secret]).json({"export_hash": "ab1234cd", "note": "x1234"})
    assert with_secret == {"export_hash": "ab1234cd", "note": "x***"}


def _copy(bundle: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(bundle, dst)
    return dst


def test_tampered_file_fails_verification(bundle_dir: Path, tmp_path: Path) -> None:
    copy = _copy(bundle_dir, tmp_path)
    summary = copy / "summary.json"
    summary.write_text(summary.read_text().replace('"host"', '"silicon"', 1))
    with pytest.raises(ReportError, match=r"summary\.json was modified"):
        verify_bundle(copy)


def test_missing_file_fails_verification(bundle_dir: Path, tmp_path: Path) -> None:
    copy = _copy(bundle_dir, tmp_path)
    (copy / "profile_results.csv").unlink()
    with pytest.raises(ReportError, match="listed in the manifest but missing"):
        verify_bundle(copy)


def test_added_file_fails_verification(bundle_dir: Path, tmp_path: Path) -> None:
    copy = _copy(bundle_dir, tmp_path)
    (copy / "extra.txt").write_text("x")
    with pytest.raises(ReportError, match="not listed"):
        verify_bundle(copy)


@pytest.mark.parametrize("bad_path", ["../outside.txt", "/etc/passwd", "logs/../../x"])
def test_path_escaping_entry_fails_verification(
    bundle_dir: Path, tmp_path: Path, bad_path: str
) -> None:
    copy = _copy(bundle_dir, tmp_path)
    manifest = json.loads((copy / MANIFEST_NAME).read_text())
    manifest["files"][0]["path"] = bad_path
    (copy / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ReportError, match="outside the bundle"):
        verify_bundle(copy)


def test_symlink_escaping_the_bundle_fails_verification(bundle_dir: Path, tmp_path: Path) -> None:
    copy = _copy(bundle_dir, tmp_path)
    outside = tmp_path / "outside.csv"
    shutil.copy(copy / "profile_results.csv", outside)
    (copy / "profile_results.csv").unlink()
    os.symlink(outside, copy / "profile_results.csv")
    with pytest.raises(ReportError, match="outside the bundle"):
        verify_bundle(copy)


def test_directory_without_manifest_is_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"manifest\.json is missing"):
        verify_bundle(tmp_path)


def test_json_profile_format_and_replacing_an_earlier_bundle(
    secret_run: PipelineContext, bundle_dir: Path, tmp_path: Path
) -> None:
    target = _copy(bundle_dir, tmp_path)
    old_run = verify_bundle(target).run_id
    with pytest.raises(ReportError, match="already holds a result bundle") as refused:
        write_bundle(
            target, secret_run.deploy_result, secret_run.config, secret_run.artifact, toolchain={}
        )
    assert refused.value.hint and "--overwrite" in refused.value.hint
    assert verify_bundle(target).run_id == old_run  # untouched
    bundle = write_bundle(
        target,
        secret_run.deploy_result,
        secret_run.config,
        secret_run.artifact,
        profile_format=ProfileFormat.JSON,
        toolchain={},
        overwrite=True,
    )
    manifest = verify_bundle(target)
    assert manifest.run_id == bundle.run_id != old_run
    assert not (target / "profile_results.csv").exists()
    doc = _load(target, "profile_results.json")
    assert schema_errors(SchemaName.PROFILE_RESULTS, doc) == []
    assert [layer["name"] for layer in doc["layers"]] == [
        layer.name for layer in secret_run.deploy_result.layers
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]  # no leftovers


def test_non_bundle_directory_is_refused_and_left_untouched(
    secret_run: PipelineContext, tmp_path: Path
) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("precious")
    with pytest.raises(ReportError, match="not a result bundle"):
        write_bundle(
            target, secret_run.deploy_result, secret_run.config, secret_run.artifact, toolchain={}
        )
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # staging removed


def test_failure_while_writing_leaves_no_bundle(
    secret_run: PipelineContext, tmp_path: Path
) -> None:
    # /proc/self/mem is a regular file whose read at offset 0 fails with EIO: a real I/O
    # error in the middle of writing (after summary.json and run_metadata.json)
    unreadable = Path("/proc/self/mem")
    if not unreadable.is_file():
        missing("needs Linux /proc")
    with pytest.raises(ReportError, match="Could not write the result bundle"):
        write_bundle(
            tmp_path / "out",
            secret_run.deploy_result,
            secret_run.config,
            secret_run.artifact,
            log_path=unreadable,
            toolchain={},
        )
    assert list(tmp_path.iterdir()) == []  # neither a bundle nor a staging directory


def test_every_number_of_the_summary_has_a_unit_and_a_provenance(bundle_dir: Path) -> None:
    """DESIGN §6 over the whole document, not only ``metrics``: latency, memory, timing,
    cycle samples, stage durations (and the power block: ``test_power_e2e``)."""
    summary = _load(bundle_dir, "summary.json")
    assert unlabelled_numbers(summary) == []
    assert summary["stage_durations"]["unit"] == "ms"
    assert summary["stage_durations"]["provenance"] == "host"
    assert summary["memory"]["provenance"] == "static"
    # the walk can fail: a bare number anywhere is named by its path
    assert unlabelled_numbers({**summary, "stage_durations": {"Build": 12.5}}) == [
        "$.stage_durations.Build"
    ]
    memory = {k: v for k, v in summary["memory"].items() if k != "provenance"}
    found = unlabelled_numbers({**summary, "memory": memory})
    assert "$.memory.image_bytes" in found and all(p.startswith("$.memory.") for p in found)
