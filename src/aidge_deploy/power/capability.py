"""The mixin a deploy target adopts to run a power window.

A target with a *power variant* (``power_variant = True``: our emulated boards' BSP) builds
a second firmware that runs N inferences between two gate edges with nothing printed inside,
flashes it, runs it, and returns the terminal record it prints after the gate closed. A
target without one (host, Linux boards) repeats its normal program inside a host-timed
window. Either way the clean profile timing is the denominator that plans N.
"""

from __future__ import annotations

import dataclasses
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from aidge_deploy.errors import ConfigError, InternalError
from aidge_deploy.metrics import Provenance
from aidge_deploy.power.protocol import WindowRule
from aidge_deploy.power.result import PowerPlan, TerminalRecord

if TYPE_CHECKING:
    from aidge_deploy.lifecycle import BuildResult, DeployContext, ExecutionResult
    from aidge_deploy.power.protocol import PowerMonitor
    from aidge_deploy.protocols.base import ProtocolResult


@dataclass(frozen=True)
class PowerRun:
    """What running the window gave: host times around it and the text printed after it."""

    started_s: float  # time.monotonic() right before the window ran
    ended_s: float
    text_after_gate: str
    log_path: Path | None = None
    #: repeats actually run, when the target decides it during the window (repeated
    #: program runs go on until the planned window is reached); None: as planned
    repeats: int | None = None
    #: raw records of the window beside the capture (the host timings of its runs)
    raw_files: tuple[Path, ...] = ()


def clean_latency(
    target: Any, ctx: DeployContext, parsed: ProtocolResult
) -> tuple[float, Provenance, float]:
    """Per-inference latency (s) of the clean profile run of any ``DeployTarget``, its
    provenance and the resolution (s) of the timer behind it: the target's own times
    (``run_times``; an emulated board's are its time base ÷ core clock, estimated)."""
    from aidge_deploy import stats

    times = target.run_times(parsed, ctx.artifact.manifest.application_config)
    info = times.info
    if not times.timings_ms or info is None or info.resolution_ms is None:
        raise ConfigError(
            "The profile run printed no timings: no clean latency to plan N from",
            hint="Deploy a benchmark export (with profiling, on an emulated board).",
        )
    latency_ms = stats.median(times.timings_ms)
    return latency_ms / 1e3, info.provenance, info.resolution_ms / 1e3


def power_log_context(ctx: DeployContext) -> DeployContext:
    """The context of a power window's runs: their logs go to ``<run>/power``, so the
    profile run's log (the one the latency figures come from) is never overwritten."""
    power_ctx = dataclasses.replace(ctx, log_dir=ctx.log_dir / "power")
    power_ctx.log_dir.mkdir(parents=True, exist_ok=True)
    return power_ctx


class PowerCapableTarget(ABC):
    """Mixin for ``DeployTarget`` subclasses that can run a gated power window."""

    #: the BSP builds a dedicated power firmware (N inferences between two gate edges)
    power_variant: ClassVar[bool] = False
    #: a window consistent with N x clean latency lasts that long (``MATCH``), or at
    #: least that long when it also holds program start-ups (``AT_LEAST``)
    power_window_rule: ClassVar[WindowRule] = WindowRule.MATCH

    @abstractmethod
    def power_inferences_per_repeat(self, ctx: DeployContext) -> int:
        """Inferences one repeat (one call of the entry point / one program run) performs."""

    def power_clean_latency(
        self, ctx: DeployContext, parsed: ProtocolResult
    ) -> tuple[float, Provenance, float]:
        """Per-inference latency (s) of the clean profile run (``clean_latency``)."""
        return clean_latency(self, ctx, parsed)

    def power_repeat_duration(
        self, ctx: DeployContext, build: BuildResult, execution: ExecutionResult
    ) -> float | None:
        """Wall time (s) of one repeat when it is more than its inferences (a whole program
        run with its start-up); None when the inferences are the repeat (power variant)."""
        return None

    def build_power_firmware(
        self, ctx: DeployContext, build: BuildResult, plan: PowerPlan
    ) -> BuildResult:
        raise InternalError("this target has no power firmware variant")

    def flash_power_firmware(
        self, ctx: DeployContext, firmware: BuildResult, monitor: PowerMonitor
    ) -> None:
        raise InternalError("this target has no power firmware variant")

    @abstractmethod
    def run_power_window(
        self, ctx: DeployContext, build: BuildResult, plan: PowerPlan, monitor: PowerMonitor
    ) -> PowerRun:
        """Run the planned window (the monitor is armed) and return what it printed after."""

    def parse_power_terminal(self, run: PowerRun, plan: PowerPlan) -> TerminalRecord | None:
        """The terminal record the target printed after the gate (None if it prints none)."""
        return None


#: repeated program runs stop at this many times the planned repeats and the planned
#: window's duration, its samples reached or not
MAX_EXTRA_REPEATS_FACTOR = 4
#: the host timings a window of repeated program runs is planned and counted with
WINDOW_RECORD = "power-window.json"


