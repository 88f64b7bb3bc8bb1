"""File transfers to and from a board over SFTP, sending only what changed.

Why this module exists: a deploy loop re-uploads the same export many times (profiling passes,
re-runs); over a slow link only changed files should travel. ``upload_dir`` keeps a manifest
(relative path -> size, mtime, mode, sha256) in the remote directory. A local file is sent when
its sha256 or mode differs from the manifest, or when the remote copy no longer has the size
and mtime the manifest recorded (someone touched it on the board). Each file is written to a
temporary name and renamed into place, so an interrupted upload never leaves a half-written file
under its real name. Files that the previous upload sent and that no longer exist locally are
removed; files the tool did not upload are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import posixpath
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import asyncssh

from aidge_deploy.errors import TransferError

_log = logging.getLogger(__name__)

MANIFEST_NAME = ".aidge-deploy-manifest.json"
_PART_SUFFIX = ".aidge-part"
_MANIFEST_FORMAT = 1
_PARALLEL_FILES = 4
DEFAULT_EXCLUDE: tuple[str, ...] = ("__pycache__", "*.pyc", ".git")

FileSentCallback = Callable[[str, int], None]  # (relative path, bytes) after each file


class TransferConnectionLost(TransferError):
    """The connection dropped during a transfer (a reconnect and retry may succeed)."""


class UnsafeRemotePath(TransferError):
    """A name the board sent would put a file outside the download's destination."""


@dataclass(frozen=True)
class TransferReport:
    """What one upload or download moved."""

    local: Path
    remote: str
    files_sent: int
    bytes_sent: int
    files_unchanged: int
    files_deleted: int
    duration_s: float


@dataclass(frozen=True)
class LocalFile:
    rel: str
    path: Path
    size: int
    mtime: int
    mode: int
    sha256: str


def _excluded(rel: str, patterns: Sequence[str]) -> bool:
    parts = PurePosixPath(rel).parts
    return any(
        fnmatch.fnmatchcase(rel, pat) or any(fnmatch.fnmatchcase(p, pat) for p in parts)
        for pat in patterns
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def scan_local_tree(root: Path, exclude: Sequence[str]) -> list[LocalFile]:
    """Regular files under ``root`` (symlinks to files followed, to directories not)."""
    files: list[LocalFile] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        rel_dir = base.relative_to(root).as_posix()
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not _excluded(posixpath.join(rel_dir, d) if rel_dir != "." else d, exclude)
        )
        for name in sorted(filenames):
            rel = posixpath.join(rel_dir, name) if rel_dir != "." else name
            path = base / name
            if name == MANIFEST_NAME or name.endswith(_PART_SUFFIX) or _excluded(rel, exclude):
                continue
            st = path.stat()
            if not stat.S_ISREG(st.st_mode):
                continue
            files.append(
                LocalFile(
                    rel, path, st.st_size, int(st.st_mtime), st.st_mode & 0o777, _sha256(path)
                )
            )
    return files


def _join(remote: str, rel: str) -> str:
    return posixpath.join(remote, rel) if rel else remote


async def _remote_listing(sftp: asyncssh.SFTPClient, remote: str) -> dict[str, tuple[int, int]]:
    """rel path -> (size, mtime) of the regular files under ``remote``."""
    found: dict[str, tuple[int, int]] = {}
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        async for entry in sftp.scandir(_join(remote, rel_dir)):
            raw = entry.filename
            name = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
            if name in (".", ".."):
                continue
            rel = posixpath.join(rel_dir, name) if rel_dir else name
            kind = entry.attrs.type
            if kind == asyncssh.FILEXFER_TYPE_DIRECTORY:
                pending.append(rel)
            elif kind == asyncssh.FILEXFER_TYPE_REGULAR:
                found[rel] = (entry.attrs.size or 0, entry.attrs.mtime or 0)
    return found


