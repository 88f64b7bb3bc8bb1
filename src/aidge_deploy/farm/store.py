"""The content-addressed store of uploaded exports (``<data>/exports/<sha256>.tar.gz``).

An upload is written to a private temporary file, size-limited as it streams in, every
member checked while it is read — uncompressed size and member count bounded, stopping at
the limit (``archive.check_archive``: a small archive of zeros is refused, not expanded) —
then extracted into a private temporary folder
where the manifest is validated with the same loader ``deploy()`` uses. Only then is the
archive renamed into the store: a refused upload leaves nothing behind. The same export
uploaded twice (by anyone) is stored once; who uploaded it is recorded per user.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aidge_deploy.errors import DeployError
from aidge_deploy.farm.archive import (
    ArchiveError,
    ArchiveLimits,
    ArchiveTooLarge,
    check_archive,
    extract_archive,
)


class UploadTooLarge(ArchiveTooLarge):
    """The upload exceeds the service's size limit."""


#: the manifest's facts a submission is checked against, kept with the export's record
MAX_FACTS_BYTES = 64 * 1024


@dataclass(frozen=True)
class ExportFacts:
    """What a job's settings are checked against at submission: the model's inputs (the
    manifest's ``inputs``: name, C type, size, dims) and how many validation samples its
    firmware reads (``nb_validation_iterations`` of a validation export)."""

    inputs: tuple[dict[str, Any], ...] = ()
    nb_validation: int | None = None

    def to_json(self) -> str:
        text = json.dumps({"inputs": list(self.inputs), "nb_validation": self.nb_validation})
        return text if len(text) <= MAX_FACTS_BYTES else json.dumps({"inputs": []})

    @classmethod
    def from_json(cls, text: str) -> ExportFacts:
        data = json.loads(text)
        nb = data.get("nb_validation")
        return cls(
            inputs=tuple(i for i in data.get("inputs") or () if isinstance(i, dict)),
            nb_validation=nb if isinstance(nb, int) and not isinstance(nb, bool) else None,
        )

    @classmethod
    def of_manifest(cls, inputs: Any, protocol: Any, application_config: Any) -> ExportFacts:
        """From a manifest's ``inputs``, ``protocol`` and ``application_config``."""
        kept = tuple(
            {k: entry[k] for k in ("name", "dtype", "size", "dims") if k in entry}
            for entry in (inputs if isinstance(inputs, list) else ())
            if isinstance(entry, dict)
        )
        nb = None
        if str(protocol).startswith("aidge-uart-validation") and isinstance(
            application_config, dict
        ):
            value = application_config.get("nb_validation_iterations")
            nb = value if isinstance(value, int) and not isinstance(value, bool) else None
        return cls(inputs=kept, nb_validation=nb)


@dataclass(frozen=True)
class StoredExport:
    content_hash: str
    size: int
    target: str
    application: str
    protocol: str
    model: str
    facts: ExportFacts = field(default_factory=ExportFacts)


class ExportStore:
    def __init__(
        self,
        root: Path,
        max_upload_bytes: int,
        *,
        max_export_bytes: int = ArchiveLimits.max_bytes,
        max_members: int = ArchiveLimits.max_members,
    ) -> None:
        self.root = Path(root)
        self.max_upload_bytes = max_upload_bytes
        self.limits = ArchiveLimits(max_bytes=max_export_bytes, max_members=max_members)
        self.dir = self.root / "exports"
        self.tmp = self.root / "tmp"
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.tmp.mkdir(mode=0o700, parents=True, exist_ok=True)

    def path_of(self, content_hash: str) -> Path:
        if len(content_hash) != 64 or not all(c in "0123456789abcdef" for c in content_hash):
            raise ArchiveError(f"bad export id {content_hash!r}")
        return self.dir / f"{content_hash}.tar.gz"

    def new_upload(self) -> tuple[int, Path]:
        """A private temporary file for an incoming upload (fd, path)."""
        fd, name = tempfile.mkstemp(prefix="upload-", suffix=".tar.gz", dir=self.tmp)
        return fd, Path(name)

    def write_chunk(self, fd: int, written: int, chunk: bytes) -> int:
        written += len(chunk)
        self.check_size(written)
        os.write(fd, chunk)
        return written

    def check_size(self, size: int) -> None:
        if size > self.max_upload_bytes:
            raise UploadTooLarge(
                f"the upload is larger than the farm's limit of {self.max_upload_bytes // 2**20} MiB",
                hint="Upload the export's sources only (the api backend leaves build outputs "
                "out), or raise `farm serve --max-upload-mb`.",
            )

    def ingest(self, upload: Path) -> StoredExport:
        """Check and store a complete upload; the temporary file is always removed."""
        work = Path(tempfile.mkdtemp(prefix="check-", dir=self.tmp))
        try:
            info = check_archive(upload, self.limits)
            root = extract_archive(upload, work / "export", self.limits)
            stored = self._describe(root, info.content_hash, upload.stat().st_size)
            final = self.path_of(info.content_hash)
            if not final.exists():
                os.replace(upload, final)
            return stored
        finally:
            upload.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)

    @staticmethod
    def _describe(root: Path, content_hash: str, size: int) -> StoredExport:
        from aidge_deploy.artifact import load_export_artifact

        try:
            artifact = load_export_artifact(root)
        except DeployError as exc:
            # the loader names our private temporary folder: show the member name instead
            message = exc.message.replace(str(root) + os.sep, "").replace(str(root), "export")
            raise ArchiveError(f"not a valid Aidge export: {message}", hint=exc.hint) from None
        manifest = artifact.manifest
        model = ""
        for key in ("model", "model_name", "graph_name"):
            value = (manifest.application_config or {}).get(key)
            if isinstance(value, str):
                model = value
                break
        return StoredExport(
            content_hash=content_hash,
            size=size,
            target=str(manifest.target),
            application=str(manifest.application),
            protocol=str(manifest.protocol),
            model=model,
            facts=ExportFacts.of_manifest(
                manifest.inputs, manifest.protocol, manifest.application_config
            ),
        )

    def facts_of(self, content_hash: str) -> ExportFacts:
        """The facts of a stored export recorded before they were kept with it: read from
        the manifest in its archive (that one member, bounded)."""
        from aidge_deploy.exportspec import EXPORT_MANIFEST_NAME

        try:
            with tarfile.open(self.path_of(content_hash), "r:gz") as tar:
                for member in tar:
                    if member.isfile() and member.name.lstrip("./") == EXPORT_MANIFEST_NAME:
                        if member.size > 16 * 1024 * 1024:
                            break
                        f = tar.extractfile(member)
                        if f is None:
                            break
                        data = json.loads(f.read())
                        if not isinstance(data, dict):
                            break
                        return ExportFacts.of_manifest(
                            data.get("inputs"), data.get("protocol"), data.get("application_config")
                        )
        except (OSError, tarfile.TarError, ValueError):
            pass
        return ExportFacts()


__all__ = ["ExportFacts", "ExportStore", "StoredExport", "UploadTooLarge"]
