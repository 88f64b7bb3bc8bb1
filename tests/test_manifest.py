"""The export/deploy boundary: every bad manifest or mismatched config is a typed error with a hint."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from aidge_deploy.artifact import hydrate_runtime, load_export_artifact, memory_peaks
from aidge_deploy.config import BenchmarkConfig, DeployConfig
from aidge_deploy.errors import ConfigError, DeployError, ManifestError

pytestmark = pytest.mark.slow


@pytest.fixture
def export_copy(export_factory, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark")
    dst = tmp_path / "export"
    shutil.copytree(artifact.path, dst)
    return dst


def _edit(export_dir: Path, change) -> Path:  # type: ignore[no-untyped-def]
    path = export_dir / ".aidge-export.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def _assert_names(exc: DeployError, *words: str) -> None:
    assert exc.hint, "every manifest error carries a hint"
    for word in words:
        assert word in exc.message, (word, exc.message)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        load_export_artifact(tmp_path / "nope")
    _assert_names(info.value, "does not exist")


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        load_export_artifact(tmp_path)
    _assert_names(info.value, ".aidge-export.json")


def test_invalid_json(export_copy: Path) -> None:
    (export_copy / ".aidge-export.json").write_text("{ not json")
    with pytest.raises(ManifestError) as info:
        load_export_artifact(export_copy)
    _assert_names(info.value, ".aidge-export.json", "invalid JSON")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d.pop("schema_version"), "schema_version"),
        (lambda d: d.pop("protocol"), "protocol"),
        (lambda d: d.update(protocl="x"), "protocl"),
        (lambda d: d.update(profiling="yes"), "profiling"),
        (lambda d: d.update(outputs=[{"name": "y"}]), "outputs[0]"),
        (lambda d: d["application_config"].update(nb_iters=3), "application_config.nb_iters"),
    ],
)
def test_schema_violations_name_file_and_field(export_copy: Path, change, field: str) -> None:  # type: ignore[no-untyped-def]
    manifest_path = _edit(export_copy, change)
    with pytest.raises(ManifestError) as info:
        load_export_artifact(export_copy)
    _assert_names(info.value, str(manifest_path), f"'{field}'")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("expected_artifact", "../outside/run_export", "'..'"),
        ("expected_artifact", "build/../../outside/run_export", "'..'"),
        ("expected_artifact", "bin/**/../../../*.elf", "'..'"),
        ("expected_artifact", "/etc/passwd", "absolute"),
        ("expected_artifact", "C:\\fw\\x.elf", "absolute"),
        ("expected_artifact", "", "empty"),
        ("arch", "../../../tmp/evil", "not an architecture name"),
        ("arch", "/tmp/evil", "not an architecture name"),
    ],
)
def test_paths_leaving_the_export_are_refused_at_load(
    export_copy: Path, field: str, value: str, problem: str
) -> None:
    """``expected_artifact`` selects what is flashed or uploaded, ``arch`` a toolchain file:
    neither may name a file outside the export."""
    manifest_path = _edit(export_copy, lambda d: d.update({field: value}))
    with pytest.raises(ManifestError) as info:
        load_export_artifact(export_copy)
    _assert_names(info.value, str(manifest_path), f"field '{field}'", problem)


@pytest.mark.parametrize("value", ["build/run_export", "bin/*.elf", "out/**/*.elf", "a..b/x"])
def test_paths_inside_the_export_are_accepted(export_copy: Path, value: str) -> None:
    _edit(export_copy, lambda d: d.update(expected_artifact=value))
    assert load_export_artifact(export_copy).manifest.expected_artifact == value


def test_escaping_artifact_is_refused_before_anything_is_built(
    export_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also for an ExportArtifact built in Python (no manifest file read): deploy() stops at
    load, so no build runs and the outside file is never flashed or uploaded."""
    import aidge_deploy

    cache = tmp_path / "cache"
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(cache))
    secret = export_copy.parent / "outside.bin"
    secret.write_bytes(b"not yours")
    artifact = load_export_artifact(export_copy)
    hostile = type(artifact)(
        path=artifact.path,
        manifest=dataclasses.replace(artifact.manifest, expected_artifact="../outside.bin"),
    )
    with pytest.raises(ManifestError, match="expected_artifact") as info:
        aidge_deploy.deploy(hostile, DeployConfig(target="host"))
    assert "'..'" in info.value.message
    assert not (cache / "builds").exists() and not (cache / "runs").exists()


def test_unknown_key_suggests_the_close_field(export_copy: Path) -> None:
    _edit(export_copy, lambda d: d.update(protocl="x"))
    with pytest.raises(ManifestError) as info:
        load_export_artifact(export_copy)
    assert info.value.hint and "protocol" in info.value.hint


def test_config_target_must_match_manifest(export_copy: Path) -> None:
    import aidge_deploy

    with pytest.raises(ConfigError) as info:
        aidge_deploy.deploy(export_copy, DeployConfig(target="raspberrypi"))
    _assert_names(info.value, "raspberrypi", "host")
    assert "re-export" in (info.value.hint or "")


def test_runtime_defaults_hydrated_from_application_config(export_factory) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark", nb_iterations=7, nb_warmup=3)
    settings = hydrate_runtime(DeployConfig(), artifact.manifest)
    assert settings.benchmark.nb_iterations == 7 and settings.benchmark.nb_warmup == 3
    assert settings.benchmark.profiling is True and settings.tinyml is False
    explicit = BenchmarkConfig(nb_iterations=99)
    assert (
        hydrate_runtime(DeployConfig(benchmark=explicit), artifact.manifest).benchmark is explicit
    )
    # the firmware's real iteration count still comes from the manifest
    assert hydrate_runtime(DeployConfig(benchmark=explicit), artifact.manifest).nb_iterations == 7


def test_memory_peaks_recovered_from_the_export(export_factory) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark")
    assert artifact.manifest.memory_peak_bytes is None  # the 0.10.1 bug this works around
    peaks = memory_peaks(artifact)
    assert peaks and all(p > 0 for p in peaks)
    forward = (Path(artifact.path) / "dnn" / "src" / "forward.cpp").read_text()
    assert f"mem_0[{peaks[0]}]" in forward
