"""The Cortex-M7 and Cortex-M33 boards (mps2-an500, mps2-an505) on real models, end to end.

LeNet and a DS-CNN of the MLPerf Tiny keyword-spotting shape, float32 and int8, each exported
by Aidge for the board and for the host: the board's outputs are the host's (int8: the same
integers, so the same dequantised floats; float32: within rounding, the board's FPU fusing
multiply-adds the host's compiler keeps apart, and the same top-1), and two benchmark runs
give the same estimated cycles per inference and per layer, which add up to the inference as
the instruction counts do.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import aidge_deploy
import modelzoo
from aidge_deploy.cli.main import app
from aidge_deploy.config import DeployConfig
from aidge_deploy.metrics import Provenance
from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model
from aidge_deploy.profiling.timing import model_for_cpu
from aidge_qemu_descriptors import get_board
from envparts import missing
from farmkit import ALICE, make_farm, needs_farm

BOARDS = ("mps2-an500", "mps2-an505")
MODELS = {"lenet": (modelzoo.lenet, (1, 1, 16, 16)), "ds_cnn": (modelzoo.ds_cnn, (1, 1, 49, 10))}
CASES = [(b, m, d) for b in BOARDS for m in MODELS for d in ("float32", "int8")]
#: the cases whose core has a timing model
TIMED = [case for case in CASES if model_for_cpu(get_board(case[0]).cpu) is not None]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray]]:
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        missing("qemu-system-arm or arm-none-eabi-gcc is not installed")
    root = tmp_path_factory.mktemp("core_models")
    return {
        name: (make(root / f"{name}.onnx"), modelzoo.sample_input(shape))
        for name, (make, shape) in MODELS.items()
    }


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory, models: dict[str, Any]) -> Any:
    """``exports(target, model, dtype, kind)`` -> the export folder (made once)."""
    root = tmp_path_factory.mktemp("core_exports")
    made: dict[tuple[str, ...], Path] = {}

    def make(target: str, model: str, dtype: str, kind: ApplicationKind) -> Path:
        key = (target, model, dtype, kind.value)
        if key not in made:
            path, x = models[model]
            out = root / "_".join(key)
            export_model(
                ExportRequest(path, target, out, dtype=Dtype(dtype), kind=kind, inputs=(x,),
                              nb_iterations=2, nb_warmup=1)
            )  # fmt: skip
            made[key] = out
        return made[key]

    return make


def test_targets_and_doctor_list_the_boards() -> None:
    runner = CliRunner()
    targets = runner.invoke(app, ["targets"], env={"COLUMNS": "200"})
    assert targets.exit_code == 0, targets.output
    doctor = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert doctor.exit_code in (0, 1), doctor.output
    for board, core in (("mps2-an500", "cortex-m7"), ("mps2-an505", "cortex-m33")):
        line = next(line for line in targets.output.splitlines() if board in line)
        assert core in line and "4 MiB" in line, line
        assert f"{board}: profile (export)" in doctor.output


@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize(("board", "model", "dtype"), CASES)
def test_outputs_are_the_hosts(exports: Any, board: str, model: str, dtype: str) -> None:
    on_board = aidge_deploy.deploy(
        str(exports(board, model, dtype, ApplicationKind.OUTPUT)), DeployConfig()
    )
    on_host = aidge_deploy.deploy(
        str(exports("host", model, dtype, ApplicationKind.OUTPUT)), DeployConfig()
    )
    got = np.asarray(on_board.output).reshape(-1)
    want = np.asarray(on_host.output).reshape(-1)
    assert got.size == want.size == (10 if model == "lenet" else 12)
    if dtype == "int8":
        np.testing.assert_array_equal(
            np.asarray(on_board.output_raw), np.asarray(on_host.output_raw)
        )
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert int(np.argmax(got)) == int(np.argmax(want))


@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize(("board", "model", "dtype"), TIMED)
def test_estimated_cycles_are_deterministic_and_reconciled(
    exports: Any, board: str, model: str, dtype: str
) -> None:
    export = str(exports(board, model, dtype, ApplicationKind.BENCHMARK))
    first = aidge_deploy.deploy(export, DeployConfig())
    second = aidge_deploy.deploy(export, DeployConfig())
    timing_model = model_for_cpu(get_board(board).cpu)
    assert timing_model is not None
    cycles = first.metric("estimated_cycles")
    assert cycles is not None and cycles.provenance == Provenance.ESTIMATED
    assert timing_model.provenance_label in cycles.description
    assert first.metrics["estimated_cycles"] == second.metrics["estimated_cycles"]
    layers = {layer.name: layer.counters["estimated_cycles"] for layer in first.layers}
    assert layers == {layer.name: layer.counters["estimated_cycles"] for layer in second.layers}
    instructions = first.metric("emulated_instructions")
    assert instructions is not None and cycles.value is not None
    instr = {layer.name: layer.counters["emulated_instructions"] for layer in first.layers}
    # the layers add up to most of the inference in both figures; the rest (the calls between
    # the layers and their timing) is outside them
    est_share = sum(layers.values()) / cycles.value
    instr_share = sum(instr.values()) / instructions.value
    assert 0.9 < est_share <= 1.0 and 0.9 < instr_share <= 1.0
    assert abs(est_share - instr_share) < 0.02
    # the time is the estimate at the board's clock
    latency = first.metric("latency")
    assert latency is not None
    assert latency.value == pytest.approx(cycles.value / get_board(board).cpu_hz * 1e3)


@pytest.mark.qemu
@pytest.mark.slow
@needs_farm()
def test_the_farm_runs_a_job_on_each(
    exports: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An agent serving the new boards (the dual-core mps2-an521 too) runs a benchmark job on
    each, by target: the farm's result is the local deploy's."""
    boards = {"an500-c": "mps2-an500", "an505-c": "mps2-an505", "an521-c": "mps2-an521"}
    farm = make_farm(tmp_path_factory.mktemp("farm-cores"), agent_timeout=6.0)
    try:
        farm.start_agent("host-c", boards)
        for name, target in boards.items():
            export = str(exports(target, "lenet", "int8", ApplicationKind.BENCHMARK))
            config = DeployConfig(
                backend="api", api_url=farm.url + "/api", api_username=ALICE[0],
                api_password=ALICE[1], api_poll_interval=0.5,
            )  # fmt: skip
            remote = aidge_deploy.deploy(export, config)
            local = aidge_deploy.deploy(export, DeployConfig())
            assert remote.farm_board == name and remote.backend == "api"
            assert remote.measurements == local.measurements
            assert remote.layers == local.layers
            assert remote.timing == local.timing
    finally:
        farm.stop_all()
