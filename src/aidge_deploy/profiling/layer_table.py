"""The per-layer table every view prints: each cell a ``Metric``, ratios only where true.

The terminal, ``summary.json`` (hence the CSV and the HTML report) show the same per-layer
figures: time per call, its share of the layers' total, the counters, the static MACs and
parameters, and time per MAC; and what part of the latency per inference the layers add up
to (``LayerTable.coverage``: the rest runs between them). Each cell is a
``metrics.Metric``, so it carries its unit, provenance and resolution and prints by the
same rules everywhere (an emulated board's estimated cycles, and the times made of them,
with the band their timing model states). A time that spans less
than one step of its timer is flagged and never turned into a ratio: its share and its
ns/MAC are "unavailable (below the timer's resolution)", not 0 and not a quotient of noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aidge_deploy.display import time_text, time_unit_for
from aidge_deploy.metrics import Band, Metric, Provenance
from aidge_deploy.profiling.timing import ESTIMATED_CYCLES
from aidge_deploy.timing import TimingInfo

#: column keys of the derived and static figures
TIME = "time"
SHARE = "share"
MACS = "macs"
PARAMS = "params"
TIME_PER_MAC = "time_per_mac"
#: per-layer energy of one call (power monitors that attribute energy to layers)
ENERGY = "energy"
#: the layers' total time over the latency per inference
COVERAGE = "layers_share_of_latency"


class _Layer(Protocol):
    """What the table reads of a ``results.LayerFigure``."""

    @property
    def name(self) -> str: ...
    @property
    def time_ms(self) -> float | None: ...
    @property
    def counters(self) -> Mapping[str, float]: ...
    @property
    def macs(self) -> int | None: ...
    @property
    def params(self) -> int | None: ...
    @property
    def energy_uj(self) -> float | None: ...


class _Power(Protocol):
    @property
    def provenance(self) -> Provenance: ...


class Profiled(Protocol):
    """What the table reads of a ``results.DeployResult`` (a protocol, so that the result's
    ``to_json`` can carry the table without an import cycle)."""

    @property
    def layers(self) -> Sequence[_Layer]: ...
    @property
    def metrics(self) -> Mapping[str, Any]: ...
    @property
    def provenance(self) -> Provenance: ...
    @property
    def timing(self) -> TimingInfo | None: ...
    @property
    def power(self) -> _Power | None: ...
    def metric(self, name: str) -> Metric | None: ...


@dataclass(frozen=True)
class LayerColumn:
    """One per-layer figure: key, unit, provenance, resolution and the quantity it measures."""

    key: str
    title: str
    unit: str
    provenance: Provenance
    #: what it measures; two columns with one quantity are the same figure twice
    quantity: str
    resolution: float | None = None
    #: a figure of the build (MACs) or a ratio of other columns, not a measurement
    derived: bool = False


@dataclass(frozen=True)
class LayerRow:
    index: int
    name: str
    #: column key -> the cell (absent: the figure does not apply to this layer)
    cells: Mapping[str, Metric]


@dataclass(frozen=True)
class LayerTable:
    columns: tuple[LayerColumn, ...]
    rows: tuple[LayerRow, ...]
    #: the layers' total time per inference over the latency per inference (median), in %;
    #: None when a layer has no time or the latency is not of the same timer
    coverage: Metric | None = None

    def column(self, key: str) -> LayerColumn | None:
        return next((c for c in self.columns if c.key == key), None)

    def charted(self) -> tuple[LayerColumn, ...]:
        """One column per measured quantity (the first measured one; derived ones last).

        An emulated board's estimated time is its instruction count ÷ the core clock: the
        instruction column is charted, the time column is not charted again.
        """
        out: list[LayerColumn] = []
        seen: set[str] = set()
        measured = [c for c in self.columns if not c.derived]
        for column in sorted(measured, key=lambda c: c.provenance == Provenance.ESTIMATED):
            if column.quantity not in seen:
                seen.add(column.quantity)
                out.append(column)
        return tuple(out)


def _provenance(result: Profiled, key: str, default: Provenance) -> Provenance:
    table = result.metrics.get("counter_provenance") or {}
    raw = table.get(key)
    return Provenance(raw) if raw is not None else default


def _model_band(result: Profiled) -> Band | None:
    """The band the timing model states for this run's estimates (None: no estimate)."""
    model = result.metrics.get("timing_model")
    return Band.from_dict(model.get("band")) if isinstance(model, Mapping) else None


