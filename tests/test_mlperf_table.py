"""scripts/mlperf_table.py, the README's four-model table: a real run of its smallest cell.

The AD autoencoder (random weights of the published shape), int8, on mps2-an386: the row
holds the timing model's estimate with its band, cycles/MAC equal to the estimate over the
published MACs, and the fastest published Cortex-M4 row with the ratio of the two.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envparts import needs

needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm or arm-none-eabi-gcc is not installed",
)

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mlperf_table.py"


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_the_table_puts_an_estimate_beside_the_published_row(tmp_path: Path) -> None:
    from aidge_deploy.mlperf.models import MODELS, TinyModel
    from aidge_deploy.mlperf.published import beside_published

    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--models", "ad", "--boards", "mps2-an386",
         "--dtypes", "int8"],
        capture_output=True, text=True, timeout=1800, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("| model | board | dtype | estimated cycles | cycles/MAC")
    assert len(lines) == 3, done.stdout
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:3] == ["ad", "mps2-an386", "int8"]
    found = re.fullmatch(r"([\d.]+) M \((.+)\)", cells[3])
    assert found is not None, cells[3]
    cycles = float(found.group(1)) * 1e6
    assert "%" in found.group(2)  # the band the timing model states
    macs = MODELS[TinyModel.AD].macs
    assert float(cells[4]) == pytest.approx(cycles / macs, rel=0.01)
    best = beside_published(TinyModel.AD, "cortex-m4", cycles, "int8")[0]
    assert cells[5].startswith(f"{best.row.engine_text}, {best.row.board} {best.row.round}")
    assert float(cells[6].rstrip("×")) == pytest.approx(cycles / best.row.cycles, rel=0.01)
