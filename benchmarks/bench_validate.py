"""``aidge-deploy validate``: its caches, and its targets run at the same time.

1. A second ``validate`` of an unchanged model, as a ratio of the first: the first starts
   from an empty cache (the model is exported for each target and built), the second
   reuses the exports (export cache) and the builds (build cache), so only the runs and
   the reference are left. Target: second <= 0.20x first.
2. Four targets in one ``validate`` against the sum of four single-target ``validate`` runs
   (all caches warm, so what is measured is the runs): the targets run at the same time
   (``multitarget``: emulated boards in parallel up to the cores). Target: < 1.0x (printed
   with the cores this machine gave).
3. ``validate --inputs`` of 28 inputs on host and mps2-an386, each from an empty cache: one
   export and build per target, every further input a patched copy of the built program
   (the default), against ``--build-per-input`` (an export and a build per input, the
   behaviour before). Target: one build / per input <= 0.20x (one run of each: the
   per-input path is minutes).

The real CLI in its own process (bytecode compiled, as installed), medians of ``repeats``;
wall time, and CPU time of the CLI and everything it waited for. Run:
``python benchmarks/bench_validate.py [repeats] [sections, e.g. 3]``.
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

CACHE_TARGET = 0.20
CONCURRENCY_TARGET = 1.0
INPUTS_TARGET = 0.20
NB_INPUTS = 28
FOUR = ("host", "mps2-an386", "mps3-an547", "netduinoplus2")


def validate(model: Path, cache: Path, targets: str, *extra: str) -> tuple[float, float]:
    """Wall and CPU seconds of one ``validate`` with ``cache`` as the cache root."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    cli = [sys.executable, "-m", "aidge_deploy.cli.main", "validate"]
    subprocess.run(
        [*cli, str(model), "--targets", targets, "--json", *extra],
        check=True,
        capture_output=True,
        env=installed_env(AIDGE_DEPLOY_CACHE_DIR=str(cache)),
        timeout=1800,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def many_inputs(tmp: Path) -> None:
    """Section 3: 28 inputs through one build per target against a build per input."""
    import numpy as np

    model = modelzoo.conv_pool_classifier(tmp / "classifier.onnx", seed=7)
    folder = tmp / "inputs"
    folder.mkdir()
    rng = np.random.default_rng(4)
    np.savez(folder / "x.npz", *rng.uniform(-1, 1, (NB_INPUTS, 1, 1, 6, 6)).astype(np.float32))
    targets = "host,mps2-an386"
    one, one_cpu = validate(model, tmp / "cache-one", targets, "--inputs", str(folder))
    per, per_cpu = validate(
        model, tmp / "cache-per", targets, "--inputs", str(folder), "--build-per-input"
    )
    report(
        f"validate --inputs ({NB_INPUTS} inputs) --targets {targets}, empty caches: one "
        f"build per target vs a build per input ({len(os.sched_getaffinity(0))} cores, "
        f"load {os.getloadavg()[0]:.1f})",
        [
            ("one build, wall", one),
            ("build per input, wall", per),
            ("one build, CPU", one_cpu),
            ("build per input, CPU", per_cpu),
        ],
        [
            ("one build / per input, wall", one / per, INPUTS_TARGET),
            ("one build / per input, CPU", one_cpu / per_cpu, INPUTS_TARGET),
        ],
    )


def main(repeats: int, sections: str = "123") -> None:
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        if "3" in sections:
            many_inputs(Path(tmp))
        if "1" not in sections and "2" not in sections:
            return
        model = modelzoo.two_head_mlp(Path(tmp) / "model.onnx", seed=3)
        firsts, seconds = [], []
        for i in range(repeats):
            cache = Path(tmp) / f"cache{i}"
            firsts.append(validate(model, cache, "host,mps2-an386"))
            seconds.append(validate(model, cache, "host,mps2-an386"))
        first, second = median_of([w for w, _ in firsts]), median_of([w for w, _ in seconds])
        first_cpu = median_of([c for _, c in firsts])
        second_cpu = median_of([c for _, c in seconds])
        report(
            "validate --targets host,mps2-an386: first run vs unchanged second run (CLI)",
            [
                ("first, wall", first),
                ("second (cached), wall", second),
                ("first, CPU", first_cpu),
                ("second (cached), CPU", second_cpu),
            ],
            [
                ("second / first, wall", second / first, CACHE_TARGET),
                ("second / first, CPU", second_cpu / first_cpu, CACHE_TARGET),
            ],
        )

        warm = Path(tmp) / "warm"
        validate(model, warm, ",".join(FOUR))  # every export and build in the cache
        singles: dict[str, list[float]] = {t: [] for t in FOUR}
        together: list[float] = []
        for _ in range(repeats):
            for target in FOUR:
                singles[target].append(validate(model, warm, target)[0])
            together.append(validate(model, warm, ",".join(FOUR))[0])
        single = {t: median_of(v) for t, v in singles.items()}
        total = sum(single.values())
        both = median_of(together)
        report(
            f"validate on four targets at once vs one after the other "
            f"({len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f})",
            [*((f"{t} alone", s) for t, s in single.items()), ("sum of the four", total),
             ("four in one validate", both)],
            [("together / sum", both / total, CONCURRENCY_TARGET)],
        )  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2, *sys.argv[2:3])