async def _read_manifest(sftp: asyncssh.SFTPClient, remote: str) -> dict[str, dict[str, Any]]:
    path = _join(remote, MANIFEST_NAME)
    try:
        async with sftp.open(path, "r", encoding="utf-8") as handle:
            data = json.loads(await handle.read())
    except asyncssh.SFTPNoSuchFile:
        return {}
    except (ValueError, UnicodeDecodeError):
        _log.warning("Ignoring unreadable upload manifest %s: all files will be sent", path)
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if data.get("format") != _MANIFEST_FORMAT or not isinstance(files, dict):
        return {}
    return files


async def _write_manifest(
    sftp: asyncssh.SFTPClient, remote: str, files: dict[str, dict[str, Any]]
) -> None:
    path = _join(remote, MANIFEST_NAME)
    text = json.dumps({"format": _MANIFEST_FORMAT, "files": files}, indent=1, sort_keys=True)
    async with sftp.open(path + _PART_SUFFIX, "w", encoding="utf-8") as handle:
        await handle.write(text)
    await _rename_into_place(sftp, path + _PART_SUFFIX, path)


async def _rename_into_place(sftp: asyncssh.SFTPClient, tmp: str, final: str) -> None:
    try:
        await sftp.posix_rename(tmp, final)
    except asyncssh.SFTPOpUnsupported:  # not OpenSSH: plain rename needs the target gone
        with contextlib.suppress(asyncssh.SFTPNoSuchFile):
            await sftp.remove(final)
        await sftp.rename(tmp, final)


def _needs_send(
    file: LocalFile, known: dict[str, Any] | None, remote_stat: tuple[int, int] | None
) -> bool:
    if known is None or remote_stat is None:
        return True
    if (known.get("sha256"), known.get("mode")) != (file.sha256, file.mode):
        return True
    # The board copy must still be the one we wrote (size and mtime as recorded).
    return remote_stat != (known.get("size"), known.get("mtime"))


def transfer_error(
    exc: BaseException, *, doing: str, target: str, remote: str, done: str
) -> TransferError:
    """Translate an SFTP/connection failure into a ``TransferError`` with a hint."""
    where = f"{doing} ({target}, {done})"
    if isinstance(exc, asyncssh.SFTPPermissionDenied):
        parent = posixpath.dirname(remote.rstrip("/")) or "/"
        return TransferError(
            f"Permission denied while {where}: {exc}",
            f"The board user cannot write to {remote}: check `ls -ld {parent} {remote}` on the "
            "board, pick a directory under the user's home, or fix ownership "
            "(sudo chown -R <user> <dir>).",
            stage="transfer",
        )
    if isinstance(exc, asyncssh.SFTPNoSuchFile | asyncssh.SFTPNoSuchPath):
        return TransferError(
            f"No such file or directory while {where}: {exc}",
            f"Check that {remote} exists on the board (ls -l {remote}).",
            stage="transfer",
        )
    if isinstance(exc, asyncssh.SFTPNoSpaceOnFilesystem | asyncssh.SFTPQuotaExceeded):
        return TransferError(
            f"The board ran out of space while {where}: {exc}",
            "Free space on the board (df -h) or upload to another filesystem.",
            stage="transfer",
        )
    if isinstance(
        exc,
        asyncssh.SFTPConnectionLost
        | asyncssh.SFTPNoConnection
        | asyncssh.ConnectionLost
        | asyncssh.DisconnectError
        | asyncssh.ChannelOpenError
        | ConnectionError,
    ):
        return TransferConnectionLost(
            f"Connection lost while {where}: {exc or type(exc).__name__}",
            "Check the board's network and power; files already renamed into place are "
            "complete and a new upload resumes by sending only what differs.",
            stage="transfer",
        )
    if isinstance(exc, TimeoutError):
        return TransferConnectionLost(
            f"Timed out while {where}",
            "The link is slower than expected or stalled: raise transfer_timeout_s or check "
            "the board's network.",
            stage="transfer",
        )
    if isinstance(exc, OSError) and not isinstance(exc, asyncssh.SFTPError):
        return TransferError(
            f"Local file error while {where}: {exc}",
            "Check the local path and its permissions.",
            stage="transfer",
        )
    return TransferError(f"Transfer failed while {where}: {exc}", "See the board's sshd log.")


