"""The data a deployment produces: build, execution and final results.

Every figure is a ``Metric`` (``aidge_deploy.metrics``, re-exported here) carrying its unit,
its provenance and, for a time, its timer's resolution: a number measured on silicon, on the
host, counted by an emulator, estimated by a model or read from the build is never presented
as another kind.
``DeployResult`` keeps the attribute names of the deploy guide and the shapes the published
Aidge consumers read (see the field docs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aidge_deploy import stats
from aidge_deploy.lifecycle import BuildResult as BuildResult  # re-exported: their home in
from aidge_deploy.lifecycle import BuildStatus as BuildStatus  # the deploy guide's API
from aidge_deploy.lifecycle import DeployContext as DeployContext
from aidge_deploy.lifecycle import ExecutionResult as ExecutionResult
from aidge_deploy.lifecycle import LayerFigure as LayerFigure
from aidge_deploy.lifecycle import Toolchain as Toolchain
from aidge_deploy.metrics import Metric as Metric  # re-exported: the public home of results
from aidge_deploy.metrics import Provenance as Provenance
from aidge_deploy.profiling.binary import sizes_json
from aidge_deploy.profiling.layer_table import layer_table
from aidge_deploy.timing import TimingInfo

if TYPE_CHECKING:
    from aidge_deploy.power.result import PowerResult
    from aidge_deploy.quantisation import OutputQuantisation


class MemoryPeaks(int):
    """Peak memory in bytes: an ``int`` (the guide) that also indexes per memory component.

    The deploy guide documents ``memory_peak_bytes`` as an int; ``aidge_core``'s runtime
    heuristic (``eval_cache``) stores ``memory_peak_bytes[0]``. This value is the sum of the
    per-memory peaks, and ``peaks[i]`` / ``len(peaks)`` / iteration expose each component.
    """

    per_memory: tuple[int, ...]

    def __new__(cls, per_memory: Iterable[int]) -> MemoryPeaks:
        values = tuple(int(v) for v in per_memory)
        obj = super().__new__(cls, sum(values))
        obj.per_memory = values
        return obj

    def __getitem__(self, index: int) -> int:
        return self.per_memory[index]

    def __len__(self) -> int:
        return len(self.per_memory)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.per_memory)

    def __repr__(self) -> str:
        return f"MemoryPeaks({int(self)}, per_memory={list(self.per_memory)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (MemoryPeaks, (self.per_memory,))


class TimingSeries(list[float]):
    """Per-inference latencies in milliseconds (a plain list of floats, as the guide says).

    Note for ``aidge_core`` 0.10.1's runtime heuristic: ``extract_inference_score`` takes
    element ``[1]`` of a non-dict sequence, i.e. the second timed sample (after warm-up).
    """

    unit = "ms"

    def stats(self) -> LatencyStats:
        return LatencyStats.of(self)


@dataclass(frozen=True)
class LatencyStats:
    """Summary statistics of a latency series, in ``unit``."""

    n: int
    mean: float
    median: float
    p90: float
    min: float
    max: float
    std: float
    unit: str = "ms"

    @classmethod
    def of(cls, values: Iterable[float], unit: str = "ms") -> LatencyStats:
        data = [float(v) for v in values]
        if not data:
            raise ValueError("no samples")
        return cls(
            n=len(data),
            mean=stats.mean(data),
            median=stats.median(data),
            p90=stats.percentile(data, 90),
            min=min(data),
            max=max(data),
            std=stats.std(data),
            unit=unit,
        )


@dataclass
class DeployResult:
    """The outcome of ``deploy()``.

    * ``output``: for output/standalone exports, a mutable list of 1-D ``np.ndarray``
      (one per manifest output, in order — the exporter reshapes and reassigns them); for
      benchmark/validation exports, the results dict the exporter's helpers use (``timings``,
      ``cycles``, ``layer_timings``, ``layer_cycles``, ``predictions``, ``accuracy``, ...).
    * ``metrics``: legacy keys (``cycles`` list or None, ``layer_timings``, ``layer_cycles``,
      ``validation_metric``, ``mlperf``) plus ``measurements``: the typed ``Metric`` list.
    * ``memory_peak_bytes``: a ``MemoryPeaks`` (int total, indexable per memory).
    * ``timings``: per-inference latency in ms (``TimingSeries``), or None.
    * ``accuracy``: top-1 accuracy on target when validation ran, else None.
    * ``output_raw``: for a quantised (int8) export, the integer codes the target printed;
      ``output`` then holds their float values, ``(code - zero_point) * scale`` with each
      output's ``output_quantisation`` recorded by the export.
    """

    output: dict[str, Any] | list[np.ndarray] | None
    metrics: dict[str, Any]
    memory_peak_bytes: MemoryPeaks | None
    timings: TimingSeries | None
    accuracy: float | None = None
    protocol: str | None = None
    target: str | None = None
    backend: str | None = None
    log: str = ""
    log_path: Path | None = None
    returncode: int | None = None
    build: BuildResult | None = None
    execution: ExecutionResult | None = None
    layers: tuple[LayerFigure, ...] = ()
    measurements: tuple[Metric, ...] = ()
    stage_durations_ms: dict[str, float] = field(default_factory=dict)
    report_dir: Path | None = None
    #: the board-farm job that produced this result (``api`` backend), and its board
    farm_job_id: int | None = None
    farm_board: str | None = None
    #: the power run (``--power``), when one was requested
    power: PowerResult | None = None
    #: what the run's times are: provenance, timer resolution, source, label
    timing: TimingInfo | None = None
    #: a quantised export's integer outputs as printed, and how they map to floats
    output_raw: list[np.ndarray] | None = None
    output_quantisation: tuple[OutputQuantisation, ...] = ()

    @property
    def latency(self) -> LatencyStats | None:
        return LatencyStats.of(self.timings) if self.timings else None

    @property
    def provenance(self) -> Provenance:
        """What the run's figures are, as its target declared it (the typed reading of the
        compatibility view's ``metrics["provenance"]``)."""
        return Provenance(self.metrics["provenance"])

    def metric(self, name: str) -> Metric | None:
        for m in self.measurements:
            if m.name == name:
                return m
        return None

    def counter_metrics(self) -> tuple[Metric, ...]:
        """The run's figure for each counter it was asked for (``--counters``), per
        inference, in request order; an unavailable one says why."""
        found = {m.name: m for m in self.measurements}
        names = self.metrics.get("counters") or ()
        return tuple(found[name] for name in names if name in found)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe summary (outputs as lists)."""
        output: Any = self.output
        if isinstance(output, list):
            output = [np.asarray(o).tolist() for o in output]
        latency = self.latency
        # the per-layer table as every view prints it: each cell a Metric (time with its
        # resolution and flags, share and time/MAC only where they are true)
        table = {row.name: row.cells for row in layer_table(self).rows}
        return {
            "target": self.target,
            "backend": self.backend,
            "protocol": self.protocol,
            "returncode": self.returncode,
            "timings_ms": list(self.timings) if self.timings is not None else None,
            "latency": None if latency is None else latency.__dict__,
            "accuracy": self.accuracy,
            "memory_peak_bytes": None
            if self.memory_peak_bytes is None
            else {
                "total": int(self.memory_peak_bytes),
                "per_memory": list(self.memory_peak_bytes.per_memory),
            },
            "layers": [
                {
                    "name": layer.name,
                    "time_ms": layer.time_ms,
                    "counters": dict(layer.counters),
                    "macs": layer.macs,
                    "params": layer.params,
                    "energy_uj": layer.energy_uj,
                    "figures": {
                        key: cell.as_flagged_dict()
                        for key, cell in table.get(layer.name, {}).items()
                    },
                }
                for layer in self.layers
            ],
            "measurements": [m.as_flagged_dict() for m in self.measurements],
            # sizes of the built program (static facts of its ELF), as the terminal prints them
            "binary": _json_safe(sizes_json(self.metrics.get("binary"))),
            "timing": None if self.timing is None else self.timing.as_dict(),
            "output": _json_safe(output),
            "output_raw": None
            if self.output_raw is None
            else [np.asarray(o).tolist() for o in self.output_raw],
            "output_quantisation": [q.as_dict() for q in self.output_quantisation],
            "log_path": str(self.log_path) if self.log_path else None,
            "stage_durations_ms": self.stage_durations_ms,
            "farm_job_id": self.farm_job_id,
            "farm_board": self.farm_board,
            "power": None if self.power is None else self.power.as_dict(),
        }


def _json_safe(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return {k: _json_safe(getattr(value, k)) for k in value.__dataclass_fields__}
    return value
