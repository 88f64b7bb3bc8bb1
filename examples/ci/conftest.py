"""The model under test. A real project keeps its trained model in the repository; this
example writes a small classifier (Gemm 32->16, ReLU, Gemm 16->4) so it needs no file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def write_model(path: Path) -> Path:
    rng = np.random.default_rng(42)
    weights = {
        "W1": (rng.standard_normal((16, 32)) * 0.25).astype(np.float32),
        "B1": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "W2": (rng.standard_normal((4, 16)) * 0.25).astype(np.float32),
        "B2": (rng.standard_normal(4) * 0.1).astype(np.float32),
    }
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], transB=1),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Gemm", ["r", "W2", "B2"], ["scores"], transB=1),
        ],
        "keyword_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="session")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tmp_path_factory.mktemp("model") / "model.onnx")
