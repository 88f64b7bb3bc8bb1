"""Where a result bundle goes: checked before the run, so a bad ``--report`` costs nothing.

A run can take minutes; finding out afterwards that its bundle cannot be written (a file
where a folder is expected, ``/proc``, a read-only mount, someone else's folder) would
throw its results away. ``check_report_dir`` answers before anything is built, with a
typed ``ReportError``; ``describe_os_error`` words the errors of a write that still fails.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from aidge_deploy.errors import ReportError
from aidge_deploy.report.manifest import MANIFEST_NAME

_WORDS = {
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENOENT: "folders cannot be created there (a virtual file system such as /proc?)",
    errno.ENOTDIR: "a file stands where a folder is needed",
}


def describe_os_error(exc: OSError) -> str:
    """``exc`` in words a user can act on, with its errno name."""
    name = errno.errorcode.get(exc.errno or 0, "")
    words = _WORDS.get(exc.errno or 0, exc.strerror or str(exc))
    return f"{words} ({name})" if name else words


def is_bundle(path: Path) -> bool:
    return (path / MANIFEST_NAME).is_file()


def check_report_dir(path: Path, *, overwrite: bool = False) -> Path:
    """Raise ``ReportError`` unless a bundle can be written at ``path``; the absolute path.

    ``path`` must be a new folder, an empty one, or (with ``overwrite``) an earlier bundle;
    its parent must allow creating folders (the bundle is staged beside it and renamed).
    Nothing is created.
    """
    path = Path(path).expanduser().absolute()
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ReportError(
                f"--report {path} is a file, not a folder",
                hint="Pass a folder for the result bundle (a new one, or an earlier bundle "
                "with --overwrite).",
            )
        if any(path.iterdir()):
            if not is_bundle(path):
                raise ReportError(
                    f"--report {path} is not empty and is not a result bundle; "
                    "refusing to write into it",
                    hint="Pass a new or empty folder for the result bundle.",
                )
            if not overwrite:
                raise ReportError(
                    f"--report {path} already holds a result bundle",
                    hint="Pass --overwrite to replace it, or choose another folder.",
                )
    probe_writable(path.parent, f"--report {path}", "the result bundle")
    return path


def probe_writable(folder: Path, option: str, what: str) -> Path:
    """The nearest existing folder of ``folder``, checked to let us create ``what`` in it
    (a folder made and removed there): ``ReportError`` naming ``option`` when it does not
    (a read-only or virtual file system such as ``/proc``, no permission, a file)."""
    parent = Path(folder)
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ReportError(
            f"{option}: {parent} is a file, not a folder",
            hint="Pass a folder path whose parents are folders.",
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".aidge-deploy-probe-", dir=parent))
    except OSError as exc:
        raise ReportError(
            f"{option}: cannot create {what} under {parent}: {describe_os_error(exc)}",
            hint="Pass a folder on a writable file system where you have write permission.",
        ) from None
    return parent


__all__ = ["check_report_dir", "describe_os_error", "is_bundle", "probe_writable"]
