"""Estimated cycles do not move with code layout: one export, two paddings, the same figures.

QEMU splits straight-line code into two translation blocks where a 1 KB page ends, and
QEMU 7.2 sized an instruction ending 2 bytes before a page end with the halfword peeked
past it: an unrelated edit that moved the code could then move the estimate by up to 28 %
(LeNet-5 int8 on mps3-an547: 1,499,085 cycles with 256 bytes of padding, 1,189,461
without). Here the same export is built as is and with its code moved by a padding at the
start of ``.text`` (a multiple of 8 bytes: every instruction keeps its alignment, so what
the models price by alignment does not change), and both deploys must give the same
estimated cycles, per inference and per layer, on every board with a timing model.
(The microbenchmark of one straddling instruction is in test_timing_model.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import aidge_deploy
import modelzoo
from aidge_deploy.config import DeployConfig
from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model
from aidge_deploy.profiling.timing import model_for_cpu
from aidge_qemu_descriptors import list_boards
from envparts import missing

pytestmark = [pytest.mark.qemu, pytest.mark.slow]

BOARDS = [b.name for b in list_boards() if model_for_cpu(b.cpu) is not None]
#: bytes the second layout moves the code by: the size of the instructions between
#: ``.text``'s start and the model's code changes by this much after an unrelated edit
PAD = 256
_TEXT_START = "    .text :\n    {\n        . = ALIGN(4);\n"


def _padded(export: Path, out: Path, pad: int) -> Path:
    """A copy of ``export`` whose code starts ``pad`` bytes further (its linker script)."""
    shutil.copytree(export, out)
    script = out / "bsp" / "sections.ld"
    text = script.read_text()
    assert _TEXT_START in text
    script.write_text(text.replace(_TEXT_START, _TEXT_START + f"        . = . + {pad};\n"))
    return out


def _figures(result: Any) -> tuple[Any, ...]:
    """Estimated cycles of each timed inference and per layer, and the instructions."""
    per_layer = {layer.name: dict(layer.counters) for layer in result.layers}
    return result.metrics["estimated_cycles"], per_layer, result.metric("emulated_instructions")


@pytest.fixture(scope="module")
def lenet5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        missing("qemu-system-arm or arm-none-eabi-gcc is not installed")
    return modelzoo.lenet5(tmp_path_factory.mktemp("models") / "lenet5.onnx")


@pytest.mark.parametrize("board", BOARDS)
def test_moving_the_code_moves_no_estimate(board: str, lenet5: Path, tmp_path: Path) -> None:
    request = ExportRequest(
        lenet5, board, tmp_path / "export", dtype=Dtype.INT8, kind=ApplicationKind.BENCHMARK,
        nb_iterations=3, nb_warmup=1,
    )  # fmt: skip
    export_model(request)
    padded = _padded(tmp_path / "export", tmp_path / "padded", PAD)
    as_is = aidge_deploy.deploy(str(tmp_path / "export"), DeployConfig())
    moved = aidge_deploy.deploy(str(padded), DeployConfig())
    before, after = as_is.metrics["binary"], moved.metrics["binary"]
    assert after["text_bytes"] >= before["text_bytes"] + PAD  # the code did move
    assert as_is.metric("estimated_cycles") is not None
    assert _figures(moved) == _figures(as_is)


def test_compare_of_two_layouts_says_no_change(lenet5: Path, tmp_path: Path) -> None:
    """The bundles of two layouts of one export: the estimates carry their model's band in
    summary.json and the report, and ``compare`` calls them no change (same instructions,
    each inside the other's band), in its JSON and on the terminal."""
    from typer.testing import CliRunner

    from aidge_deploy.cli.main import app
    from aidge_deploy.report.compare import compare_bundles
    from aidge_deploy.report.reader import read_summary

    board = "mps2-an386"
    request = ExportRequest(
        lenet5, board, tmp_path / "export", dtype=Dtype.INT8, kind=ApplicationKind.BENCHMARK,
        nb_iterations=3, nb_warmup=1,
    )  # fmt: skip
    export_model(request)
    padded = _padded(tmp_path / "export", tmp_path / "padded", PAD)
    bundles = tmp_path / "as_is", tmp_path / "moved"
    aidge_deploy.deploy(str(tmp_path / "export"), DeployConfig(report_dir=bundles[0]))
    aidge_deploy.deploy(str(padded), DeployConfig(report_dir=bundles[1]))
    summary = read_summary(bundles[0])
    cycles = summary.metrics["estimated_cycles"]
    assert cycles.band is not None and "M4 timing model, integer code" in cycles.band.basis
    assert cycles.formatted().endswith("cycles (±10 %)")  # 3 significant digits, the band
    latency = summary.metrics["latency"]
    assert latency.band == cycles.band  # the time is made of the estimated cycles
    layer = next(iter(summary.layers))
    assert layer.cells["estimated_cycles"].band == cycles.band
    html = (bundles[0] / "report.html").read_text(encoding="utf-8")
    assert "the model&#x27;s band" in html or "the model's band" in html
    assert 'data-band="±10 %"' in html

    comparison = compare_bundles(*bundles)
    totals = {d.key: d for d in comparison.totals}
    assert totals["estimated_cycles"].no_change is not None
    assert totals["latency"].no_change is not None
    assert all(d.no_change for d in comparison.layer_deltas["estimated_cycles"])
    payload = comparison.as_dict()
    entry = next(t for t in payload["totals"] if t["key"] == "estimated_cycles")
    assert entry["no_change"] is True and entry["band"]["base"][0] < entry["base"]
    run = CliRunner().invoke(app, ["compare", str(bundles[0]), str(bundles[1])])
    assert run.exit_code == 0, run.output
    assert "no change" in run.output