async def upload_dir(
    sftp: asyncssh.SFTPClient,
    local: Path,
    remote: str,
    *,
    target: str,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    on_file: FileSentCallback | None = None,
) -> TransferReport:
    """Make ``remote`` mirror the files of ``local`` that changed since the last upload."""
    start = time.monotonic()
    if not local.is_dir():
        raise TransferError(
            f"Cannot upload {local}: not a directory", "Give the export's directory."
        )
    sent = [0, 0]  # files, bytes (mutated by the workers)
    doing = f"uploading {local} to {remote}"
    try:
        files = await asyncio.to_thread(scan_local_tree, local, exclude)
        await sftp.makedirs(remote, exist_ok=True)
        manifest = await _read_manifest(sftp, remote)
        listing = await _remote_listing(sftp, remote)
        for rel in [r for r in listing if r.endswith(_PART_SUFFIX)]:
            # Left by an interrupted upload: never complete, never under a real name.
            await sftp.remove(_join(remote, rel))
            del listing[rel]
        to_send = [f for f in files if _needs_send(f, manifest.get(f.rel), listing.get(f.rel))]
        local_rels = {f.rel for f in files}
        stale = sorted(rel for rel in manifest if rel not in local_rels and rel in listing)
        for rel_dir in sorted({posixpath.dirname(f.rel) for f in to_send} - {""}):
            await sftp.makedirs(_join(remote, rel_dir), exist_ok=True)

        gate = asyncio.Semaphore(_PARALLEL_FILES)

        async def send(file: LocalFile) -> None:
            async with gate:
                final = _join(remote, file.rel)
                tmp = final + _PART_SUFFIX
                await sftp.put(str(file.path), tmp)
                await sftp.chmod(tmp, file.mode)
                await sftp.utime(tmp, (file.mtime, file.mtime))
                await _rename_into_place(sftp, tmp, final)
                sent[0] += 1
                sent[1] += file.size
                if on_file is not None:
                    on_file(file.rel, file.size)

        await asyncio.gather(*(send(f) for f in to_send))
        for rel in stale:
            await sftp.remove(_join(remote, rel))
        new_manifest = {
            f.rel: {"size": f.size, "mtime": f.mtime, "mode": f.mode, "sha256": f.sha256}
            for f in files
        }
        if to_send or stale or new_manifest != manifest:
            await _write_manifest(sftp, remote, new_manifest)
    except TransferError:
        raise
    except (asyncssh.Error, OSError, TimeoutError) as exc:
        raise transfer_error(
            exc,
            doing=doing,
            target=target,
            remote=remote,
            done=f"{sent[0]} file(s), {sent[1]} bytes sent before the failure",
        ) from None
    report = TransferReport(
        local=local,
        remote=remote,
        files_sent=sent[0],
        bytes_sent=sent[1],
        files_unchanged=len(files) - len(to_send),
        files_deleted=len(stale),
        duration_s=time.monotonic() - start,
    )
    _log.info(
        "Uploaded %s -> %s:%s: %d file(s), %d bytes sent, %d unchanged, %d removed",
        local,
        target,
        remote,
        report.files_sent,
        report.bytes_sent,
        report.files_unchanged,
        report.files_deleted,
    )
    return report


def _contained(root: Path, rel: str, *, target: str, remote: str) -> Path:
    """``root / rel`` when it stays inside ``root``, else ``UnsafeRemotePath``.

    ``rel`` comes from the board (directory listings): an absolute name, a ``..`` or empty
    component, a NUL, or an existing local symlink on the way that leads out of ``root``
    (the parents, or the file itself) is refused before anything is written.
    """
    parts = rel.split("/")
    reason = None
    if "\0" in rel:
        reason = "contains a NUL byte"
    elif rel.startswith("/"):
        reason = "is absolute"
    elif any(part in ("", ".", "..") for part in parts):
        reason = "has an empty, '.' or '..' component"
    else:
        base = root.resolve()
        dest = root.joinpath(*parts)
        # resolve() follows the symlinks that already exist on the way (the rest is lexical)
        if not dest.parent.resolve().is_relative_to(base):
            reason = f"goes through a local symlink that leads out of {root}"
        elif dest.is_symlink() and not dest.resolve().is_relative_to(base):
            reason = f"is a local symlink to {os.readlink(dest)}, outside {root}"
        else:
            return dest
    raise UnsafeRemotePath(
        f"Refusing to download {rel!r} from {target}:{remote}: the name {reason}",
        f"Nothing was written outside {root}. The board's tree holds a name that would escape "
        "the destination (a hostile or corrupted board, or a symlink left in the local folder): "
        "inspect it before downloading again.",
        stage="transfer",
    )


