"""The typed documents of a result bundle, as ``report.reader`` returns them.

Frozen dataclasses only (no reading here): a ``Summary`` whose every figure is a
``metrics.Metric``, the times' facts a ``timing.TimingInfo``, the sizes a ``MemoryFacts``, the
per-layer table the ``profiling.layer_table`` rows every view prints; a ``RunMetadata``; a
``ResultBundle`` holding both with the manifest's comparability facts. Whatever version of a
document was read, it is one of these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.comparability import LAYER_PREFIX, facts_from_bundle
from aidge_deploy.config import Aggregation
from aidge_deploy.metrics import Band, Metric, Provenance
from aidge_deploy.profiling.aggregate import Aggregate
from aidge_deploy.profiling.layer_table import LayerColumn, LayerRow
from aidge_deploy.profiling.validity import Validity
from aidge_deploy.report.manifest import BundleManifest
from aidge_deploy.results import LatencyStats
from aidge_deploy.timing import TimingInfo


@dataclass(frozen=True)
class Series:
    """Values of one kind sharing a unit and a provenance (samples, durations by stage)."""

    unit: str
    provenance: Provenance
    values: tuple[float | None, ...]
    #: the name of each value, for a named series (stage durations); empty for samples
    names: tuple[str, ...] = ()
    resolution: float | None = None

    def as_mapping(self) -> dict[str, float | None]:
        """A named series as ``name -> value``."""
        return dict(zip(self.names, self.values, strict=True))


@dataclass(frozen=True)
class LatencyRecord:
    """The latency samples of a run with their statistics and their timer's facts."""

    stats: LatencyStats
    provenance: Provenance
    resolution: float | None
    label: str
    samples: tuple[float, ...]


@dataclass(frozen=True)
class TimingModelFacts:
    """The timing model behind an emulated board's estimated cycles."""

    model: str
    core: str
    assumptions: tuple[str, ...] = ()
    leaves_out: tuple[str, ...] = ()
    #: why the run has no estimate (None: it has one)
    unavailable: str | None = None
    #: the uncertainty the model states for the run's code and board (None: older bundles)
    band: Band | None = None


@dataclass(frozen=True)
class MemoryFacts:
    """The built program's sizes and planned activation memory (static facts, bytes)."""

    kind: str | None = None  # "firmware" (an MCU's) or "program" (a host or Linux board's)
    flash_bytes: int | None = None
    flash_capacity: int | None = None
    image_bytes: int | None = None
    ram_bytes: int | None = None
    ram_capacity: int | None = None
    text_bytes: int | None = None
    data_bytes: int | None = None
    bss_bytes: int | None = None
    activation_bytes: int | None = None
    activation_per_memory: tuple[int, ...] | None = None
    unit: str = "B"
    provenance: Provenance = Provenance.STATIC

    @property
    def program_bytes(self) -> int | None:
        """What the program stores: a firmware's flash, else a program's image."""
        return self.flash_bytes if self.flash_bytes is not None else self.image_bytes

    @property
    def fits(self) -> bool | None:
        """Whether flash and RAM are within the board's capacities (None: none known)."""
        checks = [
            used <= cap
            for used, cap in (
                (self.flash_bytes, self.flash_capacity),
                (self.ram_bytes, self.ram_capacity),
            )
            if used is not None and cap
        ]
        return all(checks) if checks else None


@dataclass(frozen=True)
class SummaryIdentity:
    """What the run measured: the model's fingerprint, its tensors, the export, the target."""

    model_hash: str
    io_signature: str
    export_hash: str
    target: str
    model_hash_basis: str | None = None


