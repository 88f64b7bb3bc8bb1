"""A finished job's result bundle, as the pages use it.

The agent uploads the bundle as ``bundle.tar.gz``; the job page shows its own
``report.html`` (rendered on the board host by ``report.html``, the same page a local
``--report`` writes) and compare reads its ``summary.json``/``manifest.json`` through
``report.compare``. Both need it unpacked: it is checked member by member like an export
upload (``archive``), extracted once into a private folder and renamed into place, so two
requests never see half a bundle. A zip of it is made the same way, on first download.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

from aidge_deploy.farm.archive import ArchiveError, _member_problem

BUNDLE_ARCHIVE = "bundle.tar.gz"
BUNDLE_DIR = "bundle"
BUNDLE_ZIP = "bundle.zip"


def bundle_dir(job_dir: Path) -> Path | None:
    """The unpacked bundle of a job (unpacking it the first time); None if it has none."""
    archive = job_dir / BUNDLE_ARCHIVE
    final = job_dir / BUNDLE_DIR
    if final.is_dir():
        return final
    if not archive.is_file():
        return None
    work = Path(tempfile.mkdtemp(prefix=".bundle-", dir=job_dir))
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            for member in tar:
                problem = _member_problem(member)
                if problem:
                    raise ArchiveError(f"refused result bundle: {problem}")
            tar.extractall(work, filter="data")
        try:
            os.rename(work, final)
        except OSError:
            if not final.is_dir():  # not a concurrent request that won the race
                raise
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(f"the job's result bundle cannot be read ({exc})") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def bundle_zip(job_dir: Path) -> Path | None:
    """The bundle as a zip file (made once); None if the job has no bundle."""
    final = job_dir / BUNDLE_ZIP
    if final.is_file():
        return final
    folder = bundle_dir(job_dir)
    if folder is None:
        return None
    fd, tmp = tempfile.mkstemp(prefix=".zip-", dir=job_dir)
    try:
        with (
            os.fdopen(fd, "wb") as raw,
            zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED, strict_timestamps=False) as zf,
        ):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    zf.write(path, path.relative_to(folder).as_posix())
        os.replace(tmp, final)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return final


def report_file(job_dir: Path) -> Path | None:
    folder = bundle_dir(job_dir)
    if folder is None:
        return None
    report = folder / "report.html"
    return report if report.is_file() else None


__all__ = ["BUNDLE_ARCHIVE", "bundle_dir", "bundle_zip", "report_file"]
