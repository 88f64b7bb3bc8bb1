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

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class StoredExport:
    content_hash: str
    size: int
    target: str
    application: str
    protocol: str
    model: str


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
        )


__all__ = ["ExportStore", "StoredExport", "UploadTooLarge"]