@dataclass(frozen=True)
class PowerFacts:
    """The power run of a bundle (its figures are among the summary's metrics)."""

    source: str
    provenance: Provenance
    gate: str | None = None
    unavailable_reason: str | None = None
    raw_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summary:
    """A ``summary.json``, typed (any version this tool reads)."""

    #: the version the document was written in
    schema_version: int
    run_id: str
    timestamp: str
    target: str | None
    backend: str | None
    protocol: str | None
    provenance: Provenance
    provenances: tuple[Provenance, ...]
    timing: TimingInfo | None
    cycles_name: str
    timing_model: TimingModelFacts | None
    aggregation: Aggregation
    identity: SummaryIdentity
    #: the headline figures by name (latency, cycles, sizes, counters, energy, accuracy)
    metrics: Mapping[str, Metric]
    #: how each reduced headline figure was obtained from its samples, by figure name
    aggregates: Mapping[str, Aggregate]
    #: the counters the run was asked for (keys of ``metrics``), in request order
    counters: tuple[str, ...]
    latency: LatencyRecord | None
    cycles_samples: Series | None
    layer_columns: tuple[LayerColumn, ...]
    layers: tuple[LayerRow, ...]
    charted_columns: tuple[str, ...]
    layers_share_of_latency: Metric | None
    memory: MemoryFacts
    #: wall time of each pipeline stage (ms, host); None when the document has none
    stage_durations: Series | None
    notices: tuple[str, ...]
    validity: Validity
    power: PowerFacts | None
    #: the document as written (read-only): for rendering or rewriting a current bundle
    document: Mapping[str, Any]

    def figures(self) -> dict[str, Metric]:
        """Every figure by key: headline metrics by name, then per-layer ones as
        ``layers/<layer>/<figure>``."""
        out = dict(self.metrics)
        for layer in self.layers:
            for key, fig in layer.cells.items():
                out[f"{LAYER_PREFIX}{layer.name}/{key}"] = fig
        return out

    def metric(self, name: str) -> Metric | None:
        return self.metrics.get(name)

    @property
    def time_model(self) -> str | None:
        """What an emulated board's times are estimated with: its core's timing model, or
        "CPI = 1" (``--timing cpi1``, and every bundle from before the models)."""
        model = self.timing_model
        if model is not None and model.model and not model.unavailable:
            return model.model
        return "CPI = 1" if self.provenance == Provenance.EMULATED else None


@dataclass(frozen=True)
class TensorFacts:
    name: str
    dtype: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class ExportFacts:
    """The export a run deployed, as its run metadata records it."""

    path: str | None
    export_hash: str
    model_hash: str
    application: str | None
    #: the export's application settings (``nb_iterations``, ``kind``, ...)
    application_config: Mapping[str, Any]
    inputs: tuple[TensorFacts, ...]
    outputs: tuple[TensorFacts, ...]
    protocol: str | None = None

    @property
    def kind(self) -> str:
        """The export's application (benchmark, output, validation, ...)."""
        return str(self.application or self.application_config.get("kind") or "benchmark")

    @property
    def iterations(self) -> int | None:
        """Timed inferences of a benchmark export (None for another kind)."""
        value = self.application_config.get("nb_iterations")
        return int(value) if self.kind == "benchmark" and value is not None else None


@dataclass(frozen=True)
class RunMetadata:
    """A ``run_metadata.json``, typed: what produced the result."""

    schema_version: int
    run_id: str
    timestamp: str
    tool_version: str
    packages: Mapping[str, str | None]
    host: Mapping[str, str]
    target: str | None
    backend: str | None
    hardware: Mapping[str, Any]
    export: ExportFacts
    toolchain: Mapping[str, str | None]
    #: the config of the run, secrets scrubbed (a read-only view)
    config: Mapping[str, Any]
    log_file: str | None
    #: the document as written (read-only): for rendering or rewriting a current bundle
    document: Mapping[str, Any]


@dataclass(frozen=True)
class ResultBundle:
    """A result bundle: where, its manifest, its summary and its run metadata."""

    path: Path
    summary: Summary
    metadata: RunMetadata | None
    #: the verified manifest (None when the bundle was read without verifying it)
    manifest: BundleManifest | None
    #: the manifest's comparability facts (model, target, versions, ...), read-only
    comparability: Mapping[str, Any]

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    def figures(self) -> dict[str, Metric]:
        return self.summary.figures()

    def table_facts(self) -> dict[str, Any]:
        """The bundle's facts for the comparability table (``aidge_deploy.comparability``)."""
        export = self.metadata.export if self.metadata is not None else None
        return facts_from_bundle(
            self.comparability,
            target=self.summary.target,
            provenance=self.summary.provenance.value,
            kind=export.kind if export is not None else "benchmark",
            input_dtype=export.inputs[0].dtype if export is not None and export.inputs else None,
            iterations=export.iterations if export is not None else None,
        )
