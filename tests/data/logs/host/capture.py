"""Re-capture the host logs in this folder from real exports of ``tests/modelzoo.py::tiny_cnn``.

Run from the repository root with the project venv active::

    python tests/data/logs/host/capture.py

For each application kind it exports the model with ``aidge_core.export_utils.export`` for target
``host``, builds it exactly as the build contract says (``cmake -B build -S . -DAIDGE_CMP=false &&
cmake --build build``), runs ``build/run_export`` and saves its stdout as ``<kind>.log`` next to a
copy of the export's manifest (``<kind>.aidge-export.json``). It also writes ``expected_outputs.json``:
the float32 output of the same input computed by onnxruntime and by Aidge's CPU backend, the
references the parsed values are checked against.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "tests"))

import modelzoo  # noqa: E402

# name -> (kind, nb_warmup, nb_iterations, profiling, with labels, model)
KINDS: dict[str, tuple[str, int, int, bool, bool, str]] = {
    "standalone": ("standalone", 10, 100, False, False, "tiny_cnn"),
    "standalone_labels": ("standalone", 10, 100, False, True, "tiny_cnn"),
    "output": ("output", 10, 100, False, False, "tiny_cnn"),
    "benchmark": ("benchmark", 2, 10, False, False, "tiny_cnn"),
    "benchmark_profiling": ("benchmark", 2, 10, True, False, "tiny_cnn"),
    # two outputs, one of 120 values: the stdout/v1 truncation tail and multi-output order
    "standalone_wide": ("standalone", 10, 100, False, False, "wide_two_outputs"),
    "output_wide": ("output", 10, 100, False, False, "wide_two_outputs"),
}


def wide_two_outputs(path: Path, seed: int = 0) -> Path:
    """Gemm(4->120) -> ``y`` and Relu(x) -> ``r``: a >=100-value output and a second output."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((120, 4)) * 0.5).astype(np.float32), "W"),
        numpy_helper.from_array((rng.standard_normal(120) * 0.1).astype(np.float32), "B"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W", "B"], ["y"], transB=1),
        helper.make_node("Relu", ["x"], ["r"]),
    ]
    graph = helper.make_graph(
        nodes,
        "wide_two_outputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 120]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 4]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _export(onnx_path: Path, folder: Path, name: str, x: np.ndarray) -> Path:
    import aidge_core
    import aidge_onnx
    from aidge_core.export_utils import export
    from aidge_core.export_utils.artifact import ExportApplication
    from aidge_core.export_utils.config import ExportConfig

    kind, warmup, iters, profiling, with_labels, _model = KINDS[name]
    graph = aidge_onnx.load_onnx(str(onnx_path))
    app = ExportApplication(kind=kind, nb_warmup=warmup, nb_iterations=iters, profiling=profiling)
    config = ExportConfig(
        target="host", export_folder=str(folder), dtype="float32", compile=False, application=app
    )
    labels = [aidge_core.Tensor(np.array([3], dtype=np.int32))] if with_labels else None
    tensor = aidge_core.Tensor(x)
    # Tag the layout as the Cortex-M benchmark helpers do: an untagged 4-D tensor is misread
    # (contract §5.4) and the export's output would not match onnxruntime.
    tensor.to_dformat(aidge_core.dformat.nchw if x.ndim == 4 else aidge_core.dformat.nc)
    with contextlib.chdir(folder.parent):  # export() writes exported_graph.mmd into the cwd
        artifact = export(graph, config, [tensor], labels=labels)
    return Path(artifact.path)


def _aidge_cpu_reference(onnx_path: Path, x: np.ndarray) -> np.ndarray:
    import aidge_backend_cpu  # noqa: F401
    import aidge_core
    import aidge_onnx

    graph = aidge_onnx.load_onnx(str(onnx_path))
    graph.set_backend("cpu")
    graph.set_datatype(aidge_core.dtype.float32)
    tensor = aidge_core.Tensor(x)
    tensor.set_backend("cpu")
    scheduler = aidge_core.SequentialScheduler(graph)
    scheduler.forward(data=[tensor])
    out_node = graph.get_ordered_outputs()[0][0]
    return np.array(out_node.get_operator().get_output(0))


def _ort_all(model_path: Path, x: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return list(sess.run(None, {sess.get_inputs()[0].name: x}))


def main() -> None:
    x = modelzoo.sample_input((1, 3, 4, 4))
    x_wide = modelzoo.sample_input((1, 4))
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        onnx_path = modelzoo.tiny_cnn(tmp_path / "tiny_cnn.onnx")
        wide_path = wide_two_outputs(tmp_path / "wide.onnx")
        for name, spec in KINDS.items():
            wide = spec[5] == "wide_two_outputs"
            folder = _export(
                wide_path if wide else onnx_path, tmp_path / name, name, x_wide if wide else x
            )
            subprocess.run(
                ["cmake", "-B", "build", "-S", ".", "-DAIDGE_CMP=false"],
                cwd=folder,
                check=True,
                capture_output=True,
            )
            subprocess.run(
                ["cmake", "--build", "build"], cwd=folder, check=True, capture_output=True
            )
            run = subprocess.run(
                [str(folder / "build" / "run_export")], cwd=folder, check=True, capture_output=True
            )
            (HERE / f"{name}.log").write_bytes(run.stdout)
            shutil.copyfile(folder / ".aidge-export.json", HERE / f"{name}.aidge-export.json")
        reference = {
            "input": x.ravel().tolist(),
            "onnxruntime": modelzoo.onnx_reference(onnx_path, x).ravel().tolist(),
            "aidge_backend_cpu": _aidge_cpu_reference(onnx_path, x).ravel().tolist(),
            "wide_input": x_wide.ravel().tolist(),
            "wide_onnxruntime": [
                np.asarray(o).ravel().tolist() for o in _ort_all(wide_path, x_wide)
            ],
        }
    (HERE / "expected_outputs.json").write_text(json.dumps(reference, indent=2) + "\n")


if __name__ == "__main__":
    main()
