"""``exportspec`` mirrors aidge_core's manifest types exactly, and converts both ways.

A deploy reads an export's manifest without importing ``aidge_core`` (``exportspec``); if a
new Aidge release changed ``ExportManifest`` or ``ExportApplication`` (a field, a default, the
file name, the schema version), these tests fail before a deploy misreads an export.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from aidge_core.export_utils import ExportArtifact, ExportManifest
from aidge_core.export_utils import artifact as aidge_artifact

from aidge_deploy import exportspec
from aidge_deploy.artifact import load_export_artifact
from aidge_deploy.errors import ManifestError
from aidge_deploy.exportspec import Application, Export, Manifest
from captured import load_capture


def _defaults(cls: type) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = dataclasses.MISSING
    return out


@pytest.mark.parametrize(
    ("ours", "aidge"),
    [(Manifest, ExportManifest), (Application, aidge_artifact.ExportApplication)],
)
def test_the_mirror_has_aidges_fields_in_order_with_its_defaults(ours: type, aidge: type) -> None:
    assert list(_defaults(ours).items()) == list(_defaults(aidge).items())


def test_the_mirror_has_aidges_file_name_and_schema_version() -> None:
    assert exportspec.EXPORT_MANIFEST_NAME == aidge_artifact.EXPORT_MANIFEST_NAME
    assert (
        exportspec.EXPORT_MANIFEST_SCHEMA_VERSION == aidge_artifact.EXPORT_MANIFEST_SCHEMA_VERSION
    )


def _aidge_manifest() -> ExportManifest:
    """The manifest of a real host export (``tests/data/logs/host``), as Aidge reads it."""
    return load_capture("host", "benchmark_profiling")[1]


def test_an_aidge_artifact_is_accepted_and_converted_back(tmp_path: Path) -> None:
    aidge = ExportArtifact(path=tmp_path / "." / "", manifest=_aidge_manifest())
    loaded = load_export_artifact(aidge)
    assert isinstance(loaded, Export) and isinstance(loaded.manifest, Manifest)
    assert loaded.path == tmp_path.resolve() and loaded.manifest_path == aidge.manifest_path
    assert dataclasses.asdict(loaded.manifest) == dataclasses.asdict(aidge.manifest)
    back = loaded.to_aidge()
    assert isinstance(back, ExportArtifact) and back.manifest == aidge.manifest
    assert load_export_artifact(loaded) == loaded, "an Export passes through unchanged"


def test_an_aidge_artifact_is_checked_like_a_folder(tmp_path: Path) -> None:
    bad = dataclasses.replace(_aidge_manifest(), expected_artifact="../../etc/passwd")
    with pytest.raises(ManifestError, match="expected_artifact"):
        load_export_artifact(ExportArtifact(path=tmp_path, manifest=bad))
    with pytest.raises(ManifestError, match="does not exist"):
        load_export_artifact(ExportArtifact(path=tmp_path / "gone", manifest=_aidge_manifest()))
