"""Write a result bundle: the files of one run, complete or not at all.

Everything is written into a hidden sibling temporary directory, ``manifest.json`` last,
and the directory is then renamed into place: a crash, a full disk or Ctrl-C never leaves
a half-written bundle that looks complete. An earlier bundle at the same place is replaced
(only if it *is* a bundle: a folder with other content is refused, never deleted). Every
secret the config holds is scrubbed from the raw log and from the strings of the JSON
documents, before anything is derived from them (``report.redact``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ReportError
from aidge_deploy.exportspec import Export
from aidge_deploy.profiling.binary import BinaryInfo
from aidge_deploy.profiling.validity import Validity
from aidge_deploy.report import metadata as meta
from aidge_deploy.report.assess import assess
from aidge_deploy.report.destination import describe_os_error
from aidge_deploy.report.html import render_html
from aidge_deploy.report.identity import model_identity
from aidge_deploy.report.manifest import (
    MANIFEST_NAME,
    FileRole,
    ManifestEntry,
    build_manifest,
    sha256_bytes,
)
from aidge_deploy.report.overlay import build_overlays
from aidge_deploy.report.reader import METADATA_NAME, SUMMARY_NAME
from aidge_deploy.report.redact import Scrubber, sanitize, secret_values
from aidge_deploy.report.schemas import (
    CURRENT_VERSIONS,
    DOCUMENT_IDS,
    SchemaName,
    validate_document,
)
from aidge_deploy.report.summary import (
    ProfileFormat,
    build_summary,
    profile_results_csv,
    profile_results_json,
    result_provenance,
)
from aidge_deploy.results import DeployResult, Provenance

log = logging.getLogger("aidge_deploy")

REPORT_NAME = "report.html"
OVERLAY_DIR = "model_explorer"
LOG_DIR = "logs"
#: the power window's raw data, beside the profile run's log
POWER_DIR = f"{LOG_DIR}/power"
METADATA_SCHEMA = DOCUMENT_IDS[SchemaName.RUN_METADATA]


@dataclass(frozen=True)
class Bundle:
    """A bundle that was written: where, which run, which files, how valid."""

    path: Path
    run_id: str
    files: tuple[Path, ...]
    validity: Validity

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_NAME

    @property
    def report_path(self) -> Path:
        return self.path / REPORT_NAME


class _Writer:
    """Writes files into the staging directory and records their digests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.entries: list[ManifestEntry] = []

    def add(self, rel: str, data: bytes | str, media_type: str, role: FileRole) -> None:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        self.entries.append(ManifestEntry(rel, len(raw), sha256_bytes(raw), media_type, role))

    def add_json(self, rel: str, doc: Any, role: FileRole) -> None:
        self.add(rel, json.dumps(doc, indent=2, sort_keys=False) + "\n", "application/json", role)


def _manifest_dict(artifact: Export) -> dict[str, Any]:
    return {
        f.name: getattr(artifact.manifest, f.name) for f in dataclasses.fields(artifact.manifest)
    }


def _build_metadata(
    *,
    run_id: str,
    timestamp: str,
    result: DeployResult,
    config: DeployConfig,
    artifact: Export,
    identity: Mapping[str, Any],
    hardware: Mapping[str, Any],
    toolchain: Mapping[str, str | None],
    durations: Mapping[str, float],
    log_entry: Mapping[str, Any] | None,
) -> dict[str, Any]:
    packages = meta.package_versions()
    return {
        "schema": METADATA_SCHEMA,
        "schema_version": CURRENT_VERSIONS[SchemaName.RUN_METADATA],
        "run_id": run_id,
        "timestamp": timestamp,
        "tool": {"name": "aidge-deploy", "version": packages.get("aidge-deploy") or "unknown"},
        "packages": packages,
        "host": meta.host_facts(),
        "config": sanitize(config.snapshot()),
        "target": {
            "name": result.target,
            "backend": result.backend,
            "provenance": result_provenance(result).value,
            "hardware": dict(hardware),
        },
        "export": {
            "path": str(artifact.path),
            **identity,
            "manifest": sanitize(_manifest_dict(artifact)),
        },
        "toolchain": dict(toolchain),
        "stage_durations_ms": meta.stage_durations(durations),
        "log": None if log_entry is None else dict(log_entry),
    }


