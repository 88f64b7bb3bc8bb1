"""How export, build and emulation cost grow with model size: the four MLPerf Tiny models.

Each reference model (random weights of the published shape, ``aidge_deploy.mlperf``) is
exported for mps2-an386 (float32, benchmark kind, 1 warm-up + ``iterations`` timed
inferences, per-layer profiling on), built from an empty build cache and deployed twice: with
the timing model's QEMU plugin (``timing=model``, the default) and with bare QEMU
(``timing=cpi1``: no plugin). Export is wall time of ``export_model``; Build and Execute are
the deploy's own stage durations (Execute: the firmware's run and its UART capture, boot
excluded). Printed per model: MACs, the three times, each time per MMAC and its growth
against the smallest model's (1.0: linear in MACs; > 1: faster than linear).

Emulated MIPS: the run's guest instructions (the emulated_instructions figure per inference x
executed inferences) / Execute wall time; the same program runs under both, so the plugin's
MIPS / bare QEMU's is Execute(bare) / Execute(plugin) (goal >= 0.7 on ResNet-8). All times
are host wall clock of this machine (load-dependent; the shared 2-core machine's figures in
docs/mlperf-tiny.md say when they were taken). Run:
``python benchmarks/bench_model_scale.py [iterations]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

TARGET = "mps2-an386"


def main(iterations: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.environ["AIDGE_DEPLOY_CACHE_DIR"] = str(tmp / "cache")  # builds from scratch
        import aidge_deploy
        from aidge_deploy.mlperf.build import build_model
        from aidge_deploy.mlperf.models import MODELS
        from aidge_deploy.modelexport import ExportRequest, export_model

        rows = []
        for spec in MODELS.values():
            name = spec.name.value
            model = build_model(spec.name, tmp / f"{name}.onnx")
            started = time.monotonic()
            artifact = export_model(
                ExportRequest(
                    model=model,
                    target=TARGET,
                    out_dir=tmp / f"export_{name}",
                    nb_iterations=iterations,
                    nb_warmup=1,
                )
            )
            export_s = time.monotonic() - started
            runs = {}
            for timing in ("model", "cpi1"):
                config = aidge_deploy.DeployConfig(target=TARGET, timing=timing, run_timeout=1800)
                runs[timing] = aidge_deploy.deploy(
                    artifact, config, work_dir=tmp / f"run_{name}_{timing}"
                )
            plugin, bare = runs["model"], runs["cpi1"]
            build_s = plugin.stage_durations_ms["Build"] / 1e3
            exec_plugin = plugin.stage_durations_ms["Execute"] / 1e3
            exec_bare = bare.stage_durations_ms["Execute"] / 1e3
            metric = bare.metric("emulated_instructions")
            per_inference = float(metric.value) if metric and metric.value else float("nan")
            instructions = per_inference * (iterations + 1)
            rows.append((name, spec.macs, export_s, build_s, exec_plugin, exec_bare, instructions))
            print(f"  {name}: done", file=sys.stderr)

    base = rows[0] if rows[0][1] == min(r[1] for r in rows) else min(rows, key=lambda r: r[1])
    print(
        f"== {TARGET}, float32, random weights, 1 warm-up + {iterations} inferences; "
        f"host wall times =="
    )
    print(
        f"{'model':6} {'MMAC':>6} {'export s':>9} {'build s':>8} {'exec s':>8} "
        f"{'export s/MMAC':>14} {'build s/MMAC':>13} {'exec s/MMAC':>12} "
        f"{'growth exp/bld/exec':>20} {'MIPS plugin':>12} {'MIPS bare':>10} {'plugin/bare':>12}"
    )
    b_mmac = base[1] / 1e6
    b_per = [base[k] / b_mmac for k in (2, 3, 4)]
    for name, macs, export_s, build_s, exec_plugin, exec_bare, instructions in rows:
        mmac = macs / 1e6
        per = [export_s / mmac, build_s / mmac, exec_plugin / mmac]
        growth = "/".join(f"{p / q:.2f}" for p, q in zip(per, b_per, strict=True))
        mips_plugin = instructions / exec_plugin / 1e6
        mips_bare = instructions / exec_bare / 1e6
        print(
            f"{name:6} {mmac:6.2f} {export_s:9.2f} {build_s:8.2f} {exec_plugin:8.2f} "
            f"{per[0]:14.3f} {per[1]:13.3f} {per[2]:12.3f} {growth:>20} "
            f"{mips_plugin:12.1f} {mips_bare:10.1f} {mips_plugin / mips_bare:12.2f}"
        )
    ic = next(r for r in rows if r[0] == "ic")
    ratio = ic[5] / ic[4]
    verdict = "OK" if ratio >= 0.7 else "BELOW GOAL"
    print(
        f"ResNet-8 (ic): emulated MIPS with the timing plugin / bare QEMU = {ratio:.2f} "
        f"(goal >= 0.7) {verdict}"
    )
    print(
        "growth: each time per MMAC over the smallest model's (ad); 1.0 = linear in MACs. "
        "Export and build have a fixed part (the exporter's start, the BSP), so small models "
        "cost more per MMAC."
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
