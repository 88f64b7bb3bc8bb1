"""Counters on the host target: Linux ``perf_event`` around a complete run of the export.

The host program cannot attribute counters to layers (its layer timings come from the
program's own clock), so each pass counts the whole program — process start, warm-up and
timed loop — and the figures are reported per inference: the whole-run count divided by
the inferences the program executed (``nb_warmup + nb_iterations`` for a benchmark
export, from the manifest's ``application_config``). The descriptions say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from aidge_deploy.artifact import hydrate_runtime
from aidge_deploy.connections.local_process import describe_exit
from aidge_deploy.connections.toolcache import c_compiler_check
from aidge_deploy.errors import ConfigError
from aidge_deploy.profiling.capability import Counted, CounterSource
from aidge_deploy.profiling.counters import CounterDomain
from aidge_deploy.profiling.passes import CounterPass, PassResult
from aidge_deploy.profiling.perf_linux import (
    pass_figures,
    perf_permission_check,
    probe_available,
    run_with_counters,
)
from aidge_deploy.readiness import ToolCheck

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.results import BuildResult, DeployContext

#: export kinds whose program runs by itself (no interactive session on stdin)
_SELF_RUNNING = ("benchmark", "output", "standalone")


def executed_inferences(ctx: DeployContext, config: DeployConfig) -> tuple[int, str]:
    """How many inferences one run of the host program executes, and a phrase saying so."""
    manifest = ctx.artifact.manifest
    if manifest.application not in _SELF_RUNNING:
        raise ConfigError(
            f"Counters on the host need a self-running export; this one is {manifest.application!r}",
            hint="Export with application kind 'benchmark' to profile counters, or drop counters=.",
        )
    if manifest.application != "benchmark":
        return 1, "whole program run (one inference)"
    runtime = hydrate_runtime(config, manifest)
    total = runtime.nb_warmup + runtime.nb_iterations
    return total, (
        f"per inference: whole-program count / {total} executed inferences "
        f"({runtime.nb_warmup} warm-up + {runtime.nb_iterations} timed)"
    )


class HostPerfCounters(CounterSource[Counted]):
    """The counter source of targets that run the program as a local process (``host``)."""

    counter_domain: ClassVar[CounterDomain] = CounterDomain.LINUX_PERF
    #: general-purpose PMU counters before the kernel multiplexes (x86 cores have 4 per
    #: hyper-thread, Cortex-A7x 6); more still works, multiplexed and reported as such
    max_counters_per_pass: ClassVar[int] = 4
    counts_where: ClassVar[str] = (
        "this machine's kernel (perf_event_open through the perf_run launcher), whole "
        "program run / executed inferences"
    )

    @classmethod
    def counter_needs(cls) -> list[ToolCheck]:
        return [c_compiler_check("the perf_run launcher"), perf_permission_check()]

    def available_counters(self) -> Mapping[str, str | None]:
        probed = probe_available()
        if self.config.docker.image:
            # the run happens in a container this source does not reach
            reason = "not counted: the program runs inside a Docker container"
            return {name: reason for name in probed}
        return probed

    def run_counter_pass(
        self, ctx: DeployContext, build: BuildResult, counter_pass: CounterPass
    ) -> PassResult:
        inferences, basis = executed_inferences(ctx, self.config)
        timeout = float(self.config.run_timeout)
        stem = f"counters-{counter_pass.index}-{counter_pass.name}"
        counted = run_with_counters(
            [str(build.artifact_path)],
            counter_pass.counters,
            cwd=ctx.export_dir,
            timeout_s=timeout,
            stdout_path=ctx.log_dir / f"{stem}.log",
            stderr_path=ctx.log_dir / f"{stem}.stderr.log",
        )
        error = describe_exit(counted.run, timeout)
        if error is not None:
            raise error
        figures = pass_figures(
            counted.report, counter_pass.names, inferences, "the launcher wrote no report"
        )
        return PassResult(
            counter_pass=counter_pass,
            layers=(),
            totals=dict(figures.totals),
            unavailable=dict(figures.unavailable),
            running_ratio=dict(figures.running_ratio),
            basis=basis,
        )


__all__ = ["HostPerfCounters", "executed_inferences"]
