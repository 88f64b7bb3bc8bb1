"""``power analyse --into BUNDLE``: a capture's figures added to the board run they belong to.

The bundle must be whole (its manifest verifies) and a run on silicon: a capture of a
board's power firmware says nothing about an emulated board or the host. Its profile run
gives the clean latency that chooses the window. The capture file goes into the bundle
(``logs/power/``) beside the figures computed from it, the summary gains the ``power``
block, the power metrics and their validity issues, the report is rendered again, and the
manifest is rewritten with every checksum: the bundle stays one that ``verify_bundle``
accepts. Like ``write_bundle``, the new bundle is built beside the old one and renamed
into place, so an interruption leaves the old one as it was.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.errors import ConfigError, ReportError
from aidge_deploy.power.analyse import CleanLatency
from aidge_deploy.power.protocol import WindowRule
from aidge_deploy.power.result import PowerResult
from aidge_deploy.profiling.validity import Issue, IssueCode, Validity
from aidge_deploy.report.bundle import POWER_DIR, REPORT_NAME, seal_bundle
from aidge_deploy.report.html import render_html
from aidge_deploy.report.manifest import (
    MANIFEST_NAME,
    BundleManifest,
    FileRole,
    ManifestEntry,
    sha256_bytes,
)
from aidge_deploy.report.reader import (
    SUMMARY_NAME,
    SUMMARY_VERSION,
    ResultBundle,
    Summary,
    read_bundle,
)
from aidge_deploy.report.schemas import SchemaName, validate_document
from aidge_deploy.report.summary import metric_entry, provenances_of
from aidge_deploy.results import Provenance


@dataclass(frozen=True)
class BoardRun:
    """A verified bundle of a board run, ready to receive power figures."""

    bundle: ResultBundle

    @property
    def manifest(self) -> BundleManifest:
        if self.bundle.manifest is None:  # pragma: no cover - opened verified
            raise ReportError(f"{self.bundle.path}: the bundle was not verified")
        return self.bundle.manifest

    @property
    def latency(self) -> CleanLatency | None:
        latency = self.bundle.summary.latency
        if latency is None:
            return None
        return CleanLatency(
            seconds=latency.stats.median / 1e3,
            provenance=latency.provenance,
            resolution_s=None if latency.resolution is None else latency.resolution / 1e3,
            source=f"median of the board run's {latency.stats.n} samples",
        )

    @property
    def window_rule(self) -> WindowRule:
        """How the board's windows relate to N x clean latency (its target's rule)."""
        from aidge_deploy.errors import DeployError
        from aidge_deploy.targetcaps import pair_caps

        summary = self.bundle.summary
        try:
            return pair_caps(str(summary.target), str(summary.backend)).power_window
        except DeployError:  # a target this installation does not know: the strict rule
            return WindowRule.MATCH


def open_board_run(bundle: Path) -> BoardRun:
    """The bundle, if power figures of a capture can be added to it (else ``ConfigError``)."""
    read = read_bundle(bundle)
    summary = read.summary
    if summary.provenance != Provenance.SILICON:
        raise ConfigError(
            f"{bundle} is a run on {summary.target} with {summary.provenance.value} figures: "
            "a capture is silicon only when it records this board's run",
            hint="Add a capture to the bundle of the physical board's run it recorded "
            "(aidge-deploy run ... --report DIR on that board).",
        )
    if summary.power is not None:
        raise ConfigError(
            f"{bundle} already holds power figures (source {summary.power.source})",
            hint="Add a capture to a board run without power figures, or run again.",
        )
    if summary.schema_version != SUMMARY_VERSION or read.metadata is None:
        raise ConfigError(
            f"{bundle} was written by an earlier aidge-deploy (summary version "
            f"{summary.schema_version}; power figures go into a version {SUMMARY_VERSION} "
            "bundle)",
            hint="Run the board again with this aidge-deploy (--report DIR) and add the "
            "capture to that bundle.",
        )
    return BoardRun(read)


def _validity(summary: Summary, power: PowerResult) -> dict[str, Any]:
    issues = list(summary.validity.issues)
    issues += [Issue(IssueCode(i.as_dict()["code"]), i.message) for i in power.issues]
    return Validity.of(issues).as_dict()


def _copy_raw(source: Path, target: Path, rel: str) -> ManifestEntry:
    digest = hashlib.sha256()
    size = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as src, target.open("wb") as dst:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    return ManifestEntry(rel, size, digest.hexdigest(), "application/octet-stream", FileRole.RAW)


def add_power_to_bundle(run: BoardRun, power: PowerResult) -> list[str]:
    """Write ``power`` into the bundle ``run`` came from; the paths added or rewritten."""
    root = run.manifest.root
    summary = dict(run.bundle.summary.document)
    block = power.as_dict()
    raw = [(f"{POWER_DIR}/{Path(p).name}", Path(p)) for p in power.raw_files]
    block["raw_files"] = [rel for rel, _ in raw]
    summary["power"] = block
    summary["metrics"] = {
        **summary["metrics"],
        **{m.name: metric_entry(m) for m in power.metrics()},
    }
    summary["validity"] = _validity(run.bundle.summary, power)
    summary["provenances"] = provenances_of(summary)
    validate_document(SchemaName.SUMMARY, summary, where=SUMMARY_NAME)
    staging = root.with_name(f".{root.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        shutil.copytree(root, staging)
        (staging / MANIFEST_NAME).unlink()
        written: dict[str, tuple[bytes, str, FileRole]] = {
            SUMMARY_NAME: (
                (json.dumps(summary, indent=2) + "\n").encode(),
                "application/json",
                FileRole.SUMMARY,
            )
        }
        entries = [e for e in run.manifest.entries if e.path not in written]
        entries = [e for e in entries if e.path != REPORT_NAME]
        for rel, path in raw:  # a capture can be large: copied and hashed in chunks
            entries = [e for e in entries if e.path != rel]
            entries.append(_copy_raw(path, staging / rel, rel))
        listed = [e.path for e in entries] + list(written) + [REPORT_NAME, MANIFEST_NAME]
        metadata = run.bundle.metadata.document if run.bundle.metadata is not None else {}
        html = render_html(summary, metadata, listed).encode()
        written[REPORT_NAME] = (html, "text/html", FileRole.REPORT)
        for rel, (data, media, role) in written.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            entries.append(ManifestEntry(rel, len(data), sha256_bytes(data), media, role))
        seal_bundle(
            staging,
            root,
            entries,
            run_id=run.manifest.run_id,
            created=run.manifest.created,
            tool_version=run.manifest.tool_version,
            comparability={**run.manifest.comparability, "power_source": power.source},
            overwrite=True,
        )
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ReportError(
            f"Could not update the bundle {root}: {exc}",
            hint="Check free space and permissions; the bundle was left as it was.",
        ) from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(written)


__all__ = ["BoardRun", "add_power_to_bundle", "open_board_run"]
