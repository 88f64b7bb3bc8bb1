"""The emulated boards' counter source (``emulated-pmu``): the aidge_pmu QEMU plugin.

Why this module exists: counting is composed with a board, not inherited by it. A pass is
one more complete run of the firmware on the board (``QemuBoardTarget.run_again``) with the
plugin loaded; ``pmu`` turns its trace into per-layer counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from aidge_deploy.boards.baremetal.qemu.pmu import (
    PmuSymbols,
    emulated_counter_availability,
    pass_result_from_trace,
)
from aidge_deploy.boards.baremetal.qemu.targets import QemuBoardTarget
from aidge_deploy.connections.toolcache import c_compiler_check
from aidge_deploy.profiling.capability import CounterSource
from aidge_deploy.profiling.counters import CounterDomain
from aidge_deploy.profiling.passes import CounterPass, PassResult
from aidge_deploy.profiling.qemu_plugin import plugin_option, plugin_path, read_trace
from aidge_deploy.readiness import ToolCheck

if TYPE_CHECKING:
    from aidge_deploy.results import BuildResult, DeployContext


class QemuPmuCounters(CounterSource[QemuBoardTarget]):
    """The emulated boards' counter source: a pass is one more run of the firmware on its
    board with the aidge_pmu plugin loaded, its trace reduced to per-layer counts."""

    counter_domain: ClassVar[CounterDomain] = CounterDomain.EMULATED
    #: the plugin counts every emulated event in one run
    max_counters_per_pass: ClassVar[int] = 4
    counts_where: ClassVar[str] = (
        "the aidge_pmu QEMU TCG plugin (emulated instructions, loads, stores, taken "
        "branches), per layer"
    )

    @classmethod
    def counter_needs(cls) -> list[ToolCheck]:
        return [c_compiler_check("the emulated-PMU QEMU plugin")]

    def available_counters(self) -> Mapping[str, str | None]:
        return emulated_counter_availability()

    def run_counter_pass(
        self, ctx: DeployContext, build: BuildResult, counter_pass: CounterPass
    ) -> PassResult:
        symbols = PmuSymbols.of(build.artifact_path)
        pass_dir = ctx.log_dir / f"counters-{counter_pass.index}-{counter_pass.name}"
        pass_dir.mkdir(parents=True, exist_ok=True)
        trace_path = pass_dir / "pmu.trace"
        board = self.target
        parsed = board.run_again(
            replace(ctx, log_dir=pass_dir),
            build,
            plugin_option(plugin_path(), symbols.boundaries, trace_path),
        )
        return pass_result_from_trace(
            counter_pass,
            read_trace(trace_path),
            symbols,
            layer_names=list(parsed.layer_cycles or parsed.layer_times_ms or {}),
            warmup=int((ctx.artifact.manifest.application_config or {}).get("nb_warmup", 0)),
            aggregation=self.config.aggregation,
            icount_shift=board.board.icount_shift,
        )


__all__ = ["QemuPmuCounters"]
