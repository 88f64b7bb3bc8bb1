"""The programs a run starts keep its CPU priority, even in sessions of their own.

Each case runs a real Python child in a session of its own (as the CLI under a shell, or a
farm job's runner, is) that starts a program through ``run_captured`` (a session of its
own again, as every program of a run). The program prints its nice value and its session
group's. Where the kernel groups CPU time by session (autogroup), the group's value is
what orders the program against other sessions: it must carry the run's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = """
import os, sys
from aidge_deploy.connections.local_process import run_captured
from aidge_deploy.cpupriority import lower_priority
if sys.argv[1] == "lower":
    lower_priority(7)
shown = run_captured(["sh", "-c", "nice; cat /proc/self/autogroup 2>/dev/null; true"], timeout_s=60)
print(shown.stdout, end="")
"""

AUTOGROUP = Path("/proc/self/autogroup").exists()
#: the priority the suite itself runs at (`nice ./run.sh test` is a user's right): what each
#: case expects is relative to it
BASE = os.nice(0)


def _program_priority(prefix: list[str], how: str) -> tuple[int, int | None]:
    out = subprocess.run(
        [*prefix, sys.executable, "-c", CHILD, how],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
        check=True,
    ).stdout.split("\n")
    group = int(out[1].split()[-1]) if AUTOGROUP else None
    return int(out[0]), group


@pytest.mark.parametrize(
    ("prefix", "how", "expected"),
    [
        ([], "as is", BASE),  # a normal run changes nothing
        (["nice", "-n", "5"], "as is", min(BASE + 5, 19)),  # `nice aidge-deploy ...`
        ([], "lower", max(BASE, 7)),  # a farm job's runner (``lower_priority(job_nice)``)
    ],
    ids=["normal", "user-nice", "farm-job"],
)
def test_a_started_program_keeps_the_runs_priority(
    prefix: list[str], how: str, expected: int
) -> None:
    nice, group = _program_priority(prefix, how)
    assert nice == expected
    if AUTOGROUP:
        assert group == expected, "the program's session group lost the run's priority"
