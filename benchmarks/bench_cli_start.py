"""How long ``aidge-deploy --help`` takes, against a bare Python start in the same session.

``--help`` must not import ``aidge_core`` or matplotlib (a test guards it); what is left is
Python, typer and rich. Printed: the median wall time of ``repeats`` runs of the installed
console script (goal: under 0.3 s), its CPU time (user + system, which a busy machine does
not inflate: the verdict uses it when the machine is loaded) and the ratio to
``python -c pass`` measured alongside.
Run: ``python benchmarks/bench_cli_start.py [repeats]``.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from common import installed_env, median_of, timed

GOAL_S = 0.3


def script() -> list[str]:
    found = shutil.which("aidge-deploy") or str(Path(sys.executable).parent / "aidge-deploy")
    return [found]


def cpu_of(argv: list[str]) -> float:
    """User + system CPU seconds of one run of ``argv`` (a child of this process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, capture_output=True, timeout=60, env=installed_env())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(repeats: int) -> None:
    env = installed_env()

    def run(argv: list[str]) -> None:
        subprocess.run(argv, check=True, capture_output=True, timeout=60, env=env)

    help_argv = [*script(), "--help"]
    run(help_argv)  # warm the page cache and .pyc files
    bare = median_of([timed(lambda: run([sys.executable, "-c", "pass"])) for _ in range(repeats)])
    helps = median_of([timed(lambda: run(help_argv)) for _ in range(repeats)])
    cpu = median_of([cpu_of(help_argv) for _ in range(repeats)])
    load = os.getloadavg()[0]
    print("\n== aidge-deploy --help start-up ==")
    print(f"  {'python -c pass':<28} {bare * 1000:9.1f} ms wall")
    print(f"  {'aidge-deploy --help':<28} {helps * 1000:9.1f} ms wall, {cpu * 1000:.1f} ms CPU")
    print(f"  {'--help / bare python':<28} {helps / bare:9.2f}x")
    busy = load > (os.cpu_count() or 1)
    figure = cpu if busy else helps
    what = f"CPU (load {load:.1f}: wall time is queueing)" if busy else "wall"
    verdict = "OK" if figure <= GOAL_S else "OVER TARGET"
    print(f"  {'--help (' + what.split()[0] + ')':<28} {figure:9.3f} s   "
          f"(target <= {GOAL_S} s)  {verdict}  [{what}]")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
