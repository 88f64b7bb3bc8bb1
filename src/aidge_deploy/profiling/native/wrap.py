"""A program under ``perf_run`` from a shell line, and the launcher's report taken back out.

Why this module exists: wherever the launcher runs through a shell — on an SSH board, in the
board's container, in a local container — the run is one ``exec`` line and the launcher's
report comes back mixed into the program's stderr. The SSH boards and the host's Docker
location share these two steps, so they live beside the launcher, not in either board family.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence

from aidge_deploy.errors import DeployError
from aidge_deploy.profiling.native import REPORT_PREFIX, PerfRunReport, parse_perf_run_report

_log = logging.getLogger(__name__)


def wrap_with_launcher(launcher: str | None, program: str, events: Sequence[str] = ()) -> str:
    """The shell words that run ``program`` (under the launcher when there is one).

    ``events`` are the launcher's ``-e name=type:config`` counter specs (none: its defaults).
    """
    if launcher is None:
        return f"exec {shlex.quote(program)}"
    args = " ".join(f"-e {shlex.quote(e)}" for e in events)
    return f"exec {shlex.quote(launcher)} {args + ' ' if args else ''}-- {shlex.quote(program)}"


def split_report(stderr: str) -> tuple[str, PerfRunReport | None]:
    """The program's own stderr, and the launcher's report line when it printed one."""
    kept = [line for line in stderr.splitlines(keepends=True) if not line.startswith(REPORT_PREFIX)]
    if len(kept) == len(stderr.splitlines(keepends=True)):
        return stderr, None
    try:
        report = parse_perf_run_report(stderr)
    except DeployError as exc:
        _log.warning("Ignoring an unreadable perf_run report: %s", exc.message)
        return "".join(kept), None
    return "".join(kept), report


__all__ = ["split_report", "wrap_with_launcher"]
