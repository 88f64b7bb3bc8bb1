"""Estimated cycles of an emulated board's run: its core's timing model in the emulated PMU.

A run of a benchmark export on an emulated board loads the aidge_pmu plugin with the core's
timing model (``profiling.timing``): the plugin prices every instruction as it is translated
and adds the dynamic parts as they happen, and snapshots its counts at the firmware's reads
of its cycle counter, around each timed inference (``aidge_qemu_sample_cycles``) and each
layer (``aidge_qemu_cycles``). The run's estimated cycles are the differences between those
snapshots: per inference exactly what the firmware's own (instruction-count) cycles bracket,
per layer the mean over the timed inferences, as the firmware reduces its own.

Times then become estimated cycles ÷ the core clock, labelled with the model ("estimated (M4
timing model) at 25 MHz"); ``DeployConfig(timing="cpi1")`` (``--timing cpi1``) keeps one
cycle per instruction, the figure of older bundles. Where the model cannot run (no C compiler
for the plugin, a firmware from before the boards' benchmark entry) the estimate is
unavailable with its reason and the times fall back to CPI = 1, labelled as such.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.boards.baremetal.qemu.pmu import PmuSymbols, estimated_cycles_of
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.config import TimingMode
from aidge_deploy.errors import DeployError
from aidge_deploy.profiling.qemu_plugin import (
    WaitStates,
    plugin_option,
    plugin_path,
    read_trace,
    write_boundaries,
)
from aidge_deploy.profiling.timing import (
    ESTIMATED_CYCLES,
    CodeKind,
    EstimatedCycles,
    TimingModel,
    model_for_cpu,
    plugin_table_path,
)
from aidge_deploy.results import Provenance
from aidge_deploy.timing import RunTimes, TimingInfo

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aidge_deploy.protocols.base import ProtocolResult
    from aidge_qemu_descriptors import QemuBoard

__all__ = [
    "TimingPlan",
    "TimingRun",
    "estimated_run_times",
    "model_plugin_options",
    "plan_timing_run",
    "unavailable",
    "wait_states_of",
]


def wait_states_of(board: QemuBoard) -> tuple[WaitStates, ...]:
    """The board's slow memory regions, as the plugin takes them."""
    return tuple(WaitStates(r.origin, r.size, r.wait_states) for r in board.wait_states)


def model_plugin_options(board: QemuBoard, mode: TimingMode) -> dict[str, Any]:
    """``plugin_option``'s timing arguments for a run on ``board``: its core's model and its
    slow memory regions; none for ``cpi1`` or a core without a model (any plugin run that
    must share the deploy run's time base, the emulated power window's included)."""
    model = model_for_cpu(board.cpu)
    if mode is TimingMode.CPI1 or model is None:
        return {}
    return {
        "timing": plugin_table_path(model, default_cache_root()),
        "wait_states": wait_states_of(board),
    }


@dataclass(frozen=True)
class TimingPlan:
    """A run that will load the timing model, before its firmware is known.

    Its plugin arguments name a boundaries file instead of the firmware's addresses, so QEMU
    can start (halted) while the firmware is still being built or found in the cache;
    ``bind`` writes the file once the firmware is there, before the core runs.
    """

    model: TimingModel
    trace: Path
    boundaries_file: Path
    plugin_args: tuple[str, ...]
    #: the board has memory with wait states (the model's band widens: no flash accelerator)
    wait_states: bool = False

    def bind(self, firmware: Path) -> TimingRun | EstimatedCycles:
        """The run of ``firmware`` (its snapshot addresses written for the plugin), or why
        the model cannot run on it."""
        try:
            symbols = PmuSymbols.of(firmware)
        except DeployError as exc:  # not an Aidge export's firmware (no model_forward)
            return unavailable(self.model, exc.message)
        if symbols.sample is None or symbols.cycles is None:
            return unavailable(
                self.model,
                "the firmware has no per-inference cycle read (exported without profiling, or "
                "before the emulated boards' benchmark entry: re-export with profiling on)",
            )
        write_boundaries(self.boundaries_file, symbols.boundaries)
        return TimingRun(self.model, symbols, self.trace, self.plugin_args, self.wait_states)


