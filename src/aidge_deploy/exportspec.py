"""An export as plain data: its folder and its manifest, readable without ``aidge_core``.

Why this module exists: deploying an export that is already on disk (``run``, or a cached
``profile``) needs only the manifest's JSON, yet ``import aidge_core`` costs more than such a
run (its package imports matplotlib, numpy, requests...). ``Manifest`` and ``Export`` mirror
``aidge_core.export_utils.ExportManifest`` / ``ExportArtifact`` attribute for attribute (same
names, types and defaults; a test compares them field by field), so every stage, target and
protocol reads either kind the same way. ``Export.to_aidge()`` gives the ``aidge_core``
objects to a caller that needs them; nothing in a deploy does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aidge_core.export_utils import ExportArtifact

#: ``aidge_core.export_utils.artifact.EXPORT_MANIFEST_NAME`` / ``..._SCHEMA_VERSION``
EXPORT_MANIFEST_NAME = ".aidge-export.json"
EXPORT_MANIFEST_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Manifest:
    """``aidge_core``'s ``ExportManifest`` (schema 1): what the exporter says it generated."""

    target: str
    execution_domain: str
    environment: str
    build_system: str
    application: str
    expected_artifact: str
    protocol: str
    arch: str | None = None
    export_libraries: list[str] = field(default_factory=list)
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    #: Aidge 0.10.1 writes null here (``artifact.memory_peaks`` recovers the figure)
    memory_peak_bytes: int | list[int] | None = 0
    profiling: bool = False
    aidge_cmp: bool = False
    application_config: dict[str, Any] = field(default_factory=dict)
    schema_version: int = EXPORT_MANIFEST_SCHEMA_VERSION

    @classmethod
    def of(cls, manifest: Any) -> Manifest:
        """This kind of manifest from ``aidge_core``'s (or another object with its fields)."""
        if isinstance(manifest, Manifest):
            return manifest
        return cls(**{f.name: getattr(manifest, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class Application:
    """``aidge_core``'s ``ExportApplication``: the manifest's ``application_config`` keys and
    their defaults (what a firmware was generated with when a key is absent)."""

    kind: str = "standalone"
    nb_warmup: int = 10
    nb_iterations: int = 100
    profiling: bool = False
    validation: bool = False
    validation_inference_type: str = "classification"
    nb_validation_iterations: int = 0
    tinymlbenchmark: bool = False
    tinyml_benchmark_model: str = "ic01"
    heterogeneous_deploy: bool = False
    apss_linux: bool = False


@dataclass(frozen=True)
class Export:
    """A generated, buildable project (``path``, absolute) and its manifest."""

    path: Path
    manifest: Manifest

    @property
    def manifest_path(self) -> Path:
        return self.path / EXPORT_MANIFEST_NAME

    def to_aidge(self) -> ExportArtifact:
        """The same export as ``aidge_core.export_utils.ExportArtifact`` (imports Aidge)."""
        from aidge_core.export_utils import ExportArtifact, ExportManifest

        values = dataclasses.asdict(self.manifest)
        return ExportArtifact(path=self.path, manifest=ExportManifest(**values))


__all__ = [
    "EXPORT_MANIFEST_NAME",
    "EXPORT_MANIFEST_SCHEMA_VERSION",
    "Application",
    "Export",
    "Manifest",
]
