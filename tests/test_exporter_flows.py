"""The published aidge_export_arm_cortexm benchmark helpers run on an emulated board through us."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import modelzoo
from envparts import needs

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.slow,
    needs(shutil.which("qemu-system-arm") is not None, "qemu-system-arm is not installed"),
]


def test_benchmark_helper_with_local_backend(tiny_cnn: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import aidge_backend_cpu  # noqa: F401
    import aidge_onnx
    from aidge_core.export_utils.config import BenchmarkConfig, ExportConfig
    from aidge_export_arm_cortexm.benchmark_helpers import execution

    import aidge_qemu_boards  # noqa: F401 - registers the emulated boards

    monkeypatch.chdir(tmp_path)
    x = modelzoo.sample_input((1, 3, 4, 4))
    results = execution.benchmark(
        aidge_onnx.load_onnx(str(tiny_cnn)),
        input_data=[("x", x)],
        backend=execution.local_backend(),
        export_cfg=ExportConfig(target="mps2-an386", export_folder=str(tmp_path / "bench")),
        bench_cfg=BenchmarkConfig(nb_iterations=3, nb_warmup=1, profiling=True),
    )
    assert len(results["timings"]) == 3 and all(t > 0 for t in results["timings"])
    assert set(results["layer_cycles"]) >= {"_3_FC_0"}
    assert "mem_peaks" in results


def test_output_helper_run_returns_reshaped_outputs(
    tiny_cnn: Path, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    import aidge_backend_cpu  # noqa: F401
    import aidge_onnx
    from aidge_core.export_utils.config import BenchmarkConfig, ExportConfig
    from aidge_export_arm_cortexm.benchmark_helpers import execution

    import aidge_qemu_boards  # noqa: F401

    monkeypatch.chdir(tmp_path)
    x = modelzoo.sample_input((1, 3, 4, 4))
    model = aidge_onnx.load_onnx(str(tiny_cnn))
    model.set_backend("cpu")
    model.forward_dims([[1, 3, 4, 4]], True)
    firmware = execution.compile_output_firmware(
        model,
        input_data=[("x", x)],
        export_cfg=ExportConfig(target="netduinoplus2", export_folder=str(tmp_path / "out")),
        bench_cfg=BenchmarkConfig(mode="output"),
    )
    outputs, _cycles = execution.run(firmware, backend=execution.local_backend())
    expected = modelzoo.onnx_reference(tiny_cnn, x)
    assert outputs[0].shape == expected.shape
    np.testing.assert_allclose(outputs[0], expected, atol=2e-6, rtol=1e-5)