@dataclass(frozen=True)
class TimingRun:
    """A run with the timing model loaded: where the plugin writes, and what it snapshots."""

    model: TimingModel
    symbols: PmuSymbols
    trace: Path
    plugin_args: tuple[str, ...]
    wait_states: bool = False

    def estimate(
        self,
        parsed: ProtocolResult,
        app_config: Mapping[str, Any] | None,
        code: CodeKind = CodeKind.FLOAT,
    ) -> EstimatedCycles:
        """The run's estimated cycles, with the model's band for ``code`` on this board."""
        app = app_config or {}
        estimated = estimated_cycles_of(
            read_trace(self.trace),
            self.symbols,
            self.model,
            layer_names=list(parsed.layer_cycles or parsed.layer_times_ms or {}),
            warmup=int(app.get("nb_warmup", 0)),
            iterations=int(app.get("nb_iterations", 0)),
        )
        band = self.model.band(code, wait_states=self.wait_states)
        return dataclasses.replace(estimated, band=band)


def unavailable(model: TimingModel, reason: str) -> EstimatedCycles:
    return EstimatedCycles(
        model.label, model.core, (), {}, model.assumptions, model.leaves_out, unavailable=reason
    )


def plan_timing_run(
    board: QemuBoard,
    mode: TimingMode,
    application: str | None,
    app_config: Mapping[str, Any] | None,
    log_dir: Path,
) -> tuple[TimingPlan | None, EstimatedCycles | None]:
    """The timing run of an export on ``board``, before its firmware is known (``bind``
    completes it), or why there is none.

    Returns ``(plan, None)`` when the model should run, ``(None, unavailable estimate)``
    when it should but cannot, and ``(None, None)`` when it is not asked for (``cpi1``, a
    core without a model, an export that is not a benchmark).
    """
    model = model_for_cpu(board.cpu)
    app = app_config or {}
    if mode is TimingMode.CPI1 or model is None:
        return None, None
    if application != "benchmark" or app.get("tinymlbenchmark"):
        return None, None
    try:
        plugin = plugin_path()
    except DeployError as exc:
        return None, unavailable(model, f"the QEMU plugin cannot be built: {exc.message}")
    trace = log_dir / "timing.trace"
    boundaries = log_dir / "timing.boundaries"
    args = plugin_option(
        plugin, boundaries, trace, count_memory=False, **model_plugin_options(board, mode)
    )
    plan = TimingPlan(model, trace, boundaries, tuple(args), wait_states=bool(board.wait_states))
    return plan, None


def estimated_run_times(
    estimated: EstimatedCycles, clock_hz: float, ticks_per_instruction: float
) -> RunTimes:
    """The run's times from the model's cycles: each at the core clock, to one cycle."""
    ms_per_cycle = 1e3 / clock_hz
    timings = tuple(c * ms_per_cycle for c in estimated.samples)
    layer_times = {name: c * ms_per_cycle for name, c in estimated.layers.items()} or None
    source = f"latency: estimated cycles per inference ({estimated.model}) ÷ core clock"
    if layer_times:
        source += "; layers: estimated cycles per call ÷ core clock"
    info = TimingInfo(
        provenance=Provenance.ESTIMATED,
        resolution_ms=ms_per_cycle,
        layer_resolution_ms=ms_per_cycle if layer_times else None,
        source=source,
        label=f"{estimated.provenance_label} at {clock_hz / 1e6:g} MHz",
        clock_hz=clock_hz,
        derived_from=ESTIMATED_CYCLES,
    )
    # the firmware's own timer (virtual time) maps to the CPI = 1 estimate, as without a model
    return RunTimes(info, timings, layer_times, scale=1.0 / ticks_per_instruction)
