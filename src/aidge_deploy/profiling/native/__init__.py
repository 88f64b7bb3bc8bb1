"""The ``perf_run`` launcher shipped as C source, and the reader of its JSON report.

Linux boards reached over SSH may have no Python; ``perf_run.c`` is compiled for them
(``gcc``, or ``aarch64-linux-gnu-gcc -static`` on the host) and wraps the program: it
counts perf events around it, measures its peak RSS cleanly (the program is forked from
the small launcher, so ``ru_maxrss`` is the program's own) and keeps its exit status.
This module builds the launcher's command line from catalogue counters and parses what
it prints, so the SSH targets and the host share one format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from aidge_deploy.connections.toolcache import compile_cached, find_c_compiler
from aidge_deploy.errors import CaptureError
from aidge_deploy.profiling.counters import Counter

#: prefix of the report line on stderr when no ``-o`` file is given
REPORT_PREFIX = "AIDGE_PERF_RUN "
REPORT_SCHEMA = "aidge-deploy.perf-run"
PROBE_SCHEMA = "aidge-deploy.perf-probe"


def perf_run_source() -> Path:
    """Path of ``perf_run.c`` inside the installed package."""
    return Path(str(resources.files("aidge_deploy.profiling.native").joinpath("perf_run.c")))


def compile_command(compiler: str, output: Path, *, static: bool = False) -> list[str]:
    """The compiler invocation that builds the launcher (``static`` for boards without libc)."""
    return [
        compiler,
        "-O2",
        *(["-static"] if static else []),
        "-o",
        str(output),
        str(perf_run_source()),
    ]


def ensure_launcher(
    compiler: str | None = None, *, static: bool = False, cache_root: Path | None = None
) -> Path:
    """The compiled ``perf_run`` launcher for this machine (or, with a cross ``compiler``, a board)."""
    cc = (
        find_c_compiler(compiler, purpose="the perf_run launcher") if compiler is None else compiler
    )
    flags = ["-O2", *(["-static"] if static else [])]
    return compile_cached("perf_run", [perf_run_source()], cc, flags, cache_root=cache_root)


def perf_run_argv(
    launcher: str, counters: Sequence[Counter], program: Sequence[str], report: str | None = None
) -> list[str]:
    """``launcher [-o report] -e name=type:config ... -- program...``."""
    argv = [launcher]
    if report is not None:
        argv += ["-o", report]
    for spec in event_specs(counters):
        argv += ["-e", spec]
    return [*argv, "--", *program]


def event_specs(counters: Sequence[Counter]) -> list[str]:
    """The launcher's ``name=type:config`` specs of ``counters`` (perf_event ones only)."""
    specs = []
    for counter in counters:
        if counter.event.perf_type is None or counter.event.perf_config is None:
            raise ValueError(f"{counter.name} is not a perf_event counter")
        specs.append(f"{counter.name}={counter.event.perf_type}:{counter.event.perf_config:#x}")
    return specs


@dataclass(frozen=True)
class PerfRunReport:
    """What ``perf_run`` reported about one program run.

    The counters of a run form one group, enabled at the program's exec: they share the
    enabled and running times. Every requested counter is either in ``counters`` (it
    counted: ``time_running_ns > 0``) or in ``unavailable`` with its reason — refused at
    open, never enabled (the program did not start) or never scheduled on the PMU.
    """

    exit_code: int | None  # None when killed by a signal
    signal: int | None
    peak_rss_bytes: int
    user_s: float
    system_s: float
    wall_s: float
    time_enabled_ns: int
    time_running_ns: int
    #: raw counts as read
    counters: Mapping[str, int]
    #: counter -> "ERRNO: reason"
    unavailable: Mapping[str, str]

    @property
    def running_ratio(self) -> float | None:
        """Fraction of the enabled time the group was on the PMU (below 1: multiplexed);
        None when nothing counted (then every counter is in ``unavailable``)."""
        if not self.counters or self.time_enabled_ns <= 0 or self.time_running_ns <= 0:
            return None
        return self.time_running_ns / self.time_enabled_ns

    def scaled(self, name: str) -> float | None:
        """The count of ``name`` extrapolated to the enabled time (multiplexing undone);
        None when it did not count (its reason is in ``unavailable``)."""
        raw = self.counters.get(name)
        if raw is None or self.time_running_ns <= 0:
            return None
        return raw * self.time_enabled_ns / self.time_running_ns


