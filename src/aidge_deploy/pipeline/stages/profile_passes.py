"""ProfilePasses: count the requested events, in as many complete runs as the PMU needs.

Runs after ParseOutput (the program is known to work) and before Assemble. The selection
is checked against what the target can count right now; counters it cannot count are kept
as unavailable with their reason, never dropped or zeroed. Each pass is a complete run of
the program with its own warm-up; the passes are merged by layer into one profile.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from aidge_deploy.configcheck import check_counter_request
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.profiling.counters import select_counters
from aidge_deploy.profiling.passes import merge_passes, plan_passes
from aidge_deploy.progress import ProgressKind
from aidge_deploy.results import Provenance
from aidge_deploy.targetcaps import counter_source

log = logging.getLogger("aidge_deploy")


class ProfilePassesStage:
    name = "ProfilePasses"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return not ctx.config.counters

    def run(self, ctx: PipelineContext) -> None:
        target = ctx.resolved_target
        check_counter_request(
            ctx.config.counters, type(target), ctx.resolved_target_name, ctx.config.backend_kind
        )
        source = counter_source(target)  # its counter source, built with it
        if source is None:
            return
        selection = select_counters(
            ctx.config.counters, source.counter_domain, source.available_counters()
        )
        for name, reason in selection.unavailable.items():
            log.info("counter %s unavailable: %s", name, reason)
        cap = ctx.config.max_counters_per_pass
        limit = min(source.max_counters_per_pass, cap) if cap else source.max_counters_per_pass
        passes = plan_passes(selection, limit, every_counter_takes_a_slot=bool(cap))
        results = []
        for counter_pass in passes:
            ctx.report(
                self.name,
                ProgressKind.STATUS,
                f"pass {counter_pass.name}: {', '.join(counter_pass.names)}",
                completed=counter_pass.index,
                total=len(passes),
                unit="passes",
            )
            results.append(source.run_counter_pass(ctx.prepared_context, ctx.built, counter_pass))
        profile = merge_passes(selection, results)
        if profile.provenance != Provenance.EMULATED:
            # perf events are read where the program runs: this machine or the board's silicon
            profile = replace(profile, provenance=target.counter_provenance)
        ctx.counter_profile = profile
