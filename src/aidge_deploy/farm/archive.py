"""Export archives: how the ``api`` client packs an export and how the farm checks one.

An archive is a gzip'd tar of the export's sources (build outputs left out, as the build
cache's export hash leaves them out) with ``.aidge-export.json`` at its root. The farm
checks every member before extracting anything: regular files and folders only (no
links, devices or FIFOs), relative paths without ``..``, bounded member count and size.
The content hash (the store's key) is computed over the members, not the archive bytes, so
the same export packed twice is the same entry.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from aidge_deploy.errors import ConfigError, ManifestError

MANIFEST_NAME = ".aidge-export.json"
MAX_MEMBERS = 20_000
#: limit on the extracted size, against decompression bombs
MAX_EXTRACTED_BYTES = 1024**3
_CHUNK = 1024 * 1024


class ArchiveError(ConfigError):
    """An uploaded archive is unsafe or not an Aidge export."""


class ArchiveTooLarge(ArchiveError):
    """An archive past a size or member-count limit (found while reading it: HTTP 413)."""


@dataclass(frozen=True)
class ArchiveLimits:
    """How much an archive may hold once uncompressed, and how many members."""

    max_bytes: int = MAX_EXTRACTED_BYTES
    max_members: int = MAX_MEMBERS

    def too_large(self, what: str) -> ArchiveTooLarge:
        return ArchiveTooLarge(
            f"the archive {what}: refused while reading it (the farm takes at most "
            f"{self.max_bytes // 2**20} MiB uncompressed, {self.max_members} members)",
            hint="Upload the export's sources only (the api backend leaves build outputs "
            "out), or raise `farm serve --max-export-mb` / `--max-export-members`.",
        )


@dataclass(frozen=True)
class ArchiveInfo:
    content_hash: str
    members: int
    extracted_bytes: int


def pack_export(export_dir: Path) -> bytes:
    """The export's sources and manifest as a deterministic ``.tar.gz`` (bytes)."""
    from aidge_deploy.artifact import export_source_files

    root = Path(export_dir)
    if not (root / MANIFEST_NAME).is_file():
        raise ManifestError(
            f"{root} holds no {MANIFEST_NAME}", hint="Pass the folder an Aidge export wrote."
        )
    files = export_source_files(root)
    links = [p for p in files if p.is_symlink()]
    if links:
        raise ConfigError(
            f"the export holds a symbolic link ({links[0].relative_to(root)}); the farm takes "
            "regular files only",
            hint="Replace the link with a copy of the file it points to.",
        )
    buf = io.BytesIO()
    import gzip

    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in files:
            rel = path.relative_to(root).as_posix()
            info = tarfile.TarInfo(rel)
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _member_problem(member: tarfile.TarInfo) -> str | None:
    name = member.name
    if not (member.isfile() or member.isdir()):
        kind = (
            "a symbolic link"
            if member.issym()
            else "a hard link"
            if member.islnk()
            else "a device or FIFO"
        )
        return f"member {name!r} is {kind}; only files and folders are accepted"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return f"member {name!r} has an absolute path"
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        return f"member {name!r} climbs out of the export with '..'"
    if "\x00" in name:
        return f"member {name!r} has a NUL byte in its name"
    return None


def check_archive(path: Path, limits: ArchiveLimits | None = None) -> ArchiveInfo:
    """Check every member of the archive at ``path``; its content hash. Reads (streaming,
    stopping at ``limits``: what its headers declare and what it really holds), extracts
    nothing."""
    limits = limits or ArchiveLimits()
    digest = hashlib.sha256()
    total = 0
    count = 0
    has_manifest = False
    entries: list[tuple[str, str, int]] = []
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar:
                count += 1
                if count > limits.max_members:
                    raise limits.too_large(f"has more than {limits.max_members} members")
                problem = _member_problem(member)
                if problem:
                    raise ArchiveError(
                        f"refused archive: {problem}",
                        hint="Pack the export with `aidge-deploy` (the api backend does) or "
                        "`tar -czf export.tgz -C EXPORT_DIR .`.",
                    )
                name = PurePosixPath(member.name).as_posix().removeprefix("./")
                if member.isdir():
                    continue
                if total + member.size > limits.max_bytes:
                    raise limits.too_large(f"holds more than {limits.max_bytes // 2**20} MiB")
                if name == MANIFEST_NAME:
                    has_manifest = True
                file_digest, size = _digest(tar, member, limits.max_bytes - total, limits)
                total += size
                entries.append((name, file_digest, member.mode & 0o111))
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise ArchiveError(
            f"the upload is not a readable tar archive ({exc})",
            hint="Upload a .tar.gz of the export folder.",
        ) from None
    if not has_manifest:
        raise ArchiveError(
            f"the archive holds no {MANIFEST_NAME} at its root: not an Aidge export",
            hint="Pack the export folder itself (the one holding .aidge-export.json).",
        )
    for name, file_digest, exe in sorted(entries):
        digest.update(f"{name}\0{file_digest}\0{1 if exe else 0}\n".encode())
    return ArchiveInfo(content_hash=digest.hexdigest(), members=count, extracted_bytes=total)


def _digest(
    tar: tarfile.TarFile, member: tarfile.TarInfo, room: int, limits: ArchiveLimits
) -> tuple[str, int]:
    """SHA-256 and size of a member's data, read in chunks, stopping past ``room`` bytes."""
    h = hashlib.sha256()
    size = 0
    f = tar.extractfile(member)
    if f is not None:
        while chunk := f.read(_CHUNK):
            size += len(chunk)
            if size > room:
                raise limits.too_large(f"holds more than {limits.max_bytes // 2**20} MiB")
            h.update(chunk)
    return h.hexdigest(), size


def extract_archive(path: Path, dest: Path, limits: ArchiveLimits | None = None) -> Path:
    """Extract a checked archive into ``dest``, re-checking each member on the way and
    writing no more than ``limits`` allow (a file is written in chunks, counted)."""
    limits = limits or ArchiveLimits()
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    written = 0
    with tarfile.open(path, mode="r:*") as tar:
        for count, member in enumerate(tar, start=1):
            problem = _member_problem(member)
            if problem:
                raise ArchiveError(f"refused archive: {problem}")
            if count > limits.max_members:
                raise limits.too_large(f"has more than {limits.max_members} members")
            name = PurePosixPath(member.name.replace("\\", "/")).as_posix().removeprefix("./")
            target = (root / name).resolve()
            if target != root and root not in target.parents:
                raise ArchiveError(f"refused archive: member {member.name!r} leaves the export")
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            with open(target, "wb") as out:
                while source is not None and (chunk := source.read(_CHUNK)):
                    written += len(chunk)
                    if written > limits.max_bytes:
                        raise limits.too_large(f"holds more than {limits.max_bytes // 2**20} MiB")
                    out.write(chunk)
            target.chmod(0o755 if member.mode & 0o111 else 0o644)
            os.utime(target, (member.mtime, member.mtime))
    return dest


__all__ = [
    "MANIFEST_NAME",
    "ArchiveError",
    "ArchiveInfo",
    "ArchiveLimits",
    "ArchiveTooLarge",
    "check_archive",
    "extract_archive",
    "pack_export",
]
