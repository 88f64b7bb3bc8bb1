"""``profile MODEL --targets host,mps2-an386,mps3-an547,netduinoplus2`` against four single runs.

Baseline: the four single-target ``profile`` commands one after the other (what a user did
before ``--targets``), each a CLI process as a user runs it. Measured: the one command with
``--targets``, which runs the emulated boards side by side (up to the cores) and the host
benchmark alone. Both with the exports and builds already cached (a first pass warms them),
so the figure is the orchestration, not Aidge's exporter. Target: wall time below the sum
of the four single runs (ratio < 1). Run: ``python benchmarks/bench_profile_targets.py
[repeats]``; under others' load, run it a few times and report the spread.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from common import installed_env, median_of, modelzoo, report, timed

TARGETS = ("host", "mps2-an386", "mps3-an547", "netduinoplus2")


def profile(env: dict[str, str], model: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aidge_deploy.cli.main", "profile", str(model),
         "--iterations", "5", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"profile {' '.join(args)} failed:\n{done.stderr[-2000:]}")


def main(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = installed_env(AIDGE_DEPLOY_CACHE_DIR=str(tmp / "cache"), COLUMNS="120")
        model = modelzoo.lenet(tmp / "lenet.onnx")
        profile(env, model, "--targets", ",".join(TARGETS))  # exports and builds, once
        singles, together = [], []
        for i in range(repeats):

            def four_single_runs() -> None:
                for target in TARGETS:
                    profile(env, model, "--target", target)

            def one_multi_target_run() -> None:
                profile(env, model, "--targets", ",".join(TARGETS))

            # alternate the order so a change of load favours neither side
            order = [(four_single_runs, singles), (one_multi_target_run, together)]
            for fn, out in order[:: -1 if i % 2 else 1]:
                out.append(timed(fn))
        s, t = median_of(singles), median_of(together)
        report(
            f"lenet on {len(TARGETS)} targets, cached exports, median of {repeats}",
            [("4 single-target profiles", s), ("profile --targets (4)", t)],
            [("--targets / sum of singles", t / s, 1.0)],
        )
        print(f"  spread: singles {min(singles):.2f}-{max(singles):.2f} s, "
              f"--targets {min(together):.2f}-{max(together):.2f} s")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
