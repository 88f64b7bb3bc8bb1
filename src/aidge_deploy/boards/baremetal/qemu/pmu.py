"""Per-layer emulated counters on QEMU boards, from the aidge_pmu TCG plugin.

Each pass re-runs the firmware in QEMU with the plugin snapshotting its counters at two
boundaries: the entry of ``model_forward`` (delimits inferences) and the entry of the BSP's
cycle-counter read ``aidge_qemu_cycles`` (the profiling build reads it right before and
right after every layer). The i-th pair of reads inside a forward brackets layer i, so the
difference of the two snapshots is that layer's count (plus the few instructions of the
read itself — the same instrumentation overhead the firmware's own cycle figures carry).
Warm-up forwards are dropped, the rest reduced per layer by the configured aggregation.
Under a fixed ``-icount`` shift everything is deterministic: two runs give equal counts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from aidge_deploy.config import DeployConfig
from aidge_deploy.connections.qemu import QemuMachine
from aidge_deploy.connections.serial_capture import CaptureOutcome, SerialChannel
from aidge_deploy.errors import CaptureError, ConfigError, DeployError
from aidge_deploy.flash.image import load_elf
from aidge_deploy.flash.program import ResetMode, program
from aidge_deploy.profiling.capability import CounterCapableTarget
from aidge_deploy.profiling.counters import CounterDomain, load_catalogue
from aidge_deploy.profiling.passes import CounterPass, PassResult, pass_result_from_samples
from aidge_deploy.profiling.qemu_plugin import (
    CATALOGUE_NAMES,
    PluginTrace,
    plugin_option,
    plugin_path,
    read_trace,
)
from aidge_deploy.results import BuildResult, DeployContext

FORWARD_SYMBOL = re.compile(r"^(model_forward|_Z\d+model_forward\w*)$")
CYCLES_SYMBOL = "aidge_qemu_cycles"


def find_symbols(elf: Path) -> tuple[int | None, int | None]:
    """Addresses of ``model_forward`` and of the BSP's cycle read (Thumb bit cleared)."""
    forward = cycles = None
    with elf.open("rb") as fh:
        for section in ELFFile(fh).iter_sections():
            if not isinstance(section, SymbolTableSection):
                continue
            for sym in section.iter_symbols():
                if sym["st_info"]["type"] != "STT_FUNC" or not sym["st_value"]:
                    continue
                if forward is None and FORWARD_SYMBOL.match(sym.name):
                    forward = int(sym["st_value"]) & ~1
                elif sym.name == CYCLES_SYMBOL:
                    cycles = int(sym["st_value"]) & ~1
    return forward, cycles


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
        if snap.boundary == 0:
            forwards.append([])
        elif forwards:
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


class QemuEmulatedCounters(CounterCapableTarget):
    """``CounterCapableTarget`` of the QEMU boards: the emulated PMU plugin."""

    counter_domain: ClassVar[CounterDomain] = CounterDomain.EMULATED
    #: the plugin counts every emulated event in one run
    max_counters_per_pass: ClassVar[int] = 4

    config: DeployConfig

    def available_counters(self) -> Mapping[str, str | None]:
        names = [c.name for c in load_catalogue().in_domain(CounterDomain.EMULATED)]
        try:
            plugin_path()
        except DeployError as exc:
            return dict.fromkeys(names, f"the QEMU plugin cannot be built: {exc.message}")
        return dict.fromkeys(names)

    def run_counter_pass(
        self, ctx: DeployContext, build: BuildResult, counter_pass: CounterPass
    ) -> PassResult:
        from aidge_deploy.boards.baremetal.qemu.targets import QemuBoardTarget

        if not isinstance(self, QemuBoardTarget):
            raise ConfigError("the emulated PMU needs a QEMU board target", hint="This is a bug.")
        forward, cycles = find_symbols(build.artifact_path)
        if forward is None:
            raise ConfigError(
                f"{build.artifact_path.name} has no model_forward symbol",
                hint="Emulated counters need an Aidge export's firmware.",
            )
        board = self.board
        pass_dir = ctx.log_dir / f"counters-{counter_pass.index}-{counter_pass.name}"
        trace_path = pass_dir / "pmu.trace"
        pass_dir.mkdir(parents=True, exist_ok=True)
        boundaries = [forward] + ([cycles] if cycles is not None else [])
        extra = plugin_option(plugin_path(), boundaries, trace_path)
        protocol = self.protocol(ctx)
        with (
            QemuMachine(
                board.qemu_machine, pass_dir, icount_shift=board.icount_shift, extra_args=extra
            ) as qemu,
            SerialChannel(qemu.serial, pass_dir / "uart.log") as channel,
        ):
            with qemu.connect_gdb() as gdb:
                program(gdb, load_elf(build.artifact_path), verify=True, reset=ResetMode.VECTOR)
            if protocol.interactive:
                protocol.drive(channel, ctx.artifact.manifest, self.session_request(ctx))
            result = channel.capture(
                end_markers=self.end_markers(ctx), timeout_s=self.capture_timeout(ctx)
            )
            if channel.at_eof:
                qemu.wait(2.0)
        if result.outcome is CaptureOutcome.TIMEOUT:
            raise CaptureError(
                f"Counter pass {counter_pass.name}: no end marker on the UART ({result.reason})",
                hint="The instrumented run is slower; raise uart_capture_duration.",
                log_path=result.log_path,
            )
        parsed = protocol.parse(result.text, ctx.artifact.manifest)
        layer_names = list(parsed.layer_cycles or parsed.layer_times_ms or {})
        wanted = {plug: cat for plug, cat in CATALOGUE_NAMES.items() if cat in counter_pass.names}
        trace = read_trace(trace_path)
        app = ctx.artifact.manifest.application_config or {}
        warmup = int(app.get("nb_warmup", 0))
        basis = (
            f"median over the timed inferences ({warmup} warm-up dropped), QEMU plugin, "
            f"icount shift {board.icount_shift}; emulated, not cycle-accurate"
        )
        if cycles is not None and layer_names:
            rows = per_forward_layer_rows(trace, len(layer_names), warmup, wanted)
            result_pass = pass_result_from_samples(
                counter_pass,
                list(zip(layer_names, rows, strict=True)),
                self.config.aggregation,
                counter_bits=None,
            )
            totals = {
                c: sum(lc.values.get(c, 0.0) for lc in result_pass.layers)
                for c in counter_pass.names
            }
            return PassResult(
                counter_pass=counter_pass,
                layers=result_pass.layers,
                totals=totals,
                unavailable=result_pass.unavailable,
                basis=basis,
            )
        # no per-layer profiling in this build: whole forwards only
        starts = [s for s in trace.snapshots if s.boundary == 0][warmup:]
        per_forward = [b.minus(a) for a, b in itertools.pairwise(starts)]
        if not per_forward:
            return PassResult(
                counter_pass,
                unavailable=dict.fromkeys(
                    counter_pass.names, "fewer than two timed inferences ran"
                ),
            )
        per_forward.sort(key=lambda d: d["instructions"])
        median = per_forward[len(per_forward) // 2]
        return PassResult(
            counter_pass=counter_pass,
            totals={cat: float(median[plug]) for plug, cat in wanted.items()},
            basis="per inference, forward entry to next forward entry (loop overhead included); "
            + basis,
        )
