"""Linux ``perf_event`` counters on this machine, through the ``perf_run`` launcher.

There is one perf_event implementation: ``native/perf_run.c``. Boards without Python run it
over SSH; the host runs it here, so counts, refusals (errno and reason), never-enabled and
never-scheduled counters and running ratios are decided by the same code everywhere. The
launcher forks the program, opens the counter group on it before its ``exec``
(``enable_on_exec``, so nothing of the launcher is counted), waits with ``wait4`` (peak RSS
of the program itself) and reports one JSON document.

``inherit`` is off: group reads of inherited counters are refused by the kernels we meet,
so only the program's own thread is counted (Aidge host exports are single-threaded
unless built with ``AIDGE_ENABLE_OPENMP``). ``exclude_kernel`` is on, as
``perf_event_paranoid`` >= 2 requires for unprivileged users.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from aidge_deploy.connections.local_process import ProcessRun, run_captured, run_process
from aidge_deploy.errors import DeployError
from aidge_deploy.profiling.counters import Counter, CounterDomain, load_catalogue
from aidge_deploy.profiling.native import (
    PerfRunReport,
    ensure_launcher,
    event_specs,
    parse_perf_run_report,
    parse_probe,
    perf_run_argv,
)
from aidge_deploy.readiness import ToolCheck

_PROBE_TIMEOUT_S = 30.0


#: the kernel's policy on perf_event_open for users without CAP_PERFMON
PARANOID_PATH = Path("/proc/sys/kernel/perf_event_paranoid")


def perf_permission_check() -> ToolCheck:
    """Whether this process may count its children's user-space events: root, or
    ``perf_event_paranoid`` <= 2 (3, a Debian addition, refuses every unprivileged user)."""
    try:
        level = int(PARANOID_PATH.read_text().strip())
    except (OSError, ValueError):
        return ToolCheck(
            "perf_event_open", False, f"{PARANOID_PATH} unreadable: no perf_event support",
            "Run on a Linux kernel built with perf events (CONFIG_PERF_EVENTS).",
        )  # fmt: skip
    if os.geteuid() == 0 or level <= 2:
        who = "root" if os.geteuid() == 0 else "this user"
        return ToolCheck("perf_event_open", True, f"perf_event_paranoid = {level} ({who})")
    return ToolCheck(
        "perf_event_open", False, f"perf_event_paranoid = {level}: unprivileged counting refused",
        "sudo sysctl kernel.perf_event_paranoid=2 (or grant CAP_PERFMON).",
    )  # fmt: skip


def linux_perf_counters() -> tuple[Counter, ...]:
    return load_catalogue().in_domain(CounterDomain.LINUX_PERF)


@lru_cache(maxsize=1)
def _probe_cached() -> Mapping[str, str | None]:
    counters = linux_perf_counters()
    try:
        launcher = ensure_launcher()
        with tempfile.TemporaryDirectory(prefix="aidge-perf-probe-") as tmp:
            report = Path(tmp) / "probe.json"
            argv = [str(launcher), "--probe", "-o", str(report)]
            for spec in event_specs(counters):
                argv += ["-e", spec]
            done = run_captured(argv, timeout_s=_PROBE_TIMEOUT_S)
            if done.returncode != 0:
                raise OSError(f"perf_run --probe exited {done.returncode}: {done.stderr[-300:]}")
            probe = parse_probe(report.read_text(encoding="utf-8"))
    except (DeployError, OSError, subprocess.SubprocessError) as exc:
        reason = getattr(exc, "message", None) or str(exc)
        why = f"the perf_run launcher could not probe this machine: {reason}"
        return MappingProxyType({c.name: why for c in counters})
    out: dict[str, str | None] = {}
    for counter in counters:
        out[counter.name] = probe.unavailable.get(counter.name)
        if out[counter.name] is None and counter.name not in probe.available:
            out[counter.name] = "not reported by the perf_run probe"
    return MappingProxyType(out)


def probe_available(counters: Iterable[Counter] | None = None) -> dict[str, str | None]:
    """Which counters this machine lets us open: name -> None (countable) or the reason.

    The probe of the whole catalogue runs once per process (the answer depends on the
    kernel, its PMU driver and ``perf_event_paranoid``, which do not change under us).
    """
    probed = _probe_cached()
    if counters is None:
        return dict(probed)
    return {c.name: probed.get(c.name, "not a linux-perf counter") for c in counters}


@dataclass(frozen=True)
class CountedRun:
    """A finished program run under the launcher, and what its report says.

    ``run`` carries the program's own exit status, signal and peak RSS when the launcher
    reported (``report``); ``report`` is None when the run timed out or the launcher was
    killed before writing it.
    """

    run: ProcessRun
    report: PerfRunReport | None

    @property
    def unavailable(self) -> Mapping[str, str]:
        return self.report.unavailable if self.report is not None else MappingProxyType({})


def run_with_counters(
    argv: Sequence[str],
    counters: Sequence[Counter],
    *,
    cwd: Path,
    timeout_s: float,
    stdout_path: Path,
    stderr_path: Path,
    report_path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> CountedRun:
    """Run ``argv`` under the launcher, counting ``counters`` (none: the launcher's defaults).

    Like ``connections.local_process.run_process``: output straight to files, own process
    group registered with the run (killed whole at the timeout or an interruption); never
    raises for the program's fate. The report goes to ``report_path`` (default: beside
    ``stdout_path``).
    """
    report = report_path or stdout_path.with_suffix(".launcher.json")
    report.unlink(missing_ok=True)
    run = run_process(
        perf_run_argv(str(ensure_launcher()), counters, argv, str(report)),
        cwd=cwd,
        timeout_s=timeout_s,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        env=env,
    )
    if run.timed_out or not report.is_file():
        return CountedRun(run, None)
    parsed = parse_perf_run_report(report.read_text(encoding="utf-8"))
    run = dataclasses.replace(
        run,
        argv=tuple(argv),
        returncode=parsed.exit_code,
        signal=parsed.signal,
        peak_rss_bytes=parsed.peak_rss_bytes,
    )
    return CountedRun(run, parsed)


@dataclass(frozen=True)
class PassFigures:
    """One counter pass's figures per inference, from the launcher's report."""

    totals: Mapping[str, float]
    running_ratio: Mapping[str, float]
    unavailable: Mapping[str, str]


def pass_figures(
    report: PerfRunReport | None, names: Sequence[str], inferences: int, missing: str
) -> PassFigures:
    """Counts of ``names`` per inference (whole-run count / ``inferences``) and their running
    ratio; every other requested counter unavailable with its reason (``missing`` when the
    launcher gave none: no report, or not in it). Host and SSH boards share this reading."""
    totals: dict[str, float] = {}
    ratios: dict[str, float] = {}
    unavailable: dict[str, str] = {}
    for name in names:
        scaled = report.scaled(name) if report is not None else None
        ratio = report.running_ratio if report is not None else None
        if scaled is not None and ratio is not None:
            totals[name] = scaled / inferences
            ratios[name] = ratio
        else:
            unavailable[name] = (
                report.unavailable.get(name, missing) if report is not None else missing
            )
    return PassFigures(totals, ratios, unavailable)


__all__ = [
    "CountedRun",
    "PassFigures",
    "linux_perf_counters",
    "pass_figures",
    "probe_available",
    "run_with_counters",
]
