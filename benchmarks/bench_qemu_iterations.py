"""Execute time of ``--iterations`` 100, 400 and 1600 on an emulated mps2-an386: linear in N.

The Cortex-M exporter's benchmark entry ran N x max(10, N) forwards (400 -> 8.1 s, 1600 ->
120 s of Execute for the tiny CNN); the emulated boards' own entry runs N. LeNet-5 (1.15 M
instructions an inference) is exported, built and deployed at each N; the Execute stage
(boot excluded: the firmware's run and its UART capture) is the median of ``repeats`` runs.
Linear means each inference costs the same whatever N: the cost per added inference between
100 and 400 and between 400 and 1600 must agree within 10 % (their ratio printed, goal
0.9-1.1), and Execute / N is printed beside it. The CPU time of the run's processes (QEMU,
reaped at the end of each deploy) is printed the same way: on a shared machine the wall
clock of an emulator depends on what else runs, its CPU time much less. The guest
instructions of each whole run (the timing model's plugin total, boot and output included)
are printed the same way: they are deterministic, so their ratio is the firmware's own
linearity, free of the machine's load (measured 1.000: 1,148,691 and 1,148,683 instructions
per added inference). Run: ``python benchmarks/bench_qemu_iterations.py [repeats]``.
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
from pathlib import Path

import aidge_deploy
from common import export_with_aidge, modelzoo

COUNTS = (100, 400, 1600)


def main(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model = modelzoo.lenet5(tmp / "lenet5.onnx")
        x = modelzoo.sample_input((1, 1, 28, 28))
        artifacts = {
            n: export_with_aidge(
                model,
                tmp / f"export_{n}",
                target="mps2-an386",
                kind="benchmark",
                dtype="float32",
                x=x,
                nb_iterations=n,
                nb_warmup=1,
            )
            for n in COUNTS
        }
        for artifact in artifacts.values():  # built once, outside the measure
            aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig())
        wall: dict[int, list[float]] = {n: [] for n in COUNTS}
        cpu: dict[int, list[float]] = {n: [] for n in COUNTS}
        instructions: dict[int, float] = {}
        for _ in range(repeats):  # the counts interleaved: the machine's load hits them alike
            for n in COUNTS:
                before = _children_cpu_ms()
                result = aidge_deploy.deploy(artifacts[n], aidge_deploy.DeployConfig())
                cpu[n].append(_children_cpu_ms() - before)
                assert result.timings is not None and len(result.timings) == n
                wall[n].append(result.stage_durations_ms["Execute"])
                assert result.log_path is not None
                instructions[n] = _run_instructions(result.log_path.parent / "timing.trace")
        for n in COUNTS:
            runs = ", ".join(f"{v:.0f}" for v in wall[n])
            print(f"  N = {n:5d}: Execute runs {runs} ms")
        execute_ms = {n: statistics.median(v) for n, v in wall.items()}
        cpu_ms = {n: statistics.median(v) for n, v in cpu.items()}
        print(f"\n== mps2-an386, LeNet-5, median of {repeats} ==")
        _linearity("Execute stage (wall)", execute_ms)
        _linearity("QEMU CPU time", cpu_ms)
        _linearity("guest instructions (whole run)", instructions, unit="instr", scale=1)


def _run_instructions(trace: Path) -> float:
    """The run's guest instructions: the plugin's total line (``T <instructions> ...``)."""
    totals = [line for line in trace.read_text().splitlines() if line.startswith("T ")]
    return float(totals[-1].split()[1])


def _children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1e3


def _linearity(title: str, ms: dict[int, float], unit: str = "ms", scale: int = 3) -> None:
    a, b, c = COUNTS
    print(f"  {title}:")
    for n in COUNTS:
        print(
            f"    N = {n:5d}  {ms[n]:12.{min(scale, 1)}f} {unit}   {ms[n] / n:12.{scale}f} {unit}/inference"
        )
    low = (ms[b] - ms[a]) / (b - a)
    high = (ms[c] - ms[b]) / (c - b)
    print(
        f"    per added inference, N {a}->{b}: {low:.{scale}f} {unit};  {b}->{c}: {high:.{scale}f} {unit}"
    )
    ratio = high / low
    verdict = (
        "OK"
        if 0.9 <= ratio <= 1.1
        else "below (added inferences got cheaper)"
        if ratio < 0.9
        else "OVER TARGET"
    )
    print(f"    ratio {b}->{c} / {a}->{b}   {ratio:7.3f}   (goal 0.9-1.1: linear)  {verdict}")
    print(f"    {c} / {a} iterations: {ms[c] / ms[a]:6.2f}x ({unit}) for {c // a}x N")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