@dataclass(frozen=True)
class PerfProbe:
    """What ``perf_run --probe`` found: the events this machine lets us open, and why not."""

    available: tuple[str, ...]
    #: counter -> "ERRNO: reason"
    unavailable: Mapping[str, str]


def _parse_doc(doc: Mapping[str, Any]) -> PerfRunReport:
    if doc.get("schema") == PROBE_SCHEMA:
        raise CaptureError("A perf_run probe report, not a run report", hint="Use parse_probe.")
    if doc.get("schema") != REPORT_SCHEMA:
        raise CaptureError(
            f"Not a perf_run report (schema {doc.get('schema')!r})",
            hint="Rebuild the perf_run launcher from this aidge-deploy version.",
        )
    sig = int(doc["signal"])
    return PerfRunReport(
        exit_code=None if sig else int(doc["exit_code"]),
        signal=sig or None,
        peak_rss_bytes=int(doc["peak_rss_kb"]) * 1024,
        user_s=float(doc["user_s"]),
        system_s=float(doc["system_s"]),
        wall_s=float(doc["wall_s"]),
        time_enabled_ns=int(doc["time_enabled_ns"]),
        time_running_ns=int(doc["time_running_ns"]),
        counters=MappingProxyType({str(c["name"]): int(c["value"]) for c in doc["counters"]}),
        unavailable=MappingProxyType(
            {str(u["name"]): f"{u['errno']}: {u['reason']}" for u in doc["unavailable"]}
        ),
    )


def _report_doc(text: str) -> Mapping[str, Any]:
    candidates = [text.strip()] if text.lstrip().startswith("{") else []
    candidates += [
        line[len(REPORT_PREFIX) :] for line in text.splitlines() if line.startswith(REPORT_PREFIX)
    ]
    if not candidates:
        raise CaptureError(
            "No perf_run report found in the output",
            hint="The launcher did not finish (killed?) or its stderr was not captured.",
        )
    try:
        doc = json.loads(candidates[-1])
    except json.JSONDecodeError as exc:
        raise CaptureError(
            f"Malformed perf_run report: {exc}", hint="The report was truncated."
        ) from exc
    if not isinstance(doc, dict):
        raise CaptureError("Malformed perf_run report", hint="The report was truncated.")
    return doc


def parse_probe(text: str) -> PerfProbe:
    """Parse the report of ``perf_run --probe``."""
    doc = _report_doc(text)
    if doc.get("schema") != PROBE_SCHEMA:
        raise CaptureError(
            f"Not a perf_run probe report (schema {doc.get('schema')!r})",
            hint="Rebuild the perf_run launcher from this aidge-deploy version.",
        )
    return PerfProbe(
        available=tuple(str(n) for n in doc["available"]),
        unavailable=MappingProxyType(
            {str(u["name"]): f"{u['errno']}: {u['reason']}" for u in doc["unavailable"]}
        ),
    )


def parse_perf_run_report(text: str) -> PerfRunReport:
    """Parse a report file, or find the ``AIDGE_PERF_RUN`` line in captured stderr."""
    return _parse_doc(_report_doc(text))


__all__ = [
    "PROBE_SCHEMA",
    "REPORT_PREFIX",
    "PerfProbe",
    "PerfRunReport",
    "compile_command",
    "ensure_launcher",
    "event_specs",
    "parse_perf_run_report",
    "parse_probe",
    "perf_run_argv",
    "perf_run_source",
]
