"""The M7 and M33 timing models beside llvm-mca on the hot blocks of real models.

For LeNet-5 and a DS-CNN of the MLPerf Tiny shape, float32 and int8, on mps2-an500
(Cortex-M7) and mps2-an505 (Cortex-M33): the firmware runs once in QEMU with its core's model
and the plugin's block profile, and for the hottest blocks (by runs x cycles; llvm-mca 14
refuses IT blocks, which are skipped) the model's cycles for one pass are printed beside
Debian's ``llvm-mca`` for the same core, with the share of the run's cycles each block holds
and the cycle-weighted ratio. Deterministic. Run: ``python benchmarks/mca_crosscheck.py
[TABLE.md]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model
from common import modelzoo, print_table

BOARDS = {"mps2-an500": "cortex-m7", "mps2-an505": "cortex-m33"}
MODELS = {"LeNet-5": (modelzoo.lenet5, (1, 1, 28, 28)), "DS-CNN": (modelzoo.ds_cnn, (1, 1, 49, 10))}
BLOCKS = 5


def main(out: Path | None = None) -> None:
    import mcacheck  # tests/, on the path once ``common`` is imported

    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for model_name, (make, shape) in MODELS.items():
            model = make(tmp / f"{make.__name__}.onnx")
            for board, core in BOARDS.items():
                for dtype in ("int8", "float32"):
                    export = tmp / f"{make.__name__}_{board}_{dtype}"
                    export_model(
                        ExportRequest(model, board, export, dtype=Dtype(dtype),
                                      kind=ApplicationKind.BENCHMARK, nb_iterations=1,
                                      nb_warmup=0, inputs=(modelzoo.sample_input(shape),))
                    )  # fmt: skip
                    elf = mcacheck.build_elf(export)
                    work = export / "mca"
                    work.mkdir()
                    blocks = mcacheck.block_profile(elf, board, work)
                    total = sum(b.runs * b.static_cycles for b in blocks)
                    hot = mcacheck.hot_blocks(elf, blocks, BLOCKS)
                    weighted_model = weighted_mca = 0.0
                    for block in hot:
                        mca = mcacheck.mca_cycles(block, core, work)
                        share = block.runs * block.model_cycles / total
                        weighted_model += block.runs * block.model_cycles
                        weighted_mca += block.runs * mca
                        rows.append(
                            f"| {model_name} {dtype} | {board} ({core}) | "
                            f"`{mcacheck.name_of(elf, block.start)}` | "
                            f"{len(block.instructions)} | {share:.1%} | {block.model_cycles} | "
                            f"{mca:.0f} | {block.model_cycles / mca:.2f} |"
                        )
                        print(rows[-1], file=sys.stderr, flush=True)
                    rows.append(
                        f"| {model_name} {dtype} | {board} ({core}) | the {len(hot)} blocks, "
                        f"cycle-weighted | | {sum(b.runs * b.model_cycles for b in hot) / total:.1%}"
                        f" | | | {weighted_model / weighted_mca:.2f} |"
                    )
                    print(rows[-1], file=sys.stderr, flush=True)
    print_table(
        [
            "model",
            "board (core)",
            "block",
            "instructions",
            "share of the run's cycles",
            "model cycles",
            "llvm-mca cycles",
            "model / llvm-mca",
        ],
        ["---", "---", "---", "---:", "---:", "---:", "---:", "---:"],
        rows,
        out,
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
