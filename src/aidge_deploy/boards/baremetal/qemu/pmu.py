"""Per-layer emulated counters on QEMU boards, from the aidge_pmu TCG plugin.

Each pass re-runs the firmware in QEMU with the plugin snapshotting its counters at two
boundaries: the entry of ``model_forward`` (delimits inferences) and the entry of the BSP's
cycle-counter read ``aidge_qemu_cycles`` (the profiling build reads it right before and
right after every layer). The i-th pair of reads inside a forward brackets layer i, so the
difference of the two snapshots is that layer's count (plus the few instructions of the
read itself — the same instrumentation overhead the firmware's own cycle figures carry).
Warm-up forwards are dropped, the rest reduced per layer by the configured aggregation, and
the per-inference total is the same reduction of the per-forward sums over the layers.
Under a fixed ``-icount`` shift everything is deterministic: two runs give equal counts.

A pass is the QEMU board target's own boot, flash and capture with the plugin loaded
(``QemuBoardTarget.run_again``, for the counter source ``qemu.counters``); this module holds
only what is the plugin's: where it snapshots, and how its trace becomes counts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from aidge_deploy import stats
from aidge_deploy.config import Aggregation
from aidge_deploy.elf import ElfReadError, read_elf
from aidge_deploy.errors import CaptureError, ConfigError, DeployError
from aidge_deploy.filememo import FileMemo, Reads
from aidge_deploy.profiling.aggregate import aggregate_samples
from aidge_deploy.profiling.counters import CounterDomain, load_catalogue
from aidge_deploy.profiling.passes import CounterPass, PassResult, pass_result_from_samples
from aidge_deploy.profiling.qemu_plugin import CATALOGUE_NAMES, PluginTrace, plugin_path
from aidge_deploy.profiling.timing import EstimatedCycles, TimingModel

FORWARD_SYMBOL = re.compile(r"^(model_forward|_Z\d+model_forward\w*)$")
CYCLES_SYMBOL = "aidge_qemu_cycles"
#: the read around each timed inference of the boards' benchmark entry (aidge_qemu_boards.entry)
SAMPLE_SYMBOL = "aidge_qemu_sample_cycles"
#: boundary indices of ``PmuSymbols.boundaries``
FORWARD, LAYER_READ, SAMPLE_READ = range(3)


@dataclass(frozen=True)
class PmuSymbols:
    """Where the plugin snapshots its counters: ``model_forward``, the BSP's cycle read
    around each layer, and its read around each timed inference."""

    forward: int
    #: the cycle read; None when the firmware was built without per-layer profiling
    cycles: int | None
    #: the per-inference read; None before the boards had their own benchmark entry
    sample: int | None = None

    @property
    def boundaries(self) -> list[int]:
        """Forward, layer read, sample read (absent ones left out, the others keep their
        index only when the ones before exist: see ``trace_reads``)."""
        out = [self.forward]
        if self.cycles is not None:
            out.append(self.cycles)
            if self.sample is not None:
                out.append(self.sample)
        return out

    @classmethod
    def of(cls, firmware: Path) -> PmuSymbols:
        """The boundaries of ``firmware`` (Thumb bits cleared); ``ConfigError`` without a forward.

        Kept for the process while the firmware file is unchanged (``filememo``): a warm
        deploy of the same build does not scan its symbol table again.
        """
        return _SYMBOLS.answer(str(firmware), lambda reads: cls._read(firmware, reads))

    @classmethod
    def _read(cls, firmware: Path, reads: Reads) -> PmuSymbols:
        reads.sign(firmware)
        try:
            elf = read_elf(firmware, symbols=True)
        except ElfReadError as exc:
            raise ConfigError(
                f"cannot read the symbols of {firmware.name}: {exc.reason}",
                hint="Emulated counters need the firmware ELF the build produced.",
            ) from exc
        forward = next((f.address for f in elf.functions() if FORWARD_SYMBOL.match(f.name)), None)
        cycles = next((f.address for f in elf.functions() if f.name == CYCLES_SYMBOL), None)
        sample = next((f.address for f in elf.functions() if f.name == SAMPLE_SYMBOL), None)
        if forward is None:
            raise ConfigError(
                f"{firmware.name} has no model_forward symbol",
                hint="Emulated counters need an Aidge export's firmware.",
            )
        return cls(forward, cycles, sample)


#: boundaries by firmware path, kept while the file is unchanged
_SYMBOLS: FileMemo[str, PmuSymbols] = FileMemo()


def emulated_counter_availability() -> dict[str, str | None]:
    """Every emulated counter, countable unless the plugin cannot be built here."""
    names = [c.name for c in load_catalogue().in_domain(CounterDomain.EMULATED)]
    try:
        plugin_path()
    except DeployError as exc:
        return dict.fromkeys(names, f"the QEMU plugin cannot be built: {exc.message}")
    return dict.fromkeys(names)


def per_forward_layer_rows(
    trace: PluginTrace, n_layers: int, skip_forwards: int, wanted: Mapping[str, str]
) -> list[list[dict[str, float]]]:
    """``rows[layer][forward] = {counter: count}`` from the snapshots of one run.

    ``wanted`` maps plugin counter names to catalogue names. A forward whose reads do not
    pair up with the layers is an inconsistency between the firmware and the parsed
    output, reported as ``CaptureError``.
    """
    forwards: list[list[Mapping[str, int]]] = []
    for snap in trace.snapshots:
        if snap.boundary == FORWARD:
            forwards.append([])
        elif snap.boundary == LAYER_READ and forwards:
            forwards[-1].append(snap.counts)
    rows: list[list[dict[str, float]]] = [[] for _ in range(n_layers)]
    for number, reads in enumerate(forwards[skip_forwards:], start=skip_forwards):
        if len(reads) < 2 * n_layers:
            raise CaptureError(
                f"Forward {number} read the cycle counter {len(reads)} times for {n_layers} layers",
                hint="The firmware was not built with per-layer profiling, or its layers differ "
                "from the ones it printed.",
            )
        for layer in range(n_layers):
            start, end = reads[2 * layer], reads[2 * layer + 1]
            rows[layer].append(
                {cat: float(end[plug] - start[plug]) for plug, cat in wanted.items()}
            )
    return rows


def pass_result_from_trace(
    counter_pass: CounterPass,
    trace: PluginTrace,
    symbols: PmuSymbols,
    *,
    layer_names: Sequence[str],
    warmup: int,
    aggregation: Aggregation,
    icount_shift: int | None,
) -> PassResult:
    """The pass's counts: per layer when the firmware read its cycle counter around each
    layer, else per whole inference; warm-up forwards dropped, the rest reduced by the run's
    aggregation, and the per-inference total is the same reduction of the per-forward sums
    over the layers (never a sum of per-layer medians)."""
    wanted = {plug: cat for plug, cat in CATALOGUE_NAMES.items() if cat in counter_pass.names}
    emulator = (
        f"QEMU plugin, icount shift {icount_shift}, {warmup} warm-up inference(s) dropped; "
        "emulated, not cycle-accurate"
    )
    if symbols.cycles is not None and layer_names:
        rows = per_forward_layer_rows(trace, len(layer_names), warmup, wanted)
        result_pass = pass_result_from_samples(
            counter_pass,
            list(zip(layer_names, rows, strict=True)),
            aggregation,
            counter_bits=None,  # the plugin's counters are 64-bit: no wrap rule
        )
        return replace(result_pass, basis=f"{result_pass.basis}; {emulator}")
    # no per-layer profiling in this build: whole forwards only
    starts = [s for s in trace.snapshots if s.boundary == FORWARD][warmup:]
    per_forward = [b.minus(a) for a, b in itertools.pairwise(starts)]
    if not per_forward:
        return PassResult(
            counter_pass,
            unavailable=dict.fromkeys(counter_pass.names, "fewer than two timed inferences ran"),
        )
    totals: dict[str, float] = {}
    unavailable: dict[str, str] = {}
    described = ""
    for plug, cat in wanted.items():
        agg = aggregate_samples([float(d[plug]) for d in per_forward], aggregation)
        described = agg.describe()
        if agg.value is None:
            unavailable[cat] = f"no valid sample ({described})"
        else:
            totals[cat] = agg.value
    return PassResult(
        counter_pass=counter_pass,
        totals=totals,
        unavailable=unavailable,
        basis="per inference, forward entry to next forward entry (loop overhead included), "
        f"{described}; {emulator}",
    )


def estimated_cycles_of(
    trace: PluginTrace,
    symbols: PmuSymbols,
    model: TimingModel,
    *,
    layer_names: Sequence[str],
    warmup: int,
    iterations: int,
) -> EstimatedCycles:
    """The timing model's cycles of one run: each timed inference between the two reads
    that bracket it (what the firmware's own cycles bracket), and each layer per call, the
    mean over the timed inferences (the firmware's own per-layer reduction)."""
    reads = [s for s in trace.snapshots if s.boundary == SAMPLE_READ]
    if symbols.sample is None or len(reads) != 2 * iterations:
        raise CaptureError(
            f"the firmware read its per-inference counter {len(reads)} times for {iterations} "
            "timed inferences",
            hint="Re-export the model: the firmware predates the emulated boards' benchmark "
            "entry, or it did not finish.",
        )
    samples = tuple(
        float(b.counts["estimated_cycles"] - a.counts["estimated_cycles"])
        for a, b in zip(reads[0::2], reads[1::2], strict=True)
    )
    layers: dict[str, float] = {}
    if symbols.cycles is not None and layer_names:
        rows = per_forward_layer_rows(
            trace, len(layer_names), warmup, {"estimated_cycles": "estimated_cycles"}
        )
        for name, per_forward in zip(layer_names, rows, strict=True):
            values = [row["estimated_cycles"] for row in per_forward]
            if values:
                layers[name] = stats.mean(values)
    return EstimatedCycles(
        model=model.label,
        core=model.core,
        samples=samples,
        layers=layers,
        assumptions=model.assumptions,
        leaves_out=model.leaves_out,
    )
