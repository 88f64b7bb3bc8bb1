"""The export/deploy boundary: every bad manifest or mismatched config is a typed error with a hint."""

from __future__ import annotations

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
