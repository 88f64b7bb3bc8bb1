"""``aidge_benchmark``'s own command line reaches our targets: it loads
``aidge_deploy.host`` and ``aidge_deploy.mps2-an386`` as modules, compares their outputs with
onnxruntime's and times them in seconds beside it (the emulated board's seconds are its
timing model's estimate, said by ``last_run``). The published Cortex-M backend's
milliseconds are turned into seconds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import modelzoo
from envparts import needs

AIDGE_BENCHMARK = Path(sys.executable).parent / "aidge_benchmark"


@pytest.mark.slow
@pytest.mark.qemu
@needs(shutil.which("qemu-system-arm") is not None, "qemu-system-arm is not installed")
def test_aidge_benchmark_cli_compares_and_times_host_and_mps2_an386_beside_onnxruntime(
    tmp_path: Path,
) -> None:
    modelzoo.tiny_cnn(tmp_path / "tiny.onnx")
    modules = ["onnxruntime", "aidge_deploy.host", "aidge_deploy.mps2-an386"]
    done = subprocess.run(
        [
            str(AIDGE_BENCHMARK),
            "--onnx-file",
            "tiny.onnx",
            "--modules",
            *modules,
            "--compare",
            "--time",
            "--nb-iterations",
            "3",
            "--nb-warmups",
            "1",
            "--results-filename",
            "times",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
    for name in modules:  # loaded as modules by its own loader
        assert re.search(rf"{re.escape(name)}( \(reference\))?\.+ \[ OK \]", out), out
    compared = out.split("Comparison with reference", 1)[1].split("Compute inference time")[0]
    assert compared.count("[ OK ]") == 2 and "XX" not in compared, out
    times = json.loads((tmp_path / "times.json").read_text())["model"]
    assert set(times) == set(modules)
    host, board = np.array(times["aidge_deploy.host"]), np.array(times["aidge_deploy.mps2-an386"])
    assert len(host) == len(board) == 3
    assert 0 < host.max() < 0.01  # seconds: a 1.3 k-MAC model on this machine
    # the emulated board's seconds: estimated cycles / 25 MHz, well under a second
    assert 1e-5 < board.min() <= board.max() < 0.1


def test_backends_register_and_say_what_their_seconds_are(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from aidge_benchmark.registrations import _BACKEND_INFERENCE_REGISTRY, _BACKEND_TIME_REGISTRY

    from aidge_deploy import benchmark_backends

    module = importlib.import_module("aidge_deploy.mps2-an386")
    assert module.backends == ["aidge_deploy.mps2-an386"]
    import aidge_deploy.benchmark_targets as every

    assert {"aidge_deploy.host", "aidge_deploy.mps3-an547", "aidge_deploy.netduinoplus2"} <= set(
        every.BACKENDS
    )
    for name in every.BACKENDS:
        assert name in _BACKEND_INFERENCE_REGISTRY and name in _BACKEND_TIME_REGISTRY
    with pytest.raises(ImportError):
        importlib.import_module("aidge_deploy.no-such-board")
    # the published Cortex-M backend returns milliseconds: wrapped to give seconds, once
    wrapped = _BACKEND_TIME_REGISTRY["aidge_export_arm_cortexm"]
    assert "seconds" in (wrapped.__doc__ or "")
    again = benchmark_backends.register_backends(["host"])
    assert again == ["aidge_deploy.host"]
    assert _BACKEND_TIME_REGISTRY["aidge_export_arm_cortexm"] is wrapped  # not wrapped twice
    converted = benchmark_backends._seconds_from_milliseconds(lambda *a, **k: [12.5, 13.0])
    assert converted() == [0.0125, 0.013]


@pytest.mark.slow
def test_timing_through_the_api_keeps_the_provenance_beside_the_seconds(tmp_path: Path) -> None:
    import aidge_benchmark as ab
    import onnx

    import aidge_deploy.benchmark_targets  # noqa: F401
    from aidge_deploy.benchmark_backends import last_run

    model = onnx.load(str(modelzoo.tiny_cnn(tmp_path / "tiny.onnx")))
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 4, 4)).astype(np.float32)
    inputs = [ab.NamedTensor("x", x)]
    seconds = ab.measure_inference_time(
        "aidge_deploy.host", model, inputs, nb_warmup=1, nb_iterations=4
    )
    run = last_run("aidge_deploy.host")
    assert run is not None and run.provenance == "host" and list(run.times_s) == seconds
    assert run.resolution_s is not None and run.resolution_s < 1e-6
    (out,) = ab.compute_output("aidge_deploy.host", model, inputs)
    np.testing.assert_allclose(out, modelzoo.onnx_reference(tmp_path / "tiny.onnx", x), atol=1e-5)
