"""Linux ``perf_event`` counters on SSH boards, counted by the on-board ``perf_run`` launcher.

Boards may have no Python, so the launcher (compiled on the board, or cross-compiled) opens
the counter group on the program and reports raw counts, enabled/running times and, for
every event the kernel refused, the errno and why (no PMU driver, ``perf_event_paranoid``,
container seccomp). Counts are whole-program figures divided by the executed inferences,
exactly as on the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from aidge_deploy.boards.host.counters import executed_inferences
from aidge_deploy.boards.sbc.run_steps import SbcRunSteps
from aidge_deploy.profiling.capability import CounterSource
from aidge_deploy.profiling.counters import CounterDomain, load_catalogue
from aidge_deploy.profiling.passes import CounterPass, PassResult
from aidge_deploy.profiling.perf_linux import pass_figures

if TYPE_CHECKING:
    from aidge_deploy.results import BuildResult, DeployContext


class SbcPerfCounters(CounterSource[SbcRunSteps]):
    """The counter source of the SSH boards (``SbcSshTarget`` counts with it): a counter
    pass is one more run of the program on the board (``SbcRunSteps.run_program``)."""

    counter_domain: ClassVar[CounterDomain] = CounterDomain.LINUX_PERF
    #: Cortex-A7x cores have 6 programmable counters; 4 keeps a pass un-multiplexed on most
    max_counters_per_pass: ClassVar[int] = 4
    counts_where: ClassVar[str] = (
        "the board's kernel, through the perf_run launcher built on the board (or cross-built "
        "here), whole program run / executed inferences"
    )
    counter_run_needs: ClassVar[tuple[str, ...]] = (
        "a C compiler on the board for the launcher (or --cross-compile)",
        "perf_event_open allowed on the board (perf_event_paranoid <= 2)",
    )

    def available_counters(self) -> Mapping[str, str | None]:
        # What the board's kernel allows is only known on the board: every catalogue event
        # is attempted, and the launcher reports each refusal with its reason.
        return {c.name: None for c in load_catalogue().in_domain(CounterDomain.LINUX_PERF)}

    def run_counter_pass(
        self, ctx: DeployContext, build: BuildResult, counter_pass: CounterPass
    ) -> PassResult:
        from aidge_deploy.profiling.native import event_specs

        inferences, basis = executed_inferences(ctx, self.config)
        board = self.target
        launcher = board.launcher
        if launcher is None or not launcher.usable:
            reason = (
                launcher.unavailable_reason if launcher is not None else "no launcher on the board"
            )
            return PassResult(
                counter_pass, unavailable=dict.fromkeys(counter_pass.names, str(reason))
            )
        events = event_specs(counter_pass.counters)  # the launcher's -e specs
        _, report = board.run_program(
            ctx,
            build,
            events=events,
            log_name=f"counters-{counter_pass.index}-{counter_pass.name}.log",
        )
        if report is None:
            return PassResult(
                counter_pass,
                unavailable=dict.fromkeys(counter_pass.names, "the launcher printed no report"),
            )
        figures = pass_figures(report, counter_pass.names, inferences, "not counted in this run")
        if board.uses_container:
            basis += "; inside a container whose seccomp profile allows perf_event_open"
        return PassResult(
            counter_pass=counter_pass,
            totals=dict(figures.totals),
            unavailable=dict(figures.unavailable),
            running_ratio=dict(figures.running_ratio),
            basis=basis,
        )
