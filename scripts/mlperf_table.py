"""The README's table of the four MLPerf Tiny models on the emulated boards, float32 and int8.

Each reference model (random weights of the published shape, ``aidge_deploy.mlperf``: MACs and
parameters equal to the published counts) is exported for each board and dtype (benchmark
kind, 1 warm-up + 1 timed inference; the profiling build, whose cycle reads the estimate needs) and deployed; the row gives the
timing model's estimated cycles per inference with its band, cycles/MAC, and the fastest
published closed-division row of the same core and dtype (its engine and version, cycles/MAC
and the ratio estimate ÷ row). A board a model does not fit prints the refusal instead of a
figure (refused before the export as ``profile`` refuses it, else by the exporter or the
linker). Estimates are a model's output (provenance ``estimated``), not silicon: the ratio is a
comparison, never a verdict.

Run: ``python scripts/mlperf_table.py [--models kws,ic] [--boards mps2-an386] [--dtypes int8]``
(prints markdown; about 10-20 minutes for the whole table on a 2-core machine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BOARDS = ("mps2-an386", "mps3-an547")
DTYPES = ("float32", "int8")


@dataclass(frozen=True)
class Row:
    model: str
    board: str
    dtype: str
    #: the estimate per inference and its band ("" when the run gave none)
    cycles: float | None
    band: str
    cycles_per_mac: float | None
    #: the fastest published row of the same core and dtype, or why there is none
    published: str
    ratio: float | None
    #: why there is no figure (the board's refusal, the run's error)
    why: str = ""


def _core(board: str) -> str:
    from aidge_qemu_descriptors import get_board

    return str(get_board(board).cpu)


def measure(model: str, board: str, dtype: str, work: Path) -> Row:
    """One cell: export ``model`` for ``board`` in ``dtype``, deploy it, put its estimate
    beside the published rows."""
    import aidge_deploy
    from aidge_deploy.configcheck import check_run
    from aidge_deploy.errors import DeployError
    from aidge_deploy.mlperf.build import build_model
    from aidge_deploy.mlperf.models import MODELS, TinyModel
    from aidge_deploy.mlperf.published import beside_published
    from aidge_deploy.modelexport import Dtype, ExportRequest, export_model

    spec = MODELS[TinyModel(model)]
    onnx = build_model(spec.name, work / f"{model}.onnx")
    request = ExportRequest(
        model=onnx,
        target=board,
        out_dir=work / f"export-{model}-{board}-{dtype}",
        dtype=Dtype(dtype),
        nb_iterations=1,
        nb_warmup=1,
    )
    config = aidge_deploy.DeployConfig(target=board, run_timeout=1800)
    try:
        check_run(config, board, request=request)  # what profile refuses before it exports
        artifact = export_model(request)
        result = aidge_deploy.deploy(
            artifact, config, work_dir=work / f"run-{model}-{board}-{dtype}"
        )
    except DeployError as e:
        return Row(model, board, dtype, None, "", None, "", None, str(e).splitlines()[0])
    metric = result.metric("estimated_cycles")
    if metric is None or metric.value is None:
        why = metric.unavailable_reason if metric is not None else "the run gave no estimate"
        return Row(model, board, dtype, None, "", None, "", None, str(why))
    cycles = float(metric.value)
    band = metric.band.describe() if metric.band is not None else ""
    beside = beside_published(spec.name, _core(board), cycles, dtype)
    if not beside:
        published, ratio = f"none published for {_core(board)} ({dtype})", None
    else:
        best = beside[0]
        published = (
            f"{best.row.engine_text}, {best.row.board} {best.row.round}: "
            f"{best.row.cycles_per_mac:.2f} cycles/MAC"
            + ("" if best.row.dtype else " (dtype not stated)")
        )
        ratio = best.ratio
    return Row(model, board, dtype, cycles, band, cycles / spec.macs, published, ratio)


def table(rows: list[Row]) -> str:
    """The markdown table of ``rows``."""
    lines = [
        "| model | board | dtype | estimated cycles | cycles/MAC | fastest published (same core) | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if r.cycles is None:
            lines.append(f"| {r.model} | {r.board} | {r.dtype} | unavailable ({r.why}) | | | |")
            continue
        band = f" ({r.band})" if r.band else ""
        ratio = f"{r.ratio:.2f}×" if r.ratio is not None else "—"
        lines.append(
            f"| {r.model} | {r.board} | {r.dtype} | {r.cycles / 1e6:.3g} M{band} | "
            f"{r.cycles_per_mac:.2f} | {r.published} | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from aidge_deploy.mlperf.models import MODELS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(m.value for m in MODELS))
    parser.add_argument("--boards", default=",".join(BOARDS))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            for board in args.boards.split(","):
                for dtype in args.dtypes.split(","):
                    work = Path(tmp) / f"{model}-{board}-{dtype}"
                    work.mkdir()
                    rows.append(measure(model, board, dtype, work))
                    print(f"  {model} {board} {dtype}: done", file=sys.stderr)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