def layer_table(result: Profiled) -> LayerTable:
    """The per-layer table of ``result`` (empty without layers)."""
    layers = result.layers
    if not layers:
        return LayerTable((), ())
    timing = result.timing
    run_prov = result.provenance
    columns: list[LayerColumn] = []
    has_time = any(layer.time_ms is not None for layer in layers)
    time_res: float | None = None
    time_prov = run_prov
    if has_time:
        if timing is None or timing.layer_resolution_ms is None:
            raise ValueError("per-layer times without the resolution of their timer")
        time_res, time_prov = timing.layer_resolution_ms, timing.provenance
        quantity = timing.derived_from and _quantity(result, timing.derived_from)
        columns.append(LayerColumn(TIME, "time/call", "ms", time_prov, quantity or TIME, time_res))
        columns.append(LayerColumn(SHARE, "share", "%", time_prov, SHARE, derived=True))
    units = dict(result.metrics.get("counter_units") or {})
    cycle_name = str(result.metrics.get("cycles_name") or "cycles")
    units[cycle_name] = str(result.metrics.get("cycles_unit") or "cycles")
    for layer in layers:
        for counter in layer.counters:
            if all(c.key != counter for c in columns):
                columns.append(
                    LayerColumn(
                        counter,
                        counter.replace("_", " "),
                        units.get(counter, "count"),
                        _provenance(result, counter, run_prov),
                        _quantity(result, counter),
                    )
                )
    power = result.power
    has_energy = power is not None and any(layer.energy_uj is not None for layer in layers)
    if power is not None and has_energy:
        columns.append(LayerColumn(ENERGY, "energy/call", "uJ", power.provenance, ENERGY))
    if any(layer.macs is not None for layer in layers):
        columns.append(LayerColumn(MACS, "MACs", "MAC", Provenance.STATIC, MACS, derived=True))
    if any(layer.params is not None for layer in layers):
        columns.append(
            LayerColumn(PARAMS, "params", "count", Provenance.STATIC, PARAMS, derived=True)
        )
    if has_time and any(layer.macs for layer in layers):
        columns.append(
            LayerColumn(TIME_PER_MAC, "time/MAC", "ns/MAC", time_prov, TIME_PER_MAC, derived=True)
        )
    total = sum(float(layer.time_ms or 0.0) for layer in layers)
    # an estimate carries its model's band: the estimated cycles and the times made of them
    band = _model_band(result)
    time_band = band if timing is not None and timing.derived_from == ESTIMATED_CYCLES else None
    rows = []
    for index, layer in enumerate(layers):
        cells: dict[str, Metric] = {}
        time: Metric | None = None
        if layer.time_ms is not None and time_res is not None:
            time = Metric(
                TIME,
                float(layer.time_ms),
                "ms",
                time_prov,
                "time per call",
                resolution=time_res,
                band=time_band,
            )
            cells[TIME] = time
            if time.below_resolution:
                reason = f"below the timer's resolution ({time_res:g} ms)"
                cells[SHARE] = Metric.unavailable(SHARE, "%", time_prov, reason)
            elif total > 0:
                cells[SHARE] = Metric(
                    SHARE,
                    100.0 * float(layer.time_ms) / total,
                    "%",
                    time_prov,
                    "share of the layers' total time",
                    resolution=100.0 * time_res / total,
                )
        for counter, value in layer.counters.items():
            column = next(c for c in columns if c.key == counter)
            cells[counter] = Metric(
                counter,
                float(value),
                column.unit,
                column.provenance,
                band=band if counter == ESTIMATED_CYCLES else None,
            )
        if power is not None and layer.energy_uj is not None:
            cells[ENERGY] = Metric(
                ENERGY, float(layer.energy_uj), "uJ", power.provenance, "energy per call"
            )
        if layer.macs is not None:
            cells[MACS] = Metric(MACS, int(layer.macs), "MAC", Provenance.STATIC)
        if layer.params is not None:
            cells[PARAMS] = Metric(PARAMS, int(layer.params), "count", Provenance.STATIC)
        if time is not None and layer.macs and time_res is not None:
            if time.below_resolution:
                cells[TIME_PER_MAC] = Metric.unavailable(
                    TIME_PER_MAC,
                    "ns/MAC",
                    time_prov,
                    f"below the timer's resolution ({time_res:g} ms)",
                )
            else:
                cells[TIME_PER_MAC] = Metric(
                    TIME_PER_MAC,
                    float(layer.time_ms or 0.0) * 1e6 / layer.macs,
                    "ns/MAC",
                    time_prov,
                    "time per multiply-accumulate",
                    resolution=time_res * 1e6 / layer.macs,
                    band=time_band,
                )
        rows.append(LayerRow(index, layer.name, cells))
    return LayerTable(tuple(columns), tuple(rows), _coverage(result, layers, time_prov))


def coverage_text(coverage: Metric | None) -> str | None:
    """What ``LayerTable.coverage`` means, in one sentence (the terminal and the report)."""
    if coverage is None or coverage.value is None:
        return None
    why = (
        "timing each layer takes time of its own"
        if coverage.value > 100.0
        else "the rest runs outside them (the code that calls the layers and times them)"
    )
    return (
        f"The layers add up to {coverage.value:.1f} % of the latency per inference "
        f"({coverage.description}): {why}."
    )


def _coverage(result: Profiled, layers: Sequence[_Layer], time_prov: Provenance) -> Metric | None:
    """The layers' total time over the latency per inference, when both come from the same
    timer (an emulated board: both estimated from instruction counts at one clock)."""
    latency = result.metric("latency")
    if latency is None or not latency.value or latency.unit != "ms":
        return None
    if latency.provenance is not time_prov or any(layer.time_ms is None for layer in layers):
        return None
    total = sum(float(layer.time_ms or 0.0) for layer in layers)
    unit = time_unit_for(float(latency.value))
    return Metric(
        COVERAGE,
        100.0 * total / float(latency.value),
        "%",
        time_prov,
        f"{time_text(total, None, unit, with_unit=False)} of "
        f"{time_text(float(latency.value), None, unit)}",
    )


def _quantity(result: Profiled, counter: str) -> str:
    quantities = result.metrics.get("counter_quantities") or {}
    return str(quantities.get(counter) or counter)


__all__ = [
    "COVERAGE",
    "ENERGY",
    "MACS",
    "PARAMS",
    "SHARE",
    "TIME",
    "TIME_PER_MAC",
    "LayerColumn",
    "LayerRow",
    "LayerTable",
    "Profiled",
    "coverage_text",
    "layer_table",
]
