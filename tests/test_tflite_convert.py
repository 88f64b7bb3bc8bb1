"""The TFLite -> ONNX conversion script on TFLite models made in the test (TensorFlow's
converter): a float model's ONNX matches the TFLite interpreter's outputs; a model with
dynamic-range int8 weights converts too, and an int8 export of it is refused before Aidge,
naming the quantised operator (Aidge quantises a float model itself)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from envparts import needs

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "convert_mlperf_tiny.py"
HAVE_EXTRA = all(
    importlib.util.find_spec(m)
    for m in ("tensorflow", "tf2onnx", "onnxoptimizer", "ai_edge_litert")
)

MAKE_TFLITE = """
import sys, numpy as np, tensorflow as tf
rng = np.random.default_rng(0)
class Net(tf.Module):
    def __init__(self):
        self.w = tf.constant(rng.standard_normal((3, 3, 1, 8)).astype(np.float32) * 0.3)
        self.b = tf.constant(rng.standard_normal(8).astype(np.float32) * 0.1)
        self.dw = tf.constant(rng.standard_normal((3, 3, 8, 1)).astype(np.float32) * 0.3)
        self.fc = tf.constant(rng.standard_normal((240, 8)).astype(np.float32) * 0.1)
    @tf.function(input_signature=[tf.TensorSpec([1, 12, 10, 1], tf.float32)])
    def __call__(self, x):
        y = tf.nn.relu(tf.nn.conv2d(x, self.w, 2, "SAME") + self.b)
        y = tf.nn.relu(tf.nn.depthwise_conv2d(y, self.dw, [1, 1, 1, 1], "SAME"))
        return tf.nn.softmax(tf.reshape(y, [1, -1]) @ self.fc)
net = Net()
converter = tf.lite.TFLiteConverter.from_concrete_functions([net.__call__.get_concrete_function()], net)
if sys.argv[2] == "dynamic":  # int8 weights, activations quantised at run time
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
open(sys.argv[1], "wb").write(converter.convert())
"""


def make_tflite(path: Path, kind: str) -> Path:
    made = subprocess.run([sys.executable, "-c", MAKE_TFLITE, str(path), kind],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    return path


def convert(tflite: Path, out: Path) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), str(tflite), str(out)],
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return " ".join(done.stdout.split())


@pytest.mark.slow
@needs(HAVE_EXTRA, "the tflite extra is not installed (pip install -e .[dev])")
def test_the_script_converts_a_tflite_model_and_matches_its_interpreter(tmp_path: Path) -> None:
    out = tmp_path / "net.onnx"
    line = convert(make_tflite(tmp_path / "net.tflite", "float"), out)
    assert "float, weights dequantised" in line and "input 1x12x10x1 float32" in line
    difference = float(re.search(r"max \|ONNX - TFLite\| = (\S+) over 20 inputs", line).group(1))
    assert difference < 1e-5
    model = onnx.load(str(out))
    ops = [n.op_type for n in model.graph.node]
    assert {"Conv", "Gemm", "Softmax"} <= set(ops) and "MatMul" not in ops  # dense as Gemm
    (inp,) = model.graph.input
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim] == [1, 1, 12, 10]  # NCHW
    from aidge_deploy.quantsteps import check_weight_types

    check_weight_types(out, "int8")  # a float model: Aidge can quantise it


@pytest.mark.slow
@needs(HAVE_EXTRA, "the tflite extra is not installed (pip install -e .[dev])")
def test_dynamic_range_int8_weights_convert_and_are_refused_for_an_int8_export(
    tmp_path: Path,
) -> None:
    from ai_edge_litert.interpreter import Interpreter

    from aidge_deploy.errors import QuantisationError
    from aidge_deploy.quantsteps import STEP_MODEL_CHECK, check_weight_types

    tflite = make_tflite(tmp_path / "dynamic.tflite", "dynamic")
    kinds = {np.dtype(t["dtype"]).name for t in Interpreter(str(tflite)).get_tensor_details()}
    assert "int8" in kinds
    out = tmp_path / "dynamic.onnx"
    line = convert(tflite, out)
    difference = float(re.search(r"max \|ONNX - TFLite\| = (\S+) over 20 inputs", line).group(1))
    assert difference < 1e-2  # both quantise the activations at run time
    with pytest.raises(QuantisationError) as caught:
        check_weight_types(out, "int8")
    assert caught.value.step == STEP_MODEL_CHECK and "already quantised" in caught.value.message


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "no.tflite"),
                           str(tmp_path / "no.onnx")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "is not a file" in done.stderr
