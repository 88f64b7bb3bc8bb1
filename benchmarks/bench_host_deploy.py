"""Cold and warm ``deploy()`` on the host against the bare baseline, in one process.

Bare baseline: the same CMake configure + build + run the host target performs, done
directly with subprocess. Cold: deploy() with an empty build cache. Warm: deploy() of the
unchanged export (cached build). Targets: cold <= 1.10x bare, warm <= 0.20x cold.
Run: ``python benchmarks/bench_host_deploy.py [repeats]``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aidge_deploy
from common import make_export, median_of, report, timed


def bare(export_dir: Path, build_dir: Path) -> None:
    jobs = str(os.cpu_count() or 1)
    subprocess.run(
        [
            "cmake",
            "-S",
            str(export_dir),
            "-B",
            str(build_dir),
            "-DAIDGE_CMP=false",
            "-DCMAKE_BUILD_TYPE=Release",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    subprocess.run(
        ["cmake", "--build", str(build_dir), "--parallel", jobs],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [str(build_dir / "run_export")],
        cwd=export_dir,
        check=True,
        capture_output=True,
        timeout=120,
    )


def main(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.environ["AIDGE_DEPLOY_CACHE_DIR"] = str(tmp / "cache")
        artifact = make_export(tmp, nb_iterations=20)
        export_dir = Path(artifact.path)  # type: ignore[attr-defined]
        # one-time tool set-up (the perf_run launcher), not part of deploying an export
        aidge_deploy.deploy(export_dir, aidge_deploy.DeployConfig(build_dir=tmp / "setup"))
        bare_s, cold_s, warm_s = [], [], []
        for i in range(repeats):
            bdir = tmp / f"bare{i}"
            os.environ["AIDGE_DEPLOY_CACHE_DIR"] = str(tmp / f"cache{i}")
            # alternate the order so that neither side always runs on a warmer machine
            if i % 2:
                bare_s.append(timed(lambda bdir=bdir: bare(export_dir, bdir)))
            cold_s.append(
                timed(lambda: aidge_deploy.deploy(export_dir, aidge_deploy.DeployConfig()))
            )
            warm_s.append(
                timed(lambda: aidge_deploy.deploy(export_dir, aidge_deploy.DeployConfig()))
            )
            if not i % 2:
                bare_s.append(timed(lambda bdir=bdir: bare(export_dir, bdir)))
            shutil.rmtree(bdir, ignore_errors=True)
        b, c, w = median_of(bare_s), median_of(cold_s), median_of(warm_s)
        report(
            f"host deploy, median of {repeats}",
            [("bare configure+build+run", b), ("deploy() cold", c), ("deploy() warm", w)],
            [("cold / bare", c / b, 1.10), ("warm / cold", w / c, 0.20)],
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
