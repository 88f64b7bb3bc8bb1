"""Versioned result bundles: every JSON document against its schema, summary version 2 beside
the committed version-1 bundles (written by the code of commit 9409f9b, the last to write
``stage_durations_ms`` and ``timing.clock_hz``; see ``data/bundles/README.md``), read by one
typed reader in compare, the history, campaigns, the farm and the plug-in; a bundle of a
newer version refused with what to do."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.config import DeployConfig
from aidge_deploy.history.identity import bundle_facts
from aidge_deploy.history.store import HistoryStore
from aidge_deploy.metrics import Provenance
from aidge_deploy.report.compare import EXIT_ERROR, EXIT_PASS, compare_bundles
from aidge_deploy.report.manifest import MANIFEST_NAME, verify_bundle
from aidge_deploy.report.reader import read_bundle, read_summary
from aidge_deploy.report.schemas import (
    CURRENT_VERSIONS,
    SchemaName,
    SchemaVersionError,
    load_schema,
    readable_versions,
    schema_errors,
)
from test_report_bundle import deploy_with_report

SCHEMA1 = Path(__file__).parent / "data" / "bundles" / "schema1"
runner = CliRunner()

pytestmark = pytest.mark.slow


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def reseal(bundle: Path) -> None:
    """Rewrite the manifest's sizes and digests after a test edited a file of ``bundle``."""
    manifest = _json(bundle / MANIFEST_NAME)
    for entry in manifest["files"]:
        data = (bundle / entry["path"]).read_bytes()
        entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def new_bundle(export_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of this version: the committed bundles' model (``tiny_cnn``) on the host,
    its profile as JSON so every document kind is written."""
    root = tmp_path_factory.mktemp("versions")
    config = DeployConfig(report_dir=root / "new", extra={"report_format": "json"})
    deploy_with_report(export_factory("benchmark"), config, root / "work")
    return root / "new"


@pytest.fixture
def schema1(tmp_path: Path) -> dict[str, Path]:
    """Copies of the committed version-1 bundles (a test may not edit the originals)."""
    return {
        name: shutil.copytree(SCHEMA1 / name, tmp_path / name) for name in ("host", "mps2-an386")
    }


def _documents(bundle: Path) -> list[tuple[Path, SchemaName]]:
    found = [
        (bundle / "summary.json", SchemaName.SUMMARY),
        (bundle / "run_metadata.json", SchemaName.RUN_METADATA),
        (bundle / MANIFEST_NAME, SchemaName.MANIFEST),
        *((p, SchemaName.OVERLAY) for p in sorted((bundle / "model_explorer").glob("*.json"))),
    ]
    if (bundle / "profile_results.json").is_file():
        found.append((bundle / "profile_results.json", SchemaName.PROFILE_RESULTS))
    return found


def test_every_json_document_of_a_new_bundle_matches_its_schema(new_bundle: Path) -> None:
    on_disk = {p for p in new_bundle.rglob("*.json")}
    checked = _documents(new_bundle)
    assert {p for p, _ in checked} == on_disk  # no JSON file of the bundle goes unchecked
    assert any(s is SchemaName.OVERLAY for _, s in checked)
    for path, schema in checked:
        assert schema_errors(schema, _json(path)) == [], path.name
    summary = _json(new_bundle / "summary.json")
    assert summary["schema_version"] == CURRENT_VERSIONS[SchemaName.SUMMARY] == 2
    assert "stage_durations_ms" not in summary and "stage_durations" in summary
    for schema in SchemaName:
        for version in readable_versions(schema) if schema in CURRENT_VERSIONS else (None,):
            assert load_schema(schema, version)["$schema"].endswith("2020-12/schema")


def test_the_committed_schema1_bundles_are_what_version_1_wrote() -> None:
    for name in ("host", "mps2-an386"):
        bundle = SCHEMA1 / name
        verify_bundle(bundle)  # whole, as written: every digest holds
        summary = _json(bundle / "summary.json")
        assert summary["schema_version"] == 1
        assert "stage_durations_ms" in summary and "clock_hz" in summary["timing"]
        assert schema_errors(SchemaName.SUMMARY, summary, version=1) == []
        assert schema_errors(SchemaName.SUMMARY, summary) != []  # not a version-2 document
        for path, schema in _documents(bundle)[1:]:
            assert schema_errors(schema, _json(path)) == [], path


def test_a_schema1_bundle_reads_into_the_same_typed_objects(new_bundle: Path) -> None:
    old = read_bundle(SCHEMA1 / "mps2-an386").summary
    raw = _json(SCHEMA1 / "mps2-an386" / "summary.json")
    assert old.schema_version == 1
    # the renamed keys, read from their version-1 spelling
    assert old.timing is not None and old.timing.clock_hz == 25e6
    assert old.stage_durations is not None and old.stage_durations.unit == "ms"
    assert old.stage_durations.as_mapping() == raw["stage_durations_ms"]
    assert old.cycles_samples is not None
    assert old.cycles_samples.unit == "instructions"
    assert old.cycles_samples.provenance is Provenance.EMULATED
    assert old.cycles_samples.values == tuple(raw["cycles_samples"])
    assert old.memory.provenance is Provenance.STATIC and old.memory.fits is True
    assert (
        old.metrics["emulated_instructions"].value
        == raw["metrics"]["emulated_instructions"]["value"]
    )
    assert old.time_model == "CPI = 1"  # before the timing models
    new = read_bundle(new_bundle).summary
    assert new.schema_version == 2
    assert new.stage_durations is not None and set(new.stage_durations.names) >= {
        "Build",
        "Execute",
    }
    assert set(old.figures()) >= {"latency", "macs", "layers/_3_FC_0/time"}
    # the same model on the same target: the same headline figures by name
    host = read_bundle(SCHEMA1 / "host").summary
    assert set(host.metrics) == set(new.metrics)
    assert host.identity.model_hash == new.identity.model_hash


def test_a_schema1_bundle_compares_against_a_new_one(new_bundle: Path) -> None:
    comparison = compare_bundles(SCHEMA1 / "host", new_bundle)
    assert comparison.comparable, comparison.differences
    assert comparison.figures_base["macs"].value == comparison.figures_cand["macs"].value == 2368
    image = next(t for t in comparison.totals if t.key == "image_bytes")
    assert image.base == 8881 and image.cand is not None
    latency = next(t for t in comparison.totals if t.key == "latency")
    assert latency.base == pytest.approx(0.000561) and latency.cand is not None
    assert set(comparison.layer_deltas["time"][0].as_dict()) >= {"base", "cand"}
    result = runner.invoke(app, ["compare", str(SCHEMA1 / "host"), str(new_bundle)])
    assert result.exit_code == EXIT_PASS, result.output
    assert "latency" in result.output


def test_the_history_records_both_versions(new_bundle: Path, tmp_path: Path) -> None:
    with HistoryStore(tmp_path / "h.db") as store:
        first = store.record(SCHEMA1 / "host", "tiny_cnn", source="test")
        second = store.record(new_bundle, "tiny_cnn", source="test")
        assert first.identity == second.identity  # host, benchmark float32 x 10
        assert first.figures["macs"].value == second.figures["macs"].value == 2368
        assert first.figures["latency"].resolution == 1e-6
        series = store.series(first.identity, "latency")
        assert [p.record.id for p in series] == [first.id, second.id]
    facts = bundle_facts(SCHEMA1 / "mps2-an386")
    assert (facts.kind, facts.dtype, facts.iterations) == ("benchmark", "float32", 10)
    assert facts.comparability.provenance == "emulated"


def test_the_plugin_gates_against_a_schema1_baseline(new_bundle: Path, tmp_path: Path) -> None:
    from aidge_deploy.results import DeployResult
    from aidge_deploy.testing import assert_no_regression

    baseline = shutil.copytree(SCHEMA1 / "host", tmp_path / "baseline")
    result = DeployResult(None, {}, None, None, target="host", report_dir=new_bundle)
    exact = {"schema_version": 1, "metrics": {"macs": {"direction": "equal"}}}
    assert_no_regression(result, baseline, exact, name="tiny_cnn")  # the same model: passes
    summary = read_summary(baseline)
    smaller = {"schema_version": 1, "metrics": {"macs": {"direction": "larger"}}}
    edited = _json(baseline / "summary.json")
    edited["metrics"]["macs"]["value"] = 4000
    (baseline / "summary.json").write_text(json.dumps(edited), encoding="utf-8")
    reseal(baseline)
    with pytest.raises(AssertionError, match=r"macs: 4000 -> 2368"):
        assert_no_regression(result, baseline, smaller, name="tiny_cnn")
    assert summary.metrics["macs"].value == 2368


def test_a_bundle_of_a_newer_version_is_refused(new_bundle: Path, tmp_path: Path) -> None:
    bundle = shutil.copytree(new_bundle, tmp_path / "newer")
    summary = _json(bundle / "summary.json")
    summary["schema_version"] = 99
    (bundle / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    reseal(bundle)
    verify_bundle(bundle)  # whole: refused for its version, not as tampered with
    expected = r"aidge-deploy/summary version 99 is newer than this aidge-deploy reads"
    with pytest.raises(SchemaVersionError, match=expected) as refused:
        compare_bundles(new_bundle, bundle)
    assert refused.value.hint is not None and "Upgrade aidge-deploy" in refused.value.hint
    with pytest.raises(SchemaVersionError, match="it reads versions 1, 2"):
        read_summary(bundle)
    with HistoryStore(tmp_path / "h.db") as store, pytest.raises(SchemaVersionError):
        store.record(bundle, "tiny_cnn")
    result = runner.invoke(app, ["compare", str(new_bundle), str(bundle)])
    assert result.exit_code == EXIT_ERROR
    assert "version 99 is newer" in " ".join(result.output.split())


def test_a_version_1_document_in_another_shape_is_refused(schema1: dict[str, Path]) -> None:
    bundle = schema1["host"]
    summary = _json(bundle / "summary.json")
    summary["stage_durations_ms"] = {"Build": "slow"}
    (bundle / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    reseal(bundle)
    with pytest.raises(Exception, match=r"summary v1 schema: stage_durations_ms/Build"):
        read_summary(bundle)


def test_the_docs_example_reads_a_bundle(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "bundles.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    exec(code.replace('"out/bundle"', repr(str(SCHEMA1 / "host"))), {})
    assert capsys.readouterr().out.split() == ["0.000561", "ms", "host", "1"]
