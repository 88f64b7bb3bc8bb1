"""The export/deploy boundary: load and validate an export, check it against the config.

``aidge_core``'s own loader raises bare ``TypeError``/``ValueError`` and does not resolve
paths; here every failure is a ``ManifestError`` or ``ConfigError`` naming the file and the
field, with a hint. This module also recovers what the 0.10.1 manifest leaves out (its
``memory_peak_bytes`` is always null) and hydrates runtime defaults from
``application_config`` when the caller gave none.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.errors import ConfigError, ManifestError
from aidge_deploy.exportspec import (
    EXPORT_MANIFEST_NAME,
    EXPORT_MANIFEST_SCHEMA_VERSION,
    Application,
    Export,
    Manifest,
)
from aidge_deploy.filememo import FileMemo, Reads, Signature, signature, signature_of

if TYPE_CHECKING:
    from aidge_core.export_utils import ExportArtifact
    from aidge_core.export_utils.config import BenchmarkConfig, ValidationConfig

    from aidge_deploy.config import DeployConfig

_FIELDS = {f.name: f for f in dataclasses.fields(Manifest)}
REQUIRED_KEYS = frozenset(
    name
    for name, f in _FIELDS.items()
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
) | {"schema_version"}

_TYPES: dict[str, tuple[type, ...]] = {
    "target": (str,),
    "execution_domain": (str,),
    "environment": (str,),
    "build_system": (str,),
    "application": (str,),
    "expected_artifact": (str,),
    "protocol": (str,),
    "arch": (str, type(None)),
    "export_libraries": (list,),
    "inputs": (list,),
    "outputs": (list,),
    "memory_peak_bytes": (int, list, type(None)),
    "profiling": (bool,),
    "aidge_cmp": (bool,),
    "application_config": (dict,),
    "schema_version": (int,),
}
_TENSOR_KEYS = ("name", "dtype", "size", "dims")
_MEM_DECL = re.compile(
    r"static\s+(?:unsigned\s+char|uint8_t|int8_t|char)\s+mem_(\d+)\s*\[\s*(\d+)\s*\]"
)
_SKIP_DIRS = {"build", "bin", "out", ".git", "__pycache__", "obj"}


def _bad(manifest_path: Path, field: str, problem: str, hint: str) -> ManifestError:
    return ManifestError(f"{manifest_path}: field '{field}' {problem}", hint=hint)


def _escape_reason(path: str) -> str | None:
    """Why ``path`` (relative to the export, may be a glob) would leave the export, or None."""
    if not path.strip():
        return "is empty"
    if "\0" in path:
        return "contains a NUL byte"
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        return f"is an absolute path ({path!r})"
    if ".." in re.split(r"[\\/]", path):
        return f"leaves the export folder through '..' ({path!r})"
    return None


def check_manifest_paths(artifact: Any, arch: Any, manifest_path: Path) -> None:
    """The manifest names files inside the export; none of them may select a file elsewhere
    (``expected_artifact`` is what gets flashed or uploaded; ``arch`` picks the CMake
    toolchain file ``cmake/<arch>.toolchain``). ``ManifestError`` naming the field."""
    if isinstance(artifact, str):
        reason = _escape_reason(artifact)
        if reason is not None:
            raise _bad(
                manifest_path,
                "expected_artifact",
                reason,
                "It must be a path (or glob) relative to the export, inside it, like "
                "'build/run_export' or 'bin/*.elf'; re-export the model or fix the manifest.",
            )
    if isinstance(arch, str) and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", arch):
        raise _bad(
            manifest_path,
            "arch",
            f"is not an architecture name ({arch!r})",
            "Use a name like 'riscv64' or 'cortex-m7' (it selects cmake/<arch>.toolchain "
            "inside the export), or null for a native build.",
        )


def validate_manifest_dict(values: Any, manifest_path: Path) -> Manifest:
    """Validate the raw JSON of a manifest and build the ``Manifest``."""
    regen = "Re-export the model with aidge_core.export_utils.export() (Aidge 0.10.x)."
    if not isinstance(values, dict):
        raise ManifestError(f"{manifest_path}: the manifest is not a JSON object", hint=regen)
    version = values.get("schema_version")
    if version is None:
        raise _bad(manifest_path, "schema_version", "is missing", regen)
    if version != EXPORT_MANIFEST_SCHEMA_VERSION:
        raise _bad(
            manifest_path,
            "schema_version",
            f"is {version!r}; this aidge-deploy reads schema {EXPORT_MANIFEST_SCHEMA_VERSION}",
            "Use the aidge-deploy release that matches the Aidge version that made the export.",
        )
    for key in values:
        if key not in _FIELDS:
            close = difflib.get_close_matches(key, list(_FIELDS), n=1)
            suggestion = f" Did you mean '{close[0]}'?" if close else ""
            raise _bad(
                manifest_path,
                key,
                "is not part of manifest schema 1",
                f"Remove it or fix its name.{suggestion}",
            )
    for key in sorted(REQUIRED_KEYS):
        if key not in values:
            raise _bad(manifest_path, key, "is missing", regen)
    for key, value in values.items():
        allowed = _TYPES.get(key)
        if (allowed and not isinstance(value, allowed)) or (
            isinstance(value, bool) and bool not in (allowed or ())
        ):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in allowed or ())
            raise _bad(
                manifest_path, key, f"has type {type(value).__name__}, expected {names}", regen
            )
    for key in ("inputs", "outputs"):
        for index, tensor in enumerate(values.get(key, [])):
            if not isinstance(tensor, dict) or any(k not in tensor for k in _TENSOR_KEYS):
                raise _bad(
                    manifest_path,
                    f"{key}[{index}]",
                    f"must be an object with {', '.join(_TENSOR_KEYS)}",
                    regen,
                )
    check_manifest_paths(values.get("expected_artifact"), values.get("arch"), manifest_path)
    app_fields = {f.name for f in dataclasses.fields(Application)}
    for key in values.get("application_config", {}):
        if key not in app_fields:
            raise _bad(manifest_path, f"application_config.{key}", "is unknown", regen)
    try:
        return Manifest(**values)
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{manifest_path}: {exc}", hint=regen) from exc


def load_export_artifact(value: str | os.PathLike[str] | ExportArtifact | Export) -> Export:
    """Load an export directory (or re-check an ``ExportArtifact``), with an absolute path.

    An ``aidge_core`` ``ExportArtifact`` (or an ``Export``) is taken as it is, its manifest
    copied into a ``Manifest``; a folder is read without importing ``aidge_core``.
    """
    if hasattr(value, "manifest") and hasattr(value, "path"):
        path = Path(value.path).resolve()
        if not path.is_dir():
            raise ManifestError(
                f"Export directory {path} does not exist",
                hint="The ExportArtifact points to a folder that was moved or deleted.",
            )
        manifest = Manifest.of(value.manifest)
        check_manifest_paths(manifest.expected_artifact, manifest.arch, path / EXPORT_MANIFEST_NAME)
        return Export(path=path, manifest=manifest)
    path = Path(value).expanduser().resolve()
    manifest_path = path / EXPORT_MANIFEST_NAME
    if not path.is_dir():
        raise ManifestError(
            f"Export directory {path} does not exist",
            hint="Pass the folder produced by aidge_core.export_utils.export().",
        )
    if not manifest_path.is_file():
        raise ManifestError(
            f"{manifest_path} not found",
            hint="This folder is not an Aidge export; generate it with "
            "aidge_core.export_utils.export() (Aidge >= 0.10), or use `aidge-deploy profile MODEL.onnx`.",
        )
    try:
        raw = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{manifest_path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            hint="The manifest was edited or truncated; re-export the model.",
        ) from exc
    return Export(path=path, manifest=validate_manifest_dict(raw, manifest_path))


def canonical_target(name: str) -> str:
    """Resolve an alias (``stm32n6``) to the hardware model's canonical name (imports
    ``aidge_core``: callers first compare the names as given)."""
    from aidge_core.hw_model import get_target_class

    try:
        cls = get_target_class(name)
    except KeyError:
        return name.lower()
    try:
        return str(cls().name).lower()
    except Exception:  # a target whose constructor needs arguments: keep the given name
        return name.lower()


def check_target(
    config: DeployConfig,
    manifest: Manifest,
    manifest_path: Path,
    hardware_model: str | None = None,
) -> str:
    """Return the target to deploy to; reject a config whose target differs from the export's.

    ``hardware_model`` is the hardware model's name of the config's target when its board
    record names one (a lab's name for an existing board): an export generated for that
    hardware model deploys to the board, under the board's name.
    """
    if not config.target or config.target.lower() == manifest.target.lower():
        return manifest.target
    board_of_its_model = (
        hardware_model is not None
        and hardware_model.lower() != config.target.lower()
        and canonical_target(hardware_model) == canonical_target(manifest.target)
    )
    if board_of_its_model:
        return config.target.lower()
    if canonical_target(config.target) != canonical_target(manifest.target):
        raise ConfigError(
            f"Config target {config.target!r} differs from the export's target "
            f"{manifest.target!r} ({manifest_path})",
            hint=f"Deploy with target={manifest.target!r}, or re-export the model for "
            f"{config.target!r}: an export is generated for one hardware target.",
        )
    return manifest.target


@dataclass(frozen=True)
class RuntimeSettings:
    """Runtime defaults after hydration from ``application_config``.

    ``benchmark`` and ``validation`` are the caller's ``aidge_core`` configs, or ones made
    from the manifest on first access (importing ``aidge_core``): a deploy reads only the
    plain fields.
    """

    manifest: Manifest
    given_benchmark: BenchmarkConfig | None
    given_validation: ValidationConfig | None
    tinyml: bool
    nb_iterations: int
    nb_warmup: int
    profiling: bool
    #: the reference labels of a validation run, and how its outputs are scored
    labels: tuple[Any, ...] | None
    inference_type: str

    @property
    def benchmark(self) -> BenchmarkConfig:
        if self.given_benchmark is not None:
            return self.given_benchmark
        from aidge_core.export_utils.config import BenchmarkConfig

        app = self.manifest.application_config or {}
        mode = "output" if self.manifest.application in ("output", "standalone") else "benchmark"
        return BenchmarkConfig(
            mode=mode,
            nb_warmup=self.nb_warmup,
            nb_iterations=self.nb_iterations,
            profiling=self.profiling,
            tinymlbenchmark=self.tinyml,
            tinyml_benchmark_model=str(
                app.get("tinyml_benchmark_model", Application.tinyml_benchmark_model)
            ),
        )

    @property
    def validation(self) -> ValidationConfig:
        if self.given_validation is not None:
            return self.given_validation
        from aidge_core.export_utils.config import ValidationConfig

        app = self.manifest.application_config or {}
        is_validation = self.manifest.application == "validation" or bool(app.get("validation"))
        return ValidationConfig(
            nb_validation_iterations=int(
                app.get("nb_validation_iterations", Application.nb_validation_iterations)
            )
            or None,
            inference_type=self.inference_type,
            validation_on_target=is_validation and self.manifest.environment == "baremetal",
        )


def hydrate_runtime(config: DeployConfig, manifest: Manifest) -> RuntimeSettings:
    """Fill benchmark / validation / TinyML settings from the manifest (a heterogeneous
    export is refused in Preflight).

    Explicit sub-configs win. The firmware's real behaviour is what the manifest says it
    was generated with, so the expected number of iterations always comes from there.
    """
    app = manifest.application_config or {}
    validation = config.validation
    if validation is not None:
        labels = tuple(validation.labels) if validation.labels else None
        inference_type = str(validation.inference_type)
    else:
        labels = None
        inference_type = str(
            app.get("validation_inference_type", Application.validation_inference_type)
        )
    return RuntimeSettings(
        manifest=manifest,
        given_benchmark=config.benchmark,
        given_validation=validation,
        tinyml=bool(app.get("tinymlbenchmark", Application.tinymlbenchmark)),
        nb_iterations=int(app.get("nb_iterations", Application.nb_iterations)),
        nb_warmup=int(app.get("nb_warmup", Application.nb_warmup)),
        profiling=bool(app.get("profiling", manifest.profiling)),
        labels=labels,
        inference_type=inference_type,
    )


#: the peaks read from an export's sources, by export folder, kept while they are unchanged
_PEAKS: FileMemo[str, tuple[int, ...]] = FileMemo()


def memory_peaks(artifact: Export) -> tuple[int, ...]:
    """Per-memory peak bytes of the export's static plan.

    Uses the manifest value when present; Aidge 0.10.1 always writes null, so fall back to
    the ``static unsigned char mem_<i>[N];`` buffers of ``dnn/src/forward.cpp`` and then to
    the ``[MEM_k]`` planes of ``stats/memory_info.txt`` (what they say is kept for the
    process while those files are unchanged: ``filememo``).
    """
    declared = artifact.manifest.memory_peak_bytes
    if isinstance(declared, list) and declared:
        return tuple(int(v) for v in declared)
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return (declared,)
    return _PEAKS.answer(str(artifact.path), lambda reads: _peaks_of(artifact.path, reads))


def _peaks_of(root: Path, reads: Reads) -> tuple[int, ...]:
    src_dir = root / "dnn" / "src"
    reads.sign(src_dir)
    sources = sorted(src_dir.glob("*.c*"))
    peaks: dict[int, int] = {}
    for source in sources:
        reads.sign(source)
        for match in _MEM_DECL.finditer(source.read_text(encoding="utf-8", errors="replace")):
            peaks[int(match.group(1))] = max(peaks.get(int(match.group(1)), 0), int(match.group(2)))
    if peaks:
        return tuple(peaks[i] for i in sorted(peaks))
    info = root / "stats" / "memory_info.txt"
    reads.sign(info)
    return _peaks_from_memory_info(info)


def _peaks_from_memory_info(path: Path) -> tuple[int, ...]:
    if not path.is_file():
        return ()
    planes: dict[int, int] = {}
    current: int | None = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        header = re.match(r"\s*\[MEM_(\d+)\]", line)
        if header:
            current = int(header.group(1))
            planes.setdefault(current, 0)
            continue
        if current is None:
            continue
        numbers = [int(n) for n in re.findall(r"\b\d+\b", line)]
        offset = re.search(r"offset\s*[:=]\s*(\d+)", line)
        size = re.search(r"size\s*[:=]\s*(\d+)", line)
        if offset and size:
            planes[current] = max(planes[current], int(offset.group(1)) + int(size.group(1)))
        elif len(numbers) >= 2:
            planes[current] = max(planes[current], numbers[-2] + numbers[-1])
    return tuple(planes[k] for k in sorted(planes))


_SKIP_FILES = frozenset(("export_log.log", "uart_output.txt", ".aidge-deploy-build.json"))
_SKIP_SUFFIXES = frozenset((".o", ".d", ".elf", ".log", ".map"))


def _source_entries(
    top: str, folders: list[tuple[str, Signature]] | None = None
) -> list[tuple[tuple[str, ...], str, os.stat_result]]:
    """``(relative parts, path, stat)`` of every source file under ``top``, sorted by parts.

    The walk of ``os.walk`` (links to folders not followed, top-level build folders left
    out, regular files only, links to them followed), one ``stat`` a file. ``folders``
    receives every folder listed with its signature, taken before it was listed.
    """
    found: list[tuple[tuple[str, ...], str, os.stat_result]] = []
    pending: list[tuple[tuple[str, ...], str, Signature]] = [((), top, signature(top))]
    while pending:
        parts, folder, folder_sig = pending.pop()
        if folders is not None:
            folders.append((folder, folder_sig))
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            try:
                if is_dir:
                    if not entry.is_symlink() and (parts or entry.name not in _SKIP_DIRS):
                        pending.append(
                            ((*parts, entry.name), entry.path, signature_of(entry.stat()))
                        )
                    continue
                name = entry.name
                if name in _SKIP_FILES or os.path.splitext(name)[1] in _SKIP_SUFFIXES:
                    continue
                st = entry.stat()
            except OSError:
                continue  # gone, or a broken link
            if stat.S_ISREG(st.st_mode):
                found.append(((*parts, name), entry.path, st))
    found.sort(key=lambda item: item[0])  # by path components, as sorting Paths does
    return found


def export_source_files(root: Path) -> list[Path]:
    """The export's sources and manifest, sorted (build outputs and logs left out)."""
    return [Path(path) for _, path, _ in _source_entries(str(root))]


def _content_hash(files: list[tuple[tuple[str, ...], str, os.stat_result]]) -> str:
    digest = hashlib.sha256()
    for parts, path, _ in files:
        digest.update(os.sep.join(parts).encode())
        digest.update(b"\0")
        with open(path, "rb") as handle:
            digest.update(handle.read())
        digest.update(b"\0")
    return digest.hexdigest()


#: export hashes by folder, kept while no file or folder of the export changed
_HASHES: FileMemo[str, str] = FileMemo()


def export_hash(artifact: Export) -> str:
    """SHA-256 over the export's sources and manifest (build outputs excluded).

    Two exports with the same hash build to the same program, so it keys the build cache.
    The content hash is memoised per export folder against a cheap fingerprint (path,
    size, mtime and ctime of every file), so re-deploying an unchanged export reads no sources;
    within one process, while no file or folder of the export changed (``filememo``), it
    is not even fingerprinted again.
    """
    root = Path(artifact.path)
    return _HASHES.answer(str(root), lambda reads: _export_hash(root, reads))


def _export_hash(root: Path, reads: Reads) -> str:
    folders: list[tuple[str, Signature]] = []
    files = _source_entries(str(root), folders)
    fingerprint = hashlib.sha256()
    for parts, _, st in files:
        rel = os.sep.join(parts)
        # ctime too: a same-size rewrite whose mtime was put back (cp -p, tar, rsync -t)
        # cannot put it back
        fingerprint.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n".encode())
    key = fingerprint.hexdigest()
    memo = (
        default_cache_root()
        / "hashes"
        / (hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24] + ".json")
    )
    digest: str | None = None
    try:
        stored = json.loads(memo.read_text(encoding="utf-8"))
        if stored.get("fingerprint") == key and isinstance(stored.get("hash"), str):
            digest = str(stored["hash"])
    except (OSError, json.JSONDecodeError):
        pass
    if digest is None:
        digest = _content_hash(files)
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"fingerprint": key, "hash": digest}), encoding="utf-8")
            tmp.replace(memo)
        except OSError:
            pass  # a read-only cache only costs speed
    for path, sig in [*folders, *((path, signature_of(st)) for _, path, st in files)]:
        reads.signed(path, sig)
    return digest
