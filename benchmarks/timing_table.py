"""docs/timing.md's table of the emulated boards' timing models: three models on every board.

For each board and model: emulated instructions per inference, the CPI = 1 time
(``--timing cpi1``), the timing model's estimated cycles and time, and the implied CPI
(estimated cycles / instructions) per inference and per layer. Every figure is deterministic
(QEMU under a fixed icount shift), so this prints the same table on any machine. Run:
``python benchmarks/timing_table.py [TABLE.md]`` (it exports, builds and runs fifteen
firmwares).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import aidge_deploy
from common import export_with_aidge, modelzoo, print_table

BOARDS = ("mps2-an386", "netduinoplus2", "mps2-an500", "mps2-an505", "mps3-an547")
MODELS: dict[str, tuple[Any, tuple[int, ...]]] = {
    "tiny_cnn": (modelzoo.tiny_cnn, (1, 3, 4, 4)),
    "lenet (16x16)": (modelzoo.lenet, (1, 1, 16, 16)),
    "LeNet-5 (28x28)": (modelzoo.lenet5, (1, 1, 28, 28)),
}


def _short(layer: str) -> str:
    """``_0_PadConvAct_0`` -> ``PadConvAct``."""
    parts = layer.strip("_").split("_")
    return parts[1] if len(parts) >= 3 else layer


def main(out: Path | None = None) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for model_name, (make, shape) in MODELS.items():
            model = make(tmp / f"{make.__name__}.onnx")
            x = modelzoo.sample_input(shape)
            for board in BOARDS:
                artifact = export_with_aidge(
                    model,
                    tmp / f"{make.__name__}_{board}",
                    target=board,
                    kind="benchmark",
                    dtype="float32",
                    x=x,
                    nb_iterations=5,
                    nb_warmup=1,
                )
                modelled = aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig())
                cpi1 = aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig(timing="cpi1"))
                instr = modelled.metric("emulated_instructions")
                cycles = modelled.metric("estimated_cycles")
                latency = modelled.metric("latency")
                old = cpi1.metric("latency")
                assert instr and cycles and latency and old
                assert instr.value and cycles.value and latency.value and old.value
                layers = ", ".join(
                    f"{_short(layer.name)} {layer.counters['estimated_cycles'] / layer.counters['emulated_instructions']:.2f}"
                    for layer in modelled.layers
                    if layer.counters.get("emulated_instructions")
                )
                label = (modelled.metrics["timing_model"] or {}).get("model", "")
                rows.append(
                    f"| {model_name} | {board} ({label.split()[0]}) | {instr.value:,.0f} | "
                    f"{old.value:.3f} ms | {cycles.value:,.0f} | {latency.value:.3f} ms | "
                    f"{cycles.value / instr.value:.2f} | {layers} |"
                )
                print(rows[-1], file=sys.stderr, flush=True)
    print_table(
        [
            "model",
            "board (model)",
            "instructions / inference",
            "time at CPI = 1",
            "estimated cycles",
            "estimated time",
            "CPI",
            "CPI per layer",
        ],
        ["---", "---", "---:", "---:", "---:", "---:", "---:", "---"],
        rows,
        out,
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