class RepeatedRunPower(PowerCapableTarget):
    """Targets without a power variant (host, Linux boards): the window is the normal
    program run ``repeats`` times back to back, timed by the host; the monitor (hwmon,
    RAPL, a Joulescope on the board's supply) sees the idle system around it. The window's
    runs log into ``<run>/power`` (``power_log_context``)."""

    power_window_rule: ClassVar[WindowRule] = WindowRule.AT_LEAST

    def power_inferences_per_repeat(self, ctx: DeployContext) -> int:
        manifest = ctx.artifact.manifest
        app = manifest.application_config or {}
        if manifest.application != "benchmark":
            raise ConfigError(
                f"Power runs need a benchmark export; this one is {manifest.application!r}",
                hint="Use `aidge-deploy profile` (it exports a benchmark).",
            )
        # the C++ benchmark entry runs W warm-up then I timed forwards
        return int(app.get("nb_warmup", 0)) + int(app.get("nb_iterations", 1))

    def power_repeat_duration(
        self, ctx: DeployContext, build: BuildResult, execution: ExecutionResult
    ) -> float | None:
        # a program run costs its start-up and I/O too: plan repeats on its wall time. The
        # profile run was the first (cold caches, first load of the model); the window's runs
        # are warm, so one more run is timed and the faster of the two is planned on.
        import time

        execute = getattr(self, "execute")  # noqa: B009 (DeployTarget's lifecycle method)
        started = time.monotonic()
        execute(power_log_context(ctx), build)
        warm = time.monotonic() - started
        repeat = min(execution.duration_s, warm) if execution.duration_s > 0 else warm
        self._power_timings = {
            "profile_run_s": execution.duration_s,
            "warm_run_s": warm,
            "repeat_duration_s": repeat,
        }
        return repeat

    def run_power_window(
        self, ctx: DeployContext, build: BuildResult, plan: PowerPlan, monitor: PowerMonitor
    ) -> PowerRun:
        import time

        execute = getattr(self, "execute")  # noqa: B009 (DeployTarget's lifecycle method)
        # program runs vary from one to the next (start-up, the OS, the SSH link): run at
        # least the planned repeats, and more until the planned window is reached and holds
        # the planned samples (N is what ran, so a run of fast programs still fills the
        # window the plan asked for, and late sensor reads do not leave it short). The
        # limit is in runs and in time both: on a loaded machine the timed runs that
        # planned the repeats can be far slower than the window's, and a count alone
        # would stop those fast runs before the window holds its samples.
        limit = plan.repeats * MAX_EXTRA_REPEATS_FACTOR
        time_limit_s = plan.target_window_s * MAX_EXTRA_REPEATS_FACTOR
        power_ctx = power_log_context(ctx)
        started = time.monotonic()
        last = None
        done = 0

        def short() -> bool:
            if time.monotonic() - started < plan.target_window_s:
                return True
            seen = monitor.samples_since(started)
            return seen is not None and seen < plan.min_samples

        def within_limit() -> bool:
            return done < limit or time.monotonic() - started < time_limit_s

        while done < plan.repeats or (within_limit() and short()):
            last = execute(power_ctx, build)
            done += 1
        ended = time.monotonic()
        record = power_ctx.log_dir / WINDOW_RECORD
        timings = dict(getattr(self, "_power_timings", None) or {})
        record.write_text(
            json.dumps(
                {
                    "clock": "host time.monotonic(), s",
                    **timings,
                    "planned_repeats": plan.repeats,
                    "window_runs": done,
                    "inferences_per_run": plan.inferences_per_repeat,
                    "window_started_s": started,
                    "window_ended_s": ended,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        return PowerRun(
            started,
            ended,
            "",
            getattr(last, "log_path", None),
            repeats=done,
            raw_files=(record,),
        )


_TERMINAL = re.compile(
    r"AIDGE_POWER_TERMINAL repeats=(?P<repeats>\d+) ticks_hi=(?P<hi>\d+) ticks_lo=(?P<lo>\d+)"
)


def parse_bsp_terminal(
    text: str,
    inferences_per_repeat: int,
    provenance: Provenance,
    *,
    ticks_per_second: float | None = None,
    no_clock_reason: str | None = None,
) -> TerminalRecord | None:
    """``AIDGE_POWER_TERMINAL repeats=R ticks_hi=H ticks_lo=L`` of the BSP power variant.

    The ticks are the target's clock over the window: kept only with ``ticks_per_second``
    (a board's own clock); without it (``no_clock_reason``, an emulator's virtual time)
    neither the elapsed time nor the ticks appear anywhere.
    """
    match = _TERMINAL.search(text)
    if match is None:
        return None
    repeats = int(match["repeats"])
    inferences = repeats * inferences_per_repeat
    if ticks_per_second is None:
        return TerminalRecord(
            repeats=repeats,
            inferences=inferences,
            elapsed_s=None,
            provenance=provenance,
            raw=f"AIDGE_POWER_TERMINAL repeats={repeats}",
            elapsed_unavailable_reason=no_clock_reason or "the target has no clock of its own",
        )
    ticks = (int(match["hi"]) << 32) | int(match["lo"])
    return TerminalRecord(
        repeats=repeats,
        inferences=inferences,
        elapsed_s=ticks / ticks_per_second,
        provenance=provenance,
        raw=match.group(0),
        elapsed_resolution_s=1.0 / ticks_per_second,
    )


__all__ = [
    "PowerCapableTarget",
    "PowerRun",
    "RepeatedRunPower",
    "clean_latency",
    "parse_bsp_terminal",
    "power_log_context",
]
