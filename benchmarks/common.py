"""Shared helpers of the benchmarks: real exports made on the spot, timing by medians."""

from __future__ import annotations

import compileall
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import modelzoo  # noqa: E402
from conftest import export_with_aidge  # noqa: E402


def make_export(tmp: Path, kind: str = "benchmark", target: str = "host", **app: object) -> object:
    model = modelzoo.tiny_cnn(tmp / "tiny_cnn.onnx")
    x = modelzoo.sample_input((1, 3, 4, 4))
    return export_with_aidge(
        model,
        tmp / f"export_{target}_{kind}",
        target=target,
        kind=kind,
        dtype="float32",
        x=x,
        **app,
    )


def installed_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI process measured as a user runs it: with the package's
    bytecode compiled. An installed package has its ``.pyc`` files; a source checkout run
    under ``PYTHONDONTWRITEBYTECODE`` (as this machine's environment sets it) would instead
    recompile every module of ``aidge_deploy`` it imports on each start (~80 modules for a
    run, 0.3-0.4 s of CPU), a cost no user pays. The sources of the distribution's packages
    are compiled here, once."""
    import importlib.util

    for package in ("aidge_deploy", "aidge_qemu_descriptors", "aidge_qemu_boards"):
        spec = importlib.util.find_spec(package)  # found, not imported (no Aidge import)
        folders = (spec.submodule_search_locations or []) if spec is not None else []
        for folder in folders:
            compileall.compile_dir(folder, quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_of(samples: list[float]) -> float:
    return statistics.median(samples)


def report(
    title: str, rows: list[tuple[str, float]], ratios: list[tuple[str, float, float]]
) -> None:
    print(f"\n== {title} ==")
    for name, seconds in rows:
        print(f"  {name:<28} {seconds * 1000:9.1f} ms")
    for name, ratio, target in ratios:
        verdict = "OK" if ratio <= target else "OVER TARGET"
        print(f"  {name:<28} {ratio:9.3f}x   (target <= {target}x)  {verdict}")


def print_table(header: list[str], align: list[str], rows: list[str], out: Path | None) -> None:
    """Print a markdown table last on stdout (Aidge's exporter prints there too: the table is
    what ends the output), and write it to ``out`` when given."""
    table = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|", *rows]
    print("\n".join(table))
    if out is not None:
        out.write_text("\n".join(table) + "\n", encoding="utf-8")