def _comparability(summary: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    identity = summary["identity"]
    export_manifest = metadata["export"]["manifest"]
    return {
        "model_hash": identity["model_hash"],
        "io_signature": identity["io_signature"],
        "target": summary["target"],
        "export_hash": identity["export_hash"],
        "backend": summary["backend"],
        "protocol": summary["protocol"],
        "provenance": summary["provenance"],
        "application": export_manifest.get("application"),
        "aggregation": summary["aggregation"],
        "aidge_core": metadata["packages"].get("aidge-core"),
        "aidge_deploy": metadata["tool"]["version"],
        "toolchain": metadata["toolchain"],
        "power_source": (summary.get("power") or {}).get("source"),
        "time_model": time_model_of(summary),
    }


def time_model_of(summary: Mapping[str, Any]) -> str | None:
    """What an emulated board's times are estimated with: its core's timing model, or
    "CPI = 1" (``--timing cpi1``, and every bundle from before the models); None elsewhere."""
    model = summary.get("timing_model") or {}
    if model.get("model") and not model.get("unavailable"):
        return str(model["model"])
    return "CPI = 1" if summary.get("provenance") == "emulated" else None


def power_raw_files(result: DeployResult) -> list[tuple[str, Path]]:
    """Bundle path and source of each raw file of the power window (``logs/power/...``)."""
    power = result.power
    if power is None:
        return []
    return [(f"{POWER_DIR}/{p.name}", Path(p)) for p in power.raw_files if Path(p).is_file()]


#: media types of the raw files by suffix; a log is text and is scrubbed of secrets, the
#: others are machine data (numbers, a binary capture) and are copied byte for byte
_RAW_MEDIA = {".log": "text/plain", ".csv": "text/csv", ".trace": "text/plain"}


def add_raw_file(writer: _Writer, rel: str, path: Path, scrub: Scrubber) -> None:
    data = path.read_bytes()
    media = _RAW_MEDIA.get(path.suffix, "application/octet-stream")
    writer.add(rel, scrub(data) if path.suffix == ".log" else data, media, FileRole.RAW)


def seal_bundle(
    staging: Path,
    out_dir: Path,
    entries: Sequence[ManifestEntry],
    *,
    run_id: str,
    created: str,
    tool_version: str,
    comparability: Mapping[str, Any],
    overwrite: bool,
) -> None:
    """Write the manifest of the finished ``staging`` folder and move it to ``out_dir``."""
    manifest = build_manifest(
        entries,
        run_id=run_id,
        created=created,
        tool_version=tool_version,
        comparability=comparability,
    )
    validate_document(SchemaName.MANIFEST, manifest, where=MANIFEST_NAME)
    # written last and not listed in itself: its presence marks a complete bundle
    (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
    install_bundle(staging, out_dir, overwrite=overwrite)


def install_bundle(staging: Path, out_dir: Path, *, overwrite: bool) -> None:
    """Move the finished staging directory to ``out_dir`` (replacing an older bundle only
    with ``overwrite``)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportError(
            f"{out_dir} exists and is not a directory",
            hint="Pass a new or empty folder (or an earlier bundle with --overwrite) to --report.",
        )
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not (out_dir / MANIFEST_NAME).is_file():
            raise ReportError(
                f"{out_dir} is not empty and is not a result bundle; refusing to replace it",
                hint="Pass a new or empty folder (or an earlier bundle with --overwrite) to "
                "--report.",
            )
        if not overwrite:
            raise ReportError(
                f"{out_dir} already holds a result bundle",
                hint="Pass --overwrite (DeployConfig.report_overwrite) to replace it, or "
                "choose another folder.",
            )
        old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(out_dir, old)
        try:
            os.replace(staging, out_dir)
        except OSError:
            os.replace(old, out_dir)  # put the earlier bundle back
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    if out_dir.is_dir():
        out_dir.rmdir()
    os.replace(staging, out_dir)


def write_bundle(
    out_dir: Path,
    result: DeployResult,
    config: DeployConfig,
    artifact: Export,
    *,
    hardware: Mapping[str, Any] | None = None,
    binary: BinaryInfo | None = None,
    log_path: Path | None = None,
    stage_durations_ms: Mapping[str, float] | None = None,
    profile_format: ProfileFormat | str = ProfileFormat.CSV,
    requested_counters: Sequence[str] = (),
    toolchain: Mapping[str, str | None] | None = None,
    graph_id: str | None = None,
    overwrite: bool = False,
) -> Bundle:
    """Write the result bundle of one run into ``out_dir`` and return what was written.

    Files: ``summary.json``, ``profile_results.csv`` (or ``.json``), ``run_metadata.json``,
    ``logs/<log name>`` (the raw capture), ``model_explorer/me_overlay_<figure>.json``,
    ``report.html`` and, last, ``manifest.json``. ``toolchain`` defaults to the versions of
    the tools relevant to the target, probed on this machine; ``graph_id`` (the Model
    Explorer graph the overlays apply to) defaults to the export folder's name. An earlier
    bundle at ``out_dir`` is replaced only with ``overwrite``.
    """
    out_dir = Path(out_dir).absolute()
    fmt = ProfileFormat(profile_format)
    if binary is not None:
        result = dataclasses.replace(result, metrics={**result.metrics, "binary": binary.as_dict()})
    durations = dict(
        stage_durations_ms if stage_durations_ms is not None else result.stage_durations_ms
    )
    result = dataclasses.replace(result, stage_durations_ms=durations)
    log_path = log_path if log_path is not None else result.log_path
    run_id = str(uuid.uuid4())
    timestamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")

    identity = {**model_identity(artifact).as_dict(), "target": str(result.target)}
    hardware = dict(hardware or {})
    if toolchain is None:
        toolchain = meta.toolchain_versions(
            result.build.toolchain if result.build is not None else None,
            emulated=result_provenance(result) == Provenance.EMULATED,
            emulator=config.qemu.binary,
        )
    validity = assess(
        result,
        aggregation=config.aggregation,
        requested_counters=requested_counters,
    )
    summary = build_summary(
        result,
        run_id=run_id,
        timestamp=timestamp,
        identity=identity,
        validity=validity,
        aggregation=config.aggregation,
    )
    power_files = power_raw_files(result)
    if summary.get("power") is not None:
        summary["power"]["raw_files"] = [rel for rel, _ in power_files]
    log_entry: dict[str, Any] | None = None
    log_rel: str | None = None
    if log_path is not None and Path(log_path).is_file():
        log_rel = f"{LOG_DIR}/{Path(log_path).name}"
        log_entry = {"file": log_rel, "original_path": str(log_path)}
    metadata = _build_metadata(
        run_id=run_id,
        timestamp=timestamp,
        result=result,
        config=config,
        artifact=artifact,
        identity=identity,
        hardware=hardware,
        toolchain=toolchain,
        durations=durations,
        log_entry=log_entry,
    )
    scrub = Scrubber(secret_values(config))
    summary, metadata = scrub.json(summary), scrub.json(metadata)
    # a document that does not match its own schema is a bug here: fail before writing
    validate_document(SchemaName.SUMMARY, summary, where=SUMMARY_NAME)
    validate_document(SchemaName.RUN_METADATA, metadata, where=METADATA_NAME)

    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = out_dir.with_name(f".{out_dir.name}.tmp-{uuid.uuid4().hex[:8]}")
        staging.mkdir()
    except OSError as exc:
        raise ReportError(
            f"Could not create the result bundle {out_dir}: {describe_os_error(exc)}",
            hint="Pass a folder on a writable file system where you have write permission.",
        ) from exc
    try:
        writer = _Writer(staging)
        writer.add_json(SUMMARY_NAME, summary, FileRole.SUMMARY)
        if fmt == ProfileFormat.CSV:
            writer.add(
                "profile_results.csv", profile_results_csv(summary), "text/csv", FileRole.PROFILE
            )
        else:
            profile_doc = profile_results_json(summary)
            validate_document(SchemaName.PROFILE_RESULTS, json.loads(profile_doc))
            writer.add("profile_results.json", profile_doc, "application/json", FileRole.PROFILE)
        writer.add_json(METADATA_NAME, metadata, FileRole.METADATA)
        if log_rel is not None and log_path is not None:
            writer.add(log_rel, scrub(Path(log_path).read_bytes()), "text/plain", FileRole.LOG)
        for rel, path in power_files:
            add_raw_file(writer, rel, path, scrub)
        for name, text in build_overlays(summary, graph_id or Path(artifact.path).name).items():
            validate_document(SchemaName.OVERLAY, json.loads(text), where=f"{OVERLAY_DIR}/{name}")
            writer.add(f"{OVERLAY_DIR}/{name}", text, "application/json", FileRole.OVERLAY)
        listed = [e.path for e in writer.entries] + [REPORT_NAME, MANIFEST_NAME]
        writer.add(
            REPORT_NAME, render_html(summary, metadata, listed), "text/html", FileRole.REPORT
        )
        seal_bundle(
            staging,
            out_dir,
            writer.entries,
            run_id=run_id,
            created=timestamp,
            tool_version=metadata["tool"]["version"],
            comparability=_comparability(summary, metadata),
            overwrite=overwrite,
        )
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ReportError(
            f"Could not write the result bundle to {out_dir}: {describe_os_error(exc)}"
            + (f" ({exc.filename})" if exc.filename else ""),
            hint="Check free space and permissions of the --report folder; nothing was left "
            "half-written.",
        ) from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = (*(out_dir / e.path for e in writer.entries), out_dir / MANIFEST_NAME)
    log.debug("bundle %s written to %s (%s)", run_id, out_dir, validity.status.value)
    return Bundle(out_dir, run_id, files, validity)