async def _get_into_place(sftp: asyncssh.SFTPClient, remote: str, dest: Path) -> None:
    """Download to a temporary name beside ``dest`` and rename it over ``dest``: an interrupted
    download never leaves a partial file under the real name, and a symlink at ``dest`` is
    replaced, never written through."""
    tmp = dest.with_name(dest.name + _PART_SUFFIX)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        await sftp.get(remote, str(tmp), preserve=True)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


async def download(
    sftp: asyncssh.SFTPClient, remote: str, local: Path, *, target: str
) -> TransferReport:
    """Copy a remote file or directory tree to ``local`` (which is replaced file by file).

    Every name the board lists is checked to stay inside ``local`` before the first file is
    written (``UnsafeRemotePath`` otherwise); remote symlinks are not followed.
    """
    start = time.monotonic()
    count = [0, 0]
    try:
        attrs = await sftp.stat(remote)
        if attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY:
            listing = await _remote_listing(sftp, remote)
            plan = [
                (rel, _contained(local, rel, target=target, remote=remote), size)
                for rel, (size, _mtime) in sorted(listing.items())
                if rel != MANIFEST_NAME
            ]
            for rel, dest, size in plan:
                dest.parent.mkdir(parents=True, exist_ok=True)
                await _get_into_place(sftp, _join(remote, rel), dest)
                count[0] += 1
                count[1] += size
        else:
            if local.is_dir():
                dest = _contained(local, posixpath.basename(remote), target=target, remote=remote)
            else:
                dest = local
            dest.parent.mkdir(parents=True, exist_ok=True)
            await _get_into_place(sftp, remote, dest)
            count[0], count[1] = 1, attrs.size or 0
    except TransferError:
        raise
    except (asyncssh.Error, OSError, TimeoutError) as exc:
        raise transfer_error(
            exc,
            doing=f"downloading {remote} to {local}",
            target=target,
            remote=remote,
            done=f"{count[0]} file(s) received",
        ) from None
    return TransferReport(local, remote, count[0], count[1], 0, 0, time.monotonic() - start)


async def remove_tree(sftp: asyncssh.SFTPClient, remote: str, *, target: str) -> bool:
    """Delete a remote file or directory tree; ``False`` when it did not exist."""
    try:
        try:
            attrs = await sftp.lstat(remote)
        except asyncssh.SFTPNoSuchFile:
            return False
        real = await sftp.realpath(remote)
        home = await sftp.realpath(".")
        if real in ("/", home) or not remote.strip():
            raise TransferError(
                f"Refusing to remove {remote!r} on {target}: it is / or the user's home",
                "Give the deployment's own sub-directory.",
                stage="transfer",
            )
        if attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY:
            await sftp.rmtree(remote)
        else:
            await sftp.remove(remote)
    except TransferError:
        raise
    except (asyncssh.Error, OSError) as exc:
        raise transfer_error(
            exc, doing=f"removing {remote}", target=target, remote=remote, done="partially removed"
        ) from None
    return True


__all__ = [
    "DEFAULT_EXCLUDE",
    "MANIFEST_NAME",
    "FileSentCallback",
    "TransferConnectionLost",
    "TransferReport",
    "UnsafeRemotePath",
    "download",
    "remove_tree",
    "scan_local_tree",
    "transfer_error",
    "upload_dir",
]
