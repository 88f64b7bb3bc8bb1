"""A second ``aidge-deploy profile`` of an unchanged model, as a ratio of the first.

First run: an empty cache, so the model is exported with Aidge, built and run. Second run:
the same command again; the export comes from the export cache and the build from the
build cache, so only the run is left (and the start-up of Python and Aidge). Both are the
real CLI in its own process, measured in the same session, medians of ``repeats`` pairs.
Printed: wall time, and CPU time (user + system of the CLI and everything it waited for:
compilers included), which a loaded machine does not inflate; on a machine busier than
its core count the verdict uses the CPU ratio. Target: second <= 0.20x first. The second
run never imports ``aidge_core`` on the host (0.7-0.9 s of CPU, most of it matplotlib.pyplot,
which ``aidge_core.hw_model`` imports): the export is read as plain data
(``aidge_deploy.exportspec``) and the host's hardware model is not needed;
``tests/test_cli_checks.py`` keeps it so. Its floor is now Python, typer and our pipeline's
modules (~0.4 s of CPU) around a run of a few tens of ms. On an emulated board neither: the
board's clock and memories are read from its descriptor (``aidge_qemu_descriptors``, which
the plug-in ``aidge_qemu_boards`` builds the hardware model from), so its run imports
neither the plug-in nor Aidge; the same test keeps that so, and checks the figures match.
The CLI runs with the package's bytecode compiled, as installed (``common.installed_env``).
Run: ``python benchmarks/bench_profile_cache.py [repeats] [host,mps2-an386]``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import installed_env, median_of, modelzoo, report

TARGET = 0.20


def profile(model: Path, cache: Path, target: str) -> tuple[float, float]:
    """Wall and CPU seconds of one ``profile`` run with ``cache`` as the cache root."""
    cli = [sys.executable, "-m", "aidge_deploy.cli.main"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [*cli, "profile", str(model), "--target", target, "--iterations", "5", "--json"],
        check=True,
        capture_output=True,
        env=installed_env(AIDGE_DEPLOY_CACHE_DIR=str(cache)),
        timeout=900,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(repeats: int, targets: list[str]) -> None:
    for target in targets:
        measure(repeats, target)


def measure(repeats: int, target: str) -> None:
    firsts, seconds = [], []
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        model = modelzoo.tiny_cnn(Path(tmp) / "tiny_cnn.onnx")
        for i in range(repeats):
            cache = Path(tmp) / f"cache{i}"
            firsts.append(profile(model, cache, target))
            seconds.append(profile(model, cache, target))
    first_wall, second_wall = median_of([w for w, _ in firsts]), median_of([w for w, _ in seconds])
    first_cpu, second_cpu = median_of([c for _, c in firsts]), median_of([c for _, c in seconds])
    load = os.getloadavg()[0]
    busy = load > (os.cpu_count() or 1)
    report(
        f"profile tiny_cnn --target {target}: first run vs unchanged second run (CLI)",
        [
            ("first, wall", first_wall),
            ("second (cached), wall", second_wall),
            ("first, CPU", first_cpu),
            ("second (cached), CPU", second_cpu),
        ],
        [
            ("second / first, wall", second_wall / first_wall, TARGET),
            ("second / first, CPU", second_cpu / first_cpu, TARGET),
        ],
    )
    basis = f"CPU (load {load:.1f} > {os.cpu_count()} cores)" if busy else "wall"
    ratio = second_cpu / first_cpu if busy else second_wall / first_wall
    print(f"  verdict on {basis}: {ratio:.3f}x {'OK' if ratio <= TARGET else 'OVER TARGET'}")


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 3,
        sys.argv[2].split(",") if len(sys.argv) > 2 else ["host", "mps2-an386"],
    )
