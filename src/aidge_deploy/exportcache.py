"""``profile``'s export cache: a model is exported once per what determines its export.

Why this module exists: Aidge writes a re-export with its ``#include`` lines in another order
each time, so a content-keyed build cache never hits for ``profile`` — every run re-exported
(seconds) and rebuilt. The export itself is therefore cached, keyed by what determines it:
the model file's bytes, the target, the dtype and application settings of the
``ExportRequest``, the versions of the Aidge packages (and of ours: the emulated boards'
BSPs and the input generation live here). An unchanged model is then neither re-exported
nor rebuilt (its export folder, and so the build cache's key, stay the same).

Entries are written atomically (exported in a private folder, then renamed into place) and
never modified afterwards, so parallel ``profile`` runs of one model share them safely.
A folder the user names (``--work-dir``) is reused when its stamp matches, else replaced
— but only if it is empty or an export; anything else is refused, never deleted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.errors import ConfigError
from aidge_deploy.exportspec import Export
from aidge_deploy.modelexport import ExportRequest, export_model
from aidge_deploy.ownsources import own_sources_digest

STAMP_NAME = ".aidge-deploy-export.json"
STAMP_SCHEMA = "aidge-deploy.export-stamp/1"
MANIFEST_NAME = ".aidge-export.json"
#: the packages whose code makes the export
_PACKAGES = (
    "aidge-core",
    "aidge-onnx",
    "aidge-backend-cpu",
    "aidge-export-cpp",
    "aidge-export-arm-cortexm",
    "aidge-quantization",
    "aidge-deploy",
    "numpy",  # the random sample inputs
    "onnx",
)
_PRIVATE_PREFIX = ".tmp-"


@dataclass(frozen=True)
class CachedExport:
    """An export ready to deploy, and whether it came from the cache."""

    artifact: Export
    path: Path
    reused: bool
    key: str
    duration_s: float


@cache
def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@lru_cache(maxsize=8)
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    del size, mtime_ns  # in the cache key: a changed file is read again
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_key(request: ExportRequest) -> str:
    """The hex key of everything that determines the export of ``request``."""
    info = request.model.stat()
    model = _file_digest(request.model.absolute(), info.st_size, info.st_mtime_ns)
    fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
    fields.pop("model")
    fields.pop("out_dir")
    fields["target"] = str(fields["target"]).lower()
    # the arrays' bytes, not their text (numpy abbreviates a large array's repr)
    inputs = hashlib.sha256()
    for array in fields.pop("inputs"):
        value = np.ascontiguousarray(array, dtype=np.float32)
        inputs.update(repr(value.shape).encode() + value.tobytes())
    fields["inputs"] = inputs.hexdigest() if request.inputs else ""
    doc = {
        "model_sha256": model,
        # the inputs (sample, int8 calibration set) by their bytes: their str() elides the
        # middle of a large array, so two calibration sets could share it
        "inputs_sha256": inputs_digest(fields.pop("inputs")),
        "request": {k: str(v) for k, v in sorted(fields.items())},
        "packages": {p: _version(p) for p in _PACKAGES},
        "aidge_deploy_sources": own_sources_digest(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def inputs_digest(arrays: Sequence[np.ndarray]) -> str:
    """Hex SHA-256 of a sequence of arrays: their dtypes, shapes and bytes, in order."""
    digest = hashlib.sha256(str(len(arrays)).encode())
    for array in arrays:
        data = np.ascontiguousarray(array)
        digest.update(f"\0{data.dtype.str}{data.shape}\0".encode())
        digest.update(data.tobytes())
    return digest.hexdigest()


def cache_entry(request: ExportRequest, key: str) -> Path:
    """``<cache>/exports/<model>-<target>-<dtype>-<key>``."""
    name = f"{request.model.stem}-{request.target.lower()}-{request.dtype.value}-{key[:16]}"
    return default_cache_root() / "exports" / name


def entry_model_stem(name: str, target: str, dtype: str) -> str | None:
    """The model's file stem in a cache entry's folder name (``cache_entry``), or None when
    ``name`` is not one (an uploaded export keeps its folder's name: the farm names it so)."""
    tail = f"-{target.lower()}-{dtype}-"
    head, sep, key = name.rpartition(tail)
    if not sep or len(key) != 16 or any(c not in "0123456789abcdef" for c in key):
        return None
    return head or None


def _read_stamp(folder: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((folder / STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == STAMP_SCHEMA else None


def _reusable(folder: Path, key: str) -> bool:
    stamp = _read_stamp(folder)
    return stamp is not None and stamp.get("key") == key and (folder / MANIFEST_NAME).is_file()


def _load(folder: Path) -> Export:
    """The export in ``folder``, read from its manifest (no ``aidge_core`` import)."""
    from aidge_deploy.artifact import load_export_artifact

    return load_export_artifact(folder)


def _check_replaceable(folder: Path) -> None:
    """A ``--work-dir`` that is not ours to replace is refused (never deleted)."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ConfigError(
            f"--work-dir {folder} is a file, not a folder",
            hint="Pass a folder for the export (a new one, or an earlier export).",
        )
    if any(folder.iterdir()) and not (
        (folder / MANIFEST_NAME).is_file() or (folder / STAMP_NAME).is_file()
    ):
        raise ConfigError(
            f"--work-dir {folder} is not empty and holds no export; refusing to replace it",
            hint="Pass a new or empty folder, or an earlier export folder.",
        )


def _destination(request: ExportRequest, key: str, work_dir: Path | None) -> Path:
    return (Path(work_dir) if work_dir is not None else cache_entry(request, key)).absolute()


def is_cached(request: ExportRequest, *, work_dir: Path | None = None) -> bool:
    """Whether ``prepare_export`` would reuse an existing export (nothing to export)."""
    key = export_key(request)
    return _reusable(_destination(request, key, work_dir), key)


def prepare_export(
    request: ExportRequest, *, work_dir: Path | None = None, log_path: Path | None = None
) -> CachedExport:
    """The export of ``request``: reused if an identical one exists, else made and stored.

    ``work_dir`` None stores it in the export cache (``request.out_dir`` is ignored);
    otherwise in ``work_dir``. ``log_path`` receives the exporter's output.
    """
    started = time.perf_counter()
    key = export_key(request)
    final = _destination(request, key, work_dir)
    if _reusable(final, key):
        _log_line(log_path, f"reused the export {final} (key {key[:16]})\n")
        return CachedExport(_load(final), final, True, key, time.perf_counter() - started)
    if work_dir is not None:
        _check_replaceable(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{final.name}-", dir=final.parent))
    try:
        staged = private / final.name  # the folder's name is part of the build cache's key
        export_model(
            ExportRequest(**{**request.__dict__, "out_dir": staged}),
            log_path=log_path,
        )
        stamp = {
            "schema": STAMP_SCHEMA,
            "key": key,
            "model": str(request.model.absolute()),
            "target": request.target,
            "dtype": request.dtype.value,
        }
        (staged / STAMP_NAME).write_text(json.dumps(stamp, indent=2), encoding="utf-8")
        reused = not _install(staged, final, replace=work_dir is not None)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return CachedExport(_load(final), final, reused, key, time.perf_counter() - started)


def _install(staged: Path, final: Path, *, replace: bool) -> bool:
    """Rename ``staged`` to ``final``; False when an identical entry won the race."""
    old: Path | None = None
    if final.exists():
        if not replace:
            return False  # a parallel run stored the same export first: use it
        old = final.with_name(f"{_PRIVATE_PREFIX}{final.name}-old-{time.monotonic_ns()}")
        final.rename(old)
    try:
        staged.rename(final)
    except OSError:
        if old is not None and not final.exists():
            old.rename(final)
        if final.exists() and not replace:
            return False
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return True


def _log_line(log_path: Path | None, text: str) -> None:
    if log_path is None:
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(text)


__all__ = [
    "CachedExport",
    "cache_entry",
    "entry_model_stem",
    "export_key",
    "inputs_digest",
    "is_cached",
    "prepare_export",
]
