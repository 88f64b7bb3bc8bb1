"""The one reader of result bundles: typed figures from any bundle version this tool reads.

``compare``, the results history, campaigns, the board farm and the pytest plug-in all read
what a run left behind through ``read_bundle`` (or ``read_summary`` for the figures alone).
The documents are checked first — the manifest's digests (``verify_bundle``), each
document's version (a bundle of a newer aidge-deploy is refused with what to do) and its
schema of that version — then turned into frozen dataclasses: every figure a
``metrics.Metric`` with its unit, provenance and resolution, the times' facts a
``timing.TimingInfo``, the sizes a ``MemoryFacts`` (``report.documents``). Older versions are read into the same
objects (summary version 1 kept ``stage_durations_ms`` and ``timing.clock_hz``), so no
caller knows which version it read.

The documents as written stay available as read-only views (``Summary.document``) for
the code that renders or rewrites a bundle of the current version; nothing else reads them
by key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from aidge_deploy.config import Aggregation
from aidge_deploy.errors import ReportError
from aidge_deploy.metrics import Band, Metric, Provenance
from aidge_deploy.profiling.aggregate import Aggregate
from aidge_deploy.profiling.layer_table import LayerColumn, LayerRow
from aidge_deploy.profiling.validity import Issue, IssueCode, Validity, ValidityStatus
from aidge_deploy.report.documents import (
    LAYER_PREFIX,
    ExportFacts,
    LatencyRecord,
    MemoryFacts,
    PowerFacts,
    ResultBundle,
    RunMetadata,
    Series,
    Summary,
    SummaryIdentity,
    TensorFacts,
    TimingModelFacts,
)
from aidge_deploy.report.manifest import BundleManifest, FileRole, verify_bundle
from aidge_deploy.report.schemas import CURRENT_VERSIONS, SchemaName, check_document
from aidge_deploy.results import LatencyStats
from aidge_deploy.timing import TimingInfo

SUMMARY_NAME = "summary.json"
METADATA_NAME = "run_metadata.json"


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(
            f"{path.parent} is not a result bundle: {path.name} is missing",
            hint="Pass the folder given to --report (it holds summary.json and manifest.json).",
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReportError(
            f"{path}: unreadable ({exc})",
            hint="The bundle was modified or truncated; regenerate it.",
        ) from None


def read_bundle(path: Path, *, verify: bool = True) -> ResultBundle:
    """Read a result bundle (``ReportError`` with the reason when it cannot be).

    ``verify`` checks every file against the manifest first (``verify_bundle``); without
    it, the documents are still version-checked and validated, and a bundle is read even
    when a file was added to it (what the history does with a bundle it records).
    """
    path = Path(path)
    manifest: BundleManifest | None = None
    if verify:
        manifest = verify_bundle(path)
        summary_path = manifest.path_of(FileRole.SUMMARY) or path / SUMMARY_NAME
        metadata_path = manifest.path_of(FileRole.METADATA)
        comparability: Mapping[str, Any] = manifest.comparability
    else:
        from aidge_deploy.report.manifest import MANIFEST_NAME

        summary_path, metadata_path = path / SUMMARY_NAME, path / METADATA_NAME
        doc = _load(path / MANIFEST_NAME)
        comparability = dict(doc.get("comparability") or {}) if isinstance(doc, dict) else {}
    summary = read_summary(summary_path)
    metadata = (
        read_metadata(metadata_path)
        if metadata_path is not None and metadata_path.is_file()
        else None
    )
    return ResultBundle(path, summary, metadata, manifest, MappingProxyType(dict(comparability)))


def read_summary(path: Path) -> Summary:
    """A ``summary.json`` file (or a bundle folder's), checked and typed."""
    path = Path(path)
    if path.is_dir():
        path = path / SUMMARY_NAME
    return parse_summary(_load(path), where=str(path))


def parse_summary(document: Mapping[str, Any], *, where: str = SUMMARY_NAME) -> Summary:
    """A summary document (read from a file, or built in memory), checked and typed."""
    version = check_document(SchemaName.SUMMARY, document, where=where)
    try:
        return _summary(document, version)
    except (KeyError, TypeError, ValueError) as exc:  # a figure the schema cannot judge
        raise ReportError(
            f"{where}: a figure is malformed ({exc})",
            hint="The bundle was edited; regenerate it from a new run.",
        ) from None


def read_metadata(path: Path) -> RunMetadata:
    """A ``run_metadata.json`` file (or a bundle folder's), checked and typed."""
    path = Path(path)
    if path.is_dir():
        path = path / METADATA_NAME
    document = _load(path)
    version = check_document(SchemaName.RUN_METADATA, document, where=str(path))
    return _metadata(document, version)


# ------------------------------------------------------------------------- the summary


def _metric(name: str, raw: Mapping[str, Any]) -> Metric:
    return Metric(
        name,
        raw.get("value"),
        str(raw["unit"]),
        Provenance(raw["provenance"]),
        str(raw.get("description") or ""),
        raw.get("unavailable_reason") or (None if raw.get("value") is not None else "not measured"),
        raw.get("resolution"),
        # optional within version 2: the band a timing model states for its estimate
        Band.from_dict(raw.get("band")) if raw.get("value") is not None else None,
    )


def _series(raw: Any, names: bool = False) -> Series | None:
    if not isinstance(raw, Mapping):
        return None
    values = raw["values"]
    if isinstance(values, Mapping):
        return Series(
            str(raw["unit"]),
            Provenance(raw["provenance"]),
            tuple(None if v is None else float(v) for v in values.values()),
            tuple(str(k) for k in values),
            raw.get("resolution"),
        )
    return Series(
        str(raw["unit"]),
        Provenance(raw["provenance"]),
        tuple(None if v is None else float(v) for v in values),
        resolution=raw.get("resolution"),
    )


def _timing(raw: Any, version: int) -> TimingInfo | None:
    if not isinstance(raw, Mapping):
        return None
    data = dict(raw)
    if version >= 2:  # the clock became a figure; version 1 wrote ``clock_hz``
        clock = data.pop("clock", None)
        data["clock_hz"] = clock.get("value") if isinstance(clock, Mapping) else None
    return TimingInfo.from_dict(data)


def _latency(raw: Any) -> LatencyRecord | None:
    if not isinstance(raw, Mapping):
        return None
    unit = str(raw.get("unit") or "ms")
    stats = LatencyStats(
        int(raw["n"]),
        float(raw["mean"]),
        float(raw["median"]),
        float(raw["p90"]),
        float(raw["min"]),
        float(raw["max"]),
        float(raw["std"]),
        unit,
    )
    return LatencyRecord(
        stats,
        Provenance(raw["provenance"]),
        raw.get("resolution"),
        str(raw.get("label") or ""),
        tuple(float(s) for s in raw.get("samples") or ()),
    )


def _cycles_samples(
    doc: Mapping[str, Any], version: int, metrics: Mapping[str, Metric]
) -> Series | None:
    raw = doc.get("cycles_samples")
    if version >= 2:
        return _series(raw)
    if not raw:
        return None
    # version 1 wrote a bare list: its unit and provenance are the cycle metric's
    headline = metrics.get(str(doc.get("cycles_name") or "cycles"))
    unit = headline.unit if headline is not None else "cycles"
    prov = headline.provenance if headline is not None else Provenance(doc["provenance"])
    return Series(unit, prov, tuple(float(v) for v in raw))


def _stage_durations(doc: Mapping[str, Any], version: int) -> Series | None:
    if version >= 2:
        return _series(doc.get("stage_durations"))
    raw = doc.get("stage_durations_ms")
    if not isinstance(raw, Mapping):
        return None
    # version 1: milliseconds of the pipeline's monotonic clock on the machine that ran it
    return Series(
        "ms", Provenance.HOST, tuple(float(v) for v in raw.values()), tuple(str(k) for k in raw)
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _memory(raw: Mapping[str, Any]) -> MemoryFacts:
    per_memory = raw.get("activation_per_memory")
    return MemoryFacts(
        kind=raw.get("kind"),
        flash_bytes=_int(raw.get("flash_bytes")),
        flash_capacity=_int(raw.get("flash_capacity")),
        image_bytes=_int(raw.get("image_bytes")),
        ram_bytes=_int(raw.get("ram_bytes")),
        ram_capacity=_int(raw.get("ram_capacity")),
        text_bytes=_int(raw.get("text_bytes")),
        data_bytes=_int(raw.get("data_bytes")),
        bss_bytes=_int(raw.get("bss_bytes")),
        activation_bytes=_int(raw.get("activation_bytes")),
        activation_per_memory=None if per_memory is None else tuple(int(v) for v in per_memory),
        unit=str(raw.get("unit") or "B"),
        provenance=Provenance(raw.get("provenance") or Provenance.STATIC.value),
    )


def _validity(raw: Mapping[str, Any]) -> Validity:
    known = {c.value for c in IssueCode}
    issues = tuple(
        Issue(IssueCode(i["code"]), str(i["message"]), i.get("subject"))
        for i in raw.get("issues") or ()
        if i.get("code") in known
    )
    # a code of a newer tool is not known here: the status as written still holds
    return Validity(ValidityStatus(raw["status"]), issues)


def _timing_model(raw: Any) -> TimingModelFacts | None:
    if not isinstance(raw, Mapping):
        return None
    return TimingModelFacts(
        str(raw.get("model") or ""),
        str(raw.get("core") or ""),
        tuple(str(a) for a in raw.get("assumptions") or ()),
        tuple(str(a) for a in raw.get("leaves_out") or ()),
        raw.get("unavailable"),
        Band.from_dict(raw.get("band")),
    )


def _power(raw: Any) -> PowerFacts | None:
    if not isinstance(raw, Mapping):
        return None
    return PowerFacts(
        str(raw["source"]),
        Provenance(raw["provenance"]),
        raw.get("gate"),
        raw.get("unavailable_reason"),
        tuple(str(f) for f in raw.get("raw_files") or ()),
    )


def _layers(doc: Mapping[str, Any]) -> tuple[tuple[LayerColumn, ...], tuple[LayerRow, ...]]:
    columns = tuple(
        LayerColumn(
            str(c["key"]),
            str(c.get("title") or c["key"]),
            str(c["unit"]),
            Provenance(c["provenance"]),
            str(c.get("quantity") or c["key"]),
            c.get("resolution"),
            bool(c.get("derived", False)),
        )
        for c in doc.get("layer_columns") or ()
    )
    layers = tuple(
        LayerRow(
            int(layer["index"]),
            str(layer["name"]),
            MappingProxyType(
                {str(k): _metric(str(k), fig) for k, fig in (layer.get("metrics") or {}).items()}
            ),
        )
        for layer in doc.get("layers") or ()
    )
    return columns, layers


def _summary(doc: Mapping[str, Any], version: int) -> Summary:
    metrics = MappingProxyType(
        {str(name): _metric(str(name), raw) for name, raw in (doc.get("metrics") or {}).items()}
    )
    identity = doc["identity"]
    columns, layers = _layers(doc)
    share = doc.get("layers_share_of_latency")
    run_prov = Provenance(doc["provenance"])
    return Summary(
        schema_version=version,
        run_id=str(doc["run_id"]),
        timestamp=str(doc["timestamp"]),
        target=doc.get("target"),
        backend=doc.get("backend"),
        protocol=doc.get("protocol"),
        provenance=run_prov,
        provenances=tuple(Provenance(p) for p in doc.get("provenances") or (run_prov.value,)),
        timing=_timing(doc.get("timing"), version),
        cycles_name=str(doc.get("cycles_name") or "cycles"),
        timing_model=_timing_model(doc.get("timing_model")),
        aggregation=Aggregation(doc["aggregation"]),
        identity=SummaryIdentity(
            str(identity["model_hash"]),
            str(identity["io_signature"]),
            str(identity["export_hash"]),
            str(identity["target"]),
            identity.get("model_hash_basis"),
        ),
        metrics=metrics,
        aggregates=MappingProxyType(
            {
                str(name): Aggregate.from_dict(raw["aggregate"])
                for name, raw in (doc.get("metrics") or {}).items()
                if isinstance(raw.get("aggregate"), Mapping)
            }
        ),
        counters=tuple(str(c) for c in doc.get("counters") or ()),
        latency=_latency(doc.get("latency")),
        cycles_samples=_cycles_samples(doc, version, metrics),
        layer_columns=columns,
        layers=layers,
        charted_columns=tuple(str(c) for c in doc.get("charted_columns") or ()),
        layers_share_of_latency=None
        if not isinstance(share, Mapping)
        else _metric("layers_share_of_latency", share),
        memory=_memory(doc["memory"]),
        stage_durations=_stage_durations(doc, version),
        notices=tuple(str(n) for n in doc.get("notices") or ()),
        validity=_validity(doc["validity"]),
        power=_power(doc.get("power")),
        document=MappingProxyType(dict(doc)),
    )


# ----------------------------------------------------------------------- the metadata


def _tensors(raw: Sequence[Any]) -> tuple[TensorFacts, ...]:
    return tuple(
        TensorFacts(
            str(t.get("name") or ""),
            str(t.get("dtype") or "unknown"),
            tuple(int(d) for d in t.get("dims") or ()),
        )
        for t in raw or ()
        if isinstance(t, Mapping)
    )


def _metadata(doc: Mapping[str, Any], version: int) -> RunMetadata:
    export = doc["export"]
    manifest = export.get("manifest") or {}
    target = doc["target"]
    log = doc.get("log")
    return RunMetadata(
        schema_version=version,
        run_id=str(doc["run_id"]),
        timestamp=str(doc["timestamp"]),
        tool_version=str(doc["tool"]["version"]),
        packages=MappingProxyType(dict(doc.get("packages") or {})),
        host=MappingProxyType(dict(doc.get("host") or {})),
        target=target.get("name"),
        backend=target.get("backend"),
        hardware=MappingProxyType(dict(target.get("hardware") or {})),
        export=ExportFacts(
            path=export.get("path"),
            export_hash=str(export["export_hash"]),
            model_hash=str(export["model_hash"]),
            application=manifest.get("application"),
            application_config=MappingProxyType(dict(manifest.get("application_config") or {})),
            inputs=_tensors(manifest.get("inputs") or ()),
            outputs=_tensors(manifest.get("outputs") or ()),
            protocol=manifest.get("protocol"),
        ),
        toolchain=MappingProxyType(dict(doc.get("toolchain") or {})),
        config=MappingProxyType(dict(doc.get("config") or {})),
        log_file=log.get("file") if isinstance(log, Mapping) else None,
        document=MappingProxyType(dict(doc)),
    )


#: the summary version ``build_summary`` writes
SUMMARY_VERSION = CURRENT_VERSIONS[SchemaName.SUMMARY]

__all__ = [
    "LAYER_PREFIX",
    "METADATA_NAME",
    "SUMMARY_NAME",
    "SUMMARY_VERSION",
    "ExportFacts",
    "LatencyRecord",
    "MemoryFacts",
    "PowerFacts",
    "ResultBundle",
    "RunMetadata",
    "Series",
    "Summary",
    "SummaryIdentity",
    "TensorFacts",
    "TimingModelFacts",
    "parse_summary",
    "read_bundle",
    "read_metadata",
    "read_summary",
]
