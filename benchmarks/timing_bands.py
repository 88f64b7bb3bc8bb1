"""The measurements behind the timing models' uncertainty bands (``uncertainty`` in each
model's data file, docs/timing.md "Uncertainty").

Two parts, both deterministic:

* **The M4 and M55 models beside llvm-mca** (LLVM's ``ARMScheduleM4.td`` and
  ``ARMScheduleM55.td``), as ``mca_crosscheck.py`` does for the M7 and M33: LeNet-5 and the
  DS-CNN, int8 and float32, on mps2-an386 and mps3-an547, the cycle-weighted model ÷ llvm-mca
  over the hottest blocks.
* **netduinoplus2 against mps2-an386**: the same exports (same model, same code) estimated on
  both Cortex-M4 boards; their ratio is what the flash wait states cost without the ART
  accelerator, which the model does not have (the estimate errs high by up to that ratio).

Run: ``python benchmarks/timing_bands.py``.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any

import aidge_deploy
from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model
from common import modelzoo

MCA_BOARDS = {"mps2-an386": "cortex-m4", "mps3-an547": "cortex-m55"}
MODELS = {"LeNet-5": (modelzoo.lenet5, (1, 1, 28, 28)), "DS-CNN": (modelzoo.ds_cnn, (1, 1, 49, 10))}
BLOCKS = 5


def _export(model: Path, board: str, out: Path, dtype: str, shape: tuple[int, ...]) -> Path:
    export_model(
        ExportRequest(model, board, out, dtype=Dtype(dtype), kind=ApplicationKind.BENCHMARK,
                      nb_iterations=1, nb_warmup=0, inputs=(modelzoo.sample_input(shape),))
    )  # fmt: skip
    return out


#: Armv8.1-M low-overhead loop instructions llvm-mca 14 cannot read in objdump's form
_LOOP = ("le", "letp", "dls", "dlstp", "wls", "wlstp")


def _without_loop_branches(block: Any) -> Any:
    """The block without its low-overhead loop instructions, and the model's cycles without
    their cost (``cost.loop_end`` 1 each): what llvm-mca and the model both price."""
    kept = tuple(i for i in block.instructions if i.split()[0] not in _LOOP)
    dropped = len(block.instructions) - len(kept)
    return dataclasses.replace(block, instructions=kept, model_cycles=block.model_cycles - dropped)


def main() -> None:
    import mcacheck  # tests/, on the path once ``common`` is imported

    mcacheck.MCA_CPU.setdefault("cortex-m4", ("thumbv7em-none-eabihf", "cortex-m4"))
    mcacheck.MCA_CPU.setdefault("cortex-m55", ("thumbv8.1m.main-none-eabihf", "cortex-m55"))
    lines = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for model_name, (make, shape) in MODELS.items():
            model = make(tmp / f"{make.__name__}.onnx")
            for dtype in ("int8", "float32"):
                for board, core in MCA_BOARDS.items():
                    export = _export(model, board, tmp / f"{make.__name__}_{board}_{dtype}",
                                     dtype, shape)  # fmt: skip
                    elf = mcacheck.build_elf(export)
                    work = export / "mca"
                    work.mkdir()
                    blocks = mcacheck.block_profile(elf, board, work)
                    total = sum(b.runs * b.static_cycles for b in blocks)
                    hot = mcacheck.hot_blocks(elf, blocks, BLOCKS)
                    model_sum = mca_sum = share = 0.0
                    ratios = []
                    for found in hot:
                        block = _without_loop_branches(found)
                        mca = mcacheck.mca_cycles(block, core, work)
                        model_sum += block.runs * block.model_cycles
                        mca_sum += block.runs * mca
                        share += block.runs * block.model_cycles / total
                        ratios.append(block.model_cycles / mca)
                    lines.append(
                        f"| {model_name} {dtype} | {board} ({core}) | {share:.1%} | "
                        f"{min(ratios):.2f}-{max(ratios):.2f} | {model_sum / mca_sum:.2f} |"
                    )
                    print(lines[-1], file=sys.stderr, flush=True)
                cycles = {}
                for board in ("mps2-an386", "netduinoplus2"):
                    export = _export(model, board, tmp / f"{make.__name__}_{board}_{dtype}_run",
                                     dtype, shape)  # fmt: skip
                    result = aidge_deploy.deploy(export, aidge_deploy.DeployConfig())
                    metric = result.metric("estimated_cycles")
                    assert metric is not None and metric.value
                    cycles[board] = float(metric.value)
                ratio = cycles["netduinoplus2"] / cycles["mps2-an386"]
                lines.append(
                    f"| {model_name} {dtype} | netduinoplus2 ÷ mps2-an386 | "
                    f"{cycles['netduinoplus2']:,.0f} ÷ {cycles['mps2-an386']:,.0f} | | {ratio:.2f} |"
                )
                print(lines[-1], file=sys.stderr, flush=True)
    print("| model | board (core) | share of cycles | model ÷ llvm-mca per block | weighted |")
    print("|---|---|---:|---:|---:|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
