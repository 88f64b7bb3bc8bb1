"""Splitting a counter selection into passes, and merging the passes back into one table.

A PMU counts only a few events at once, so a larger selection is measured in several
*passes*; each pass is a complete run of the program (with its own warm-up), and the
per-layer results of every pass are merged by layer index into one table that has every
counter for every layer. Counters that occupy no hardware slot (software events, the
emulator's counters, the dedicated cycle counter) ride along in the first pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from aidge_deploy.config import Aggregation
from aidge_deploy.errors import CaptureError, ConfigError
from aidge_deploy.lifecycle import LayerFigure
from aidge_deploy.metrics import Metric, Provenance, is_time_unit
from aidge_deploy.profiling.aggregate import (
    TRIMMED_MIN_SAMPLES,
    aggregate_rows,
    aggregate_samples,
    sample_problem,
)
from aidge_deploy.profiling.counters import Counter, CounterDomain, CounterSelection, load_catalogue


@dataclass(frozen=True)
class CounterPass:
    """The counters measured together in one complete run of the program."""

    index: int
    name: str
    counters: tuple[Counter, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.counters)

    @property
    def slots(self) -> int:
        return sum(c.slots for c in self.counters)


def plan_passes(
    selection: CounterSelection, max_per_pass: int, *, every_counter_takes_a_slot: bool = False
) -> tuple[CounterPass, ...]:
    """Group the countable counters by catalogue group, then cut each group in batches.

    Passes are named ``<group>_<i>``; a group is never mixed with another in a pass, so
    related events (a cache's accesses and its refills) are counted in the same run.
    Zero-slot counters join the first pass (or form a pass of their own when nothing
    needs a slot) — unless ``every_counter_takes_a_slot`` (a user-imposed pass plan, e.g.
    to reproduce a small PMU's passes), where each counter takes one. Unavailable counters
    are not planned: they stay reported as such.
    """
    if max_per_pass < 1:
        raise ConfigError(
            f"max_counters_per_pass must be at least 1, got {max_per_pass}",
            hint="Fix the target's max_counters_per_pass.",
        )
    available = selection.available
    if every_counter_takes_a_slot:
        available = tuple(replace(c, slots=max(c.slots, 1)) for c in available)
    free = [c for c in available if c.slots == 0]
    by_group: dict[str, list[Counter]] = {}
    for counter in available:
        if counter.slots > 0:
            by_group.setdefault(counter.group, []).append(counter)
    batches: list[tuple[str, list[Counter]]] = []
    for group, members in by_group.items():
        batch: list[Counter] = []
        used = 0
        index = 0
        for counter in members:
            if counter.slots > max_per_pass:
                raise ConfigError(
                    f"Counter {counter.name} needs {counter.slots} slots, a pass has {max_per_pass}",
                    hint="Drop it from the selection.",
                )
            if used + counter.slots > max_per_pass:
                batches.append((f"{group}_{index}", batch))
                batch, used, index = [], 0, index + 1
            batch.append(counter)
            used += counter.slots
        batches.append((f"{group}_{index}", batch))
    if not batches:
        if not free:
            return ()
        group = free[0].group if len({c.group for c in free}) == 1 else free[0].kind.value
        return (CounterPass(0, f"{group}_0", tuple(free)),)
    first_name, first = batches[0]
    batches[0] = (first_name, [*free, *first])
    return tuple(CounterPass(i, name, tuple(cs)) for i, (name, cs) in enumerate(batches))


@dataclass(frozen=True)
class LayerCounters:
    """One layer's value of each counter of a pass (already reduced over iterations)."""

    index: int
    name: str
    values: Mapping[str, float]


@dataclass(frozen=True)
class PassResult:
    """What one pass produced: per-layer values if the target attributes them, else totals.

    Values are already reduced to one figure per counter (median over iterations, or a
    whole-run count divided by the executed inferences — ``basis`` says which).
    """

    counter_pass: CounterPass
    layers: tuple[LayerCounters, ...] = ()
    #: whole-run figure per counter (per inference when ``basis`` says so)
    totals: Mapping[str, float] = field(default_factory=dict)
    #: counter -> why the target could not count it in this pass
    unavailable: Mapping[str, str] = field(default_factory=dict)
    #: counter -> fraction of the enabled time it was really counting (1.0 = no multiplexing)
    running_ratio: Mapping[str, float] = field(default_factory=dict)
    basis: str = ""


def pass_result_from_samples(
    counter_pass: CounterPass,
    layers: Sequence[tuple[str, Sequence[Mapping[str, float]]]],
    method: Aggregation | str = Aggregation.MEDIAN,
    *,
    counter_bits: int | None,
) -> PassResult:
    """Reduce per-iteration, per-layer counter rows of one pass (``profiling.aggregate``).

    ``layers`` is ``[(layer name, [row per iteration: counter -> value]), ...]`` in layer
    order. Wrapped and frozen samples are rejected first; a counter left with no valid
    sample in some layer is reported unavailable (with that layer and the rejection),
    since a table with a hole in it would not be every counter for every layer.

    The per-inference total of a counter is the same reduction applied to the per-iteration
    sums over the layers (iterations where every layer has a valid sample) — never a sum of
    per-layer medians, which is no inference's count.
    """
    method = Aggregation(method)
    wanted = counter_pass.names
    reduced: list[LayerCounters] = []
    unavailable: dict[str, str] = {}
    rejected = 0
    iterations = 0
    used: set[str] = set()  # the reductions really applied (a short trimmed mean is a median)
    for index, (name, rows) in enumerate(layers):
        aggregates = aggregate_rows(rows, method, counter_bits=counter_bits)
        iterations = max(iterations, len(rows))
        values: dict[str, float] = {}
        for counter in wanted:
            agg = aggregates.get(counter)
            if agg is None:
                unavailable.setdefault(counter, f"layer {index} ({name}) reported no sample")
            elif agg.value is None:
                unavailable.setdefault(
                    counter, f"layer {index} ({name}): no valid sample ({agg.describe()})"
                )
            else:
                values[counter] = agg.value
                rejected += agg.n_rejected
                used.add(agg.method_used.value)
        reduced.append(LayerCounters(index, name, MappingProxyType(values)))
    counted = [c for c in wanted if c not in unavailable]
    final = tuple(
        LayerCounters(lc.index, lc.name, MappingProxyType({c: lc.values[c] for c in counted}))
        for lc in reduced
    )
    totals: dict[str, float] = {}
    for counter in counted:
        sums = _iteration_sums(layers, counter, counter_bits) if layers else []
        agg = aggregate_samples(sums, method) if sums else None
        if agg is None or agg.value is None:
            unavailable[counter] = "no iteration has a valid sample in every layer"
        else:
            totals[counter] = agg.value
            used.add(agg.method_used.value)
    applied = " and ".join(sorted(used)) or method.value
    if applied != method.value:
        applied += f" ({method.value} asked; it needs at least {TRIMMED_MIN_SAMPLES} samples)"
    basis = (
        f"{applied} over {iterations} iterations per layer; per inference: the {applied} of "
        "the per-iteration sums over the layers"
    )
    if rejected:
        basis += f" ({rejected} wrapped or frozen samples rejected)"
    return PassResult(
        counter_pass=counter_pass,
        layers=tuple(
            LayerCounters(lc.index, lc.name, MappingProxyType({c: lc.values[c] for c in totals}))
            for lc in final
        ),
        totals=totals,
        unavailable=unavailable,
        basis=basis,
    )


def _frozen(row: Mapping[str, float]) -> bool:
    return bool(row) and all(float(v) == 0.0 for v in row.values())


def _iteration_sums(
    layers: Sequence[tuple[str, Sequence[Mapping[str, float]]]],
    counter: str,
    counter_bits: int | None,
) -> list[float]:
    """Per iteration, the sum of ``counter`` over every layer; an iteration where some layer's
    sample would be rejected (``aggregate_rows``' rules) or is missing is left out."""
    n = min(len(rows) for _, rows in layers)
    all_frozen = [all(_frozen(row) for row in rows) for _, rows in layers]
    sums: list[float] = []
    for i in range(n):
        total = 0.0
        for (_, rows), layer_all_frozen in zip(layers, all_frozen, strict=True):
            row = rows[i]
            value = row.get(counter)
            if (
                value is None
                or (_frozen(row) and not layer_all_frozen)
                or sample_problem(float(value), counter_bits) is not None
            ):
                break
            total += float(value)
        else:
            sums.append(total)
    return sums


@dataclass(frozen=True)
class PassSummary:
    """How one pass went, kept in the profile for the report."""

    name: str
    counters: tuple[str, ...]
    running_ratio: Mapping[str, float]
    basis: str


@dataclass(frozen=True)
class CounterProfile:
    """Every selected counter, merged over all passes: per layer, per run, or unavailable."""

    domain: CounterDomain
    provenance: Provenance
    #: requested counter names in request order (measured and unavailable alike)
    requested: tuple[str, ...]
    units: Mapping[str, str]
    descriptions: Mapping[str, str]
    layers: tuple[LayerCounters, ...]
    totals: Mapping[str, float]
    unavailable: Mapping[str, str]
    passes: tuple[PassSummary, ...]
    #: counter -> the quantity it measures (``Counter.quantity``, else its own name)
    quantities: Mapping[str, str] = field(default_factory=dict)

    @property
    def counter_bits(self) -> Mapping[str, int | None]:
        """Width of each requested counter (the wrap rule applies in that width)."""
        bits = load_catalogue().counter_bits.get(self.domain)
        return dict.fromkeys(self.requested, bits)

    @property
    def measured(self) -> tuple[str, ...]:
        return tuple(n for n in self.requested if n in self.totals)

    def pass_of(self, counter: str) -> PassSummary | None:
        for summary in self.passes:
            if counter in summary.counters:
                return summary
        return None

    def measurements(self) -> tuple[Metric, ...]:
        """One ``Metric`` per requested counter; unavailable ones carry value None + reason."""
        out: list[Metric] = []
        for name in self.requested:
            summary = self.pass_of(name)
            if name in self.totals and summary is not None:
                detail = f"{self.descriptions[name]}; {summary.basis}; pass {summary.name}"
                ratio = summary.running_ratio.get(name, 1.0)
                if ratio < 0.999:
                    detail += f"; multiplexed: counted {ratio:.0%} of the time, scaled up"
                unit = self.units[name]
                out.append(
                    Metric(
                        name,
                        self.totals[name],
                        unit,
                        self.provenance,
                        detail,
                        # perf_event time counters (task-clock, cpu-clock) count nanoseconds
                        resolution=1.0 if is_time_unit(unit) else None,
                    )
                )
            else:
                out.append(
                    Metric(
                        name,
                        None,
                        self.units[name],
                        self.provenance,
                        self.descriptions[name],
                        unavailable_reason=self.unavailable.get(name, "not measured"),
                    )
                )
        return tuple(out)


def _check_layers(reference: tuple[LayerCounters, ...], other: PassResult, first: str) -> None:
    names = [(layer.index, layer.name) for layer in reference]
    seen = [(layer.index, layer.name) for layer in other.layers]
    if names == seen:
        return
    ref = dict(names)
    for index, name in seen:
        if index in ref and ref[index] != name:
            raise CaptureError(
                f"Pass {other.counter_pass.name} reports layer {index} as {name!r}, "
                f"pass {first} as {ref[index]!r}",
                hint="Every pass must run the same program; rebuild and run again.",
            )
    missing = sorted(set(ref) ^ {i for i, _ in seen})
    raise CaptureError(
        f"Pass {other.counter_pass.name} and pass {first} report different layers "
        f"(indexes {missing} appear in only one of them)",
        hint="A pass ended early or printed an incomplete profile; see the run logs.",
    )


def merge_passes(selection: CounterSelection, results: Sequence[PassResult]) -> CounterProfile:
    """Merge per-pass results by layer index into one table with every counter per layer.

    Layer names must agree between passes, and every layer must carry every counter its
    pass measured (``CaptureError`` otherwise): a partial table is never returned. A
    counter a pass could not count joins ``unavailable`` with the pass's reason.
    """
    catalogue = load_catalogue()
    provenance = catalogue.provenance[selection.domain]  # every domain declares one
    unavailable: dict[str, str] = dict(selection.unavailable)
    totals: dict[str, float] = {}
    per_layer: dict[int, dict[str, float]] = {}
    reference: tuple[LayerCounters, ...] = ()
    reference_name = ""
    summaries: list[PassSummary] = []
    for result in results:
        planned = result.counter_pass.names
        if result.layers:
            if not reference:
                reference, reference_name = result.layers, result.counter_pass.name
            else:
                _check_layers(reference, result, reference_name)
        for name, reason in result.unavailable.items():
            unavailable.setdefault(name, reason)
        counted = tuple(n for n in planned if n not in result.unavailable)
        for layer in result.layers:
            missing = [n for n in counted if n not in layer.values]
            if missing:
                raise CaptureError(
                    f"Pass {result.counter_pass.name}: layer {layer.index} ({layer.name}) has no "
                    f"value for {', '.join(missing)}",
                    hint="The program printed an incomplete per-layer profile; see the run log.",
                )
            row = per_layer.setdefault(layer.index, {})
            row.update({n: float(layer.values[n]) for n in counted})
        for name in counted:
            if name in result.totals:
                totals[name] = float(result.totals[name])
            elif result.layers:
                # a sum of per-layer reductions is no inference's count: not published
                unavailable.setdefault(
                    name,
                    f"pass {result.counter_pass.name} reported per-layer values only, "
                    "no per-inference total",
                )
            else:
                unavailable.setdefault(name, f"pass {result.counter_pass.name} reported no value")
        summaries.append(
            PassSummary(
                name=result.counter_pass.name,
                counters=counted,
                running_ratio=MappingProxyType(dict(result.running_ratio)),
                basis=result.basis,
            )
        )
    if reference:
        for summary, result in zip(summaries, results, strict=True):
            if summary.counters and not result.layers:
                raise CaptureError(
                    f"Pass {summary.name} reported no per-layer values, pass {reference_name} did",
                    hint="A pass ended before its profile was printed; see the run logs.",
                )
    layers = tuple(
        LayerCounters(layer.index, layer.name, MappingProxyType(per_layer.get(layer.index, {})))
        for layer in reference
    )
    requested = selection.names
    for name in requested:
        if name not in totals:
            unavailable.setdefault(name, "not measured: no pass counted it")
    return CounterProfile(
        domain=selection.domain,
        provenance=provenance,
        requested=requested,
        units=MappingProxyType({c.name: c.unit for c in selection.requested}),
        descriptions=MappingProxyType({c.name: c.description for c in selection.requested}),
        quantities=MappingProxyType({c.name: c.quantity or c.name for c in selection.requested}),
        layers=layers,
        totals=MappingProxyType(totals),
        unavailable=MappingProxyType({k: v for k, v in unavailable.items() if k not in totals}),
        passes=tuple(summaries),
    )


def fold_counter_profile(
    profile: CounterProfile, layers: tuple[LayerFigure, ...], measurements: tuple[Metric, ...]
) -> tuple[tuple[LayerFigure, ...], tuple[Metric, ...]]:
    """Assemble's view: per-layer counters joined to the layer rows by name, plus one
    ``Metric`` per requested counter (unavailable ones with value None and the reason)."""
    by_name = {layer.name: layer for layer in profile.layers}
    folded = []
    for figure in layers:
        extra = by_name.pop(figure.name, None)
        if extra is None:
            folded.append(figure)
        else:
            folded.append(replace(figure, counters={**figure.counters, **extra.values}))
    folded.extend(LayerFigure(name=lc.name, counters=dict(lc.values)) for lc in by_name.values())
    return tuple(folded), (*measurements, *profile.measurements())


__all__ = [
    "CounterPass",
    "CounterProfile",
    "LayerCounters",
    "PassResult",
    "PassSummary",
    "fold_counter_profile",
    "merge_passes",
    "pass_result_from_samples",
    "plan_passes",
]
