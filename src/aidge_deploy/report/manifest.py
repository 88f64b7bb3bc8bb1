"""The bundle manifest: every file with its size and SHA-256, and how to verify it.

``manifest.json`` is written last, so its presence means the bundle is complete; its
digests mean a reader (``compare``, a dashboard) can tell a bundle that was edited,
truncated or padded with files that point outside of it from the one the run produced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from aidge_deploy.errors import ReportError
from aidge_deploy.report.schemas import SchemaName, validate_document

MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA = "aidge-deploy/manifest"
MANIFEST_SCHEMA_VERSION = 1


class FileRole(StrEnum):
    SUMMARY = "summary"
    METADATA = "metadata"
    PROFILE = "profile"
    LOG = "log"
    OVERLAY = "overlay"
    REPORT = "report"
    #: raw data a figure is computed from beside the run's log (a power capture, sensor
    #: readings, the power window run's own log)
    RAW = "raw"


@dataclass(frozen=True)
class ManifestEntry:
    path: str  # relative, POSIX separators
    size: int
    sha256: str
    media_type: str
    role: FileRole

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "media_type": self.media_type,
            "role": self.role.value,
        }


@dataclass(frozen=True)
class BundleManifest:
    """A verified ``manifest.json``."""

    root: Path
    run_id: str
    created: str
    tool_version: str
    entries: tuple[ManifestEntry, ...]
    comparability: Mapping[str, Any]

    def path_of(self, role: FileRole) -> Path | None:
        for entry in self.entries:
            if entry.role == role:
                return self.root / entry.path
        return None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_manifest(
    entries: Sequence[ManifestEntry],
    *,
    run_id: str,
    created: str,
    tool_version: str,
    comparability: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "schema": MANIFEST_SCHEMA,
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "run_id": run_id,
        "created": created,
        "tool_version": tool_version,
        "comparability": dict(comparability),
        "files": [e.as_dict() for e in entries],
    }


def _safe_relative(root: Path, rel: str) -> Path:
    """Resolve ``rel`` inside ``root``; refuse absolute paths, ``..`` and escaping links."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or rel.startswith("\\") or ".." in pure.parts or not pure.parts:
        raise ReportError(
            f"{root}: manifest entry {rel!r} points outside the bundle",
            hint="The bundle was tampered with; do not trust its figures.",
        )
    path = root.joinpath(*pure.parts)
    resolved_root = root.resolve()
    if not path.resolve().is_relative_to(resolved_root):
        raise ReportError(
            f"{root}: {rel!r} resolves outside the bundle (symbolic link?)",
            hint="The bundle was tampered with; do not trust its figures.",
        )
    return path


def verify_bundle(root: Path) -> BundleManifest:
    """Check a bundle against its manifest; raise ``ReportError`` on any discrepancy.

    Rejected: a missing or unreadable manifest, an entry that escapes the directory, a
    missing file, a file whose size or SHA-256 differs, and a file the manifest does not
    list (something was added after the run).
    """
    root = Path(root)
    manifest_path = root / MANIFEST_NAME
    if not manifest_path.is_file():
        raise ReportError(
            f"{root} is not a result bundle: {MANIFEST_NAME} is missing",
            hint="Pass the folder given to --report; a bundle without a manifest is "
            "incomplete (its writing was interrupted).",
        )
    try:
        doc = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(
            f"{manifest_path}: unreadable manifest ({exc})",
            hint="The bundle was modified or truncated.",
        ) from exc
    validate_document(SchemaName.MANIFEST, doc, where=str(manifest_path))
    entries = []
    listed: set[str] = set()
    for raw in doc["files"]:
        rel = str(raw["path"])
        path = _safe_relative(root, rel)
        if not path.is_file():
            raise ReportError(
                f"{root}: {rel} is listed in the manifest but missing",
                hint="The bundle is incomplete; regenerate it or copy it again.",
            )
        data = path.read_bytes()
        if len(data) != raw["size"] or sha256_bytes(data) != raw["sha256"]:
            raise ReportError(
                f"{root}: {rel} was modified after the run (size or SHA-256 differs)",
                hint="Do not edit bundle files; regenerate the bundle from a new run.",
            )
        listed.add(str(PurePosixPath(rel)))
        entries.append(
            ManifestEntry(
                rel, int(raw["size"]), raw["sha256"], raw["media_type"], FileRole(raw["role"])
            )
        )
    for path in root.rglob("*"):
        if path.is_dir():
            continue
        rel = path.relative_to(root).as_posix()
        if rel != MANIFEST_NAME and rel not in listed:
            raise ReportError(
                f"{root}: {rel} is not listed in the manifest",
                hint="A file was added to the bundle after the run; remove it or regenerate.",
            )
    return BundleManifest(
        root=root,
        run_id=str(doc["run_id"]),
        created=str(doc["created"]),
        tool_version=str(doc["tool_version"]),
        entries=tuple(entries),
        comparability=dict(doc.get("comparability") or {}),
    )
