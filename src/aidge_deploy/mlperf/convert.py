"""TFLite -> ONNX for the MLPerf Tiny trained models, checked against the TFLite interpreter.

Why this module exists: the reference models are published as ``.tflite`` files; Aidge
reads ONNX. The conversion is tf2onnx's (maintained, and it dequantises a TFLite model's
int8 weights, which the KWS reference has: a converter that keeps them writes a model whose
Conv weights are int8 codes, which ``quantsteps`` refuses). It runs tf2onnx's own command
line (its documented interface; its Python ``from_tflite`` has no dequantise switch) with
the input made NCHW, then fixes the batch to 1, writes dense layers as Gemm (onnxoptimizer;
see ``GEMM_PASSES``) and checks the ONNX model against the TFLite
interpreter (LiteRT) on the same inputs: the largest absolute difference of the outputs.

Needs the ``tflite`` extra (``pip install aidge-deploy[tflite]``: tf2onnx, TensorFlow's CPU
build, which tf2onnx imports, onnxoptimizer, and LiteRT's interpreter); imported only when converting.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import ConfigError, PreflightError

OPSET = 13
#: how long tf2onnx may take for one model (it loads TensorFlow first)
CONVERT_TIMEOUT_S = 600.0
_EXTRA_HINT = (
    "pip install 'aidge-deploy[tflite]' (tf2onnx, tensorflow-cpu, onnxoptimizer, ai-edge-litert)"
)
log = logging.getLogger("aidge_deploy")


@dataclass(frozen=True)
class Conversion:
    """One converted model and how closely it matches the TFLite interpreter."""

    tflite: Path
    onnx: Path
    dequantised: bool
    input_shape: tuple[int, ...]
    input_dtype: str
    checked_inputs: int
    #: max |ONNX - TFLite| over the outputs of ``checked_inputs`` inputs (float units)
    max_abs_difference: float


def _interpreter(path: Path) -> Any:
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise PreflightError(
            "The LiteRT interpreter (ai-edge-litert) is not installed", hint=_EXTRA_HINT
        ) from None
    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    return interpreter


def _run_tf2onnx(tflite: Path, out: Path, input_name: str, *, nchw: bool, dequantise: bool) -> None:
    import importlib.util

    if importlib.util.find_spec("tf2onnx") is None:
        raise PreflightError("tf2onnx is not installed", hint=_EXTRA_HINT)
    command = [
        sys.executable, "-m", "tf2onnx.convert", "--tflite", str(tflite),
        "--output", str(out), "--opset", str(OPSET),
    ]  # fmt: skip
    if nchw:
        command += ["--inputs-as-nchw", input_name]
    if dequantise:
        command.append("--dequantize")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=CONVERT_TIMEOUT_S, env=env, check=False
    )
    if done.returncode != 0 or not out.is_file():
        tail = "\n".join((done.stderr or done.stdout).splitlines()[-8:])
        raise ConfigError(
            f"tf2onnx could not convert {tflite.name}: {tail}",
            hint="Check that the file is a TFLite model (.tflite); tf2onnx's output is above.",
        )


#: onnxoptimizer's passes: a dense layer as Gemm (tf2onnx writes MatMul + Add, which
#: aidge_quantization 0.10.1's cross-layer equalisation pairs with the convolution before it
#: and fails on: "CLE: unexpected dimensions"), then drop what the fusion left unused
GEMM_PASSES = ("fuse_matmul_add_bias_into_gemm", "eliminate_deadend")


def _finish(path: Path) -> None:
    """Batch 1, and dense layers as Gemm (``GEMM_PASSES``)."""
    import onnx
    from onnx import shape_inference

    model = onnx.load(str(path))
    for value in (*model.graph.input, *model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].dim_value:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = 1
    try:
        import onnxoptimizer
    except ImportError:
        raise PreflightError("onnxoptimizer is not installed", hint=_EXTRA_HINT) from None
    model = onnxoptimizer.optimize(shape_inference.infer_shapes(model), list(GEMM_PASSES))
    _weights_out_by_in(model)
    onnx.save(model, str(path))


def _weights_out_by_in(model: Any) -> None:
    """Store each dense layer's constant weight as (out, in) in a Gemm with ``transB=1``: a
    Gemm fused from MatMul + Add keeps MatMul's (in, out) with ``transB=0``, on which
    aidge_quantization 0.10.1 crashes (``quantsteps.untransposed_gemms``), and a bias-less
    MatMul on a 2-D input becomes that Gemm too (its equalisation fails on MatMul)."""
    from onnx import helper, numpy_helper, shape_inference

    weights = {i.name: i for i in model.graph.initializer}
    inferred = shape_inference.infer_shapes(model).graph
    ranks = {
        v.name: len(v.type.tensor_type.shape.dim)
        for v in (*inferred.value_info, *inferred.input, *inferred.output)
    }
    for node in model.graph.node:
        if len(node.input) < 2 or node.input[1] not in weights:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        dense_matmul = node.op_type == "MatMul" and ranks.get(node.input[0]) == 2
        if node.op_type == "Gemm" and not attrs.get("transB", 0) and not attrs.get("transA", 0):
            kept = [a for a in node.attribute if a.name != "transB"]
        elif dense_matmul and len(weights[node.input[1]].dims) == 2:
            node.op_type, kept = "Gemm", []
        else:
            continue
        init = weights[node.input[1]]
        array = numpy_helper.to_array(init)
        init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(array.T), init.name))
        del node.attribute[:]
        node.attribute.extend([*kept, helper.make_attribute("transB", 1)])


def _quantise(x: np.ndarray, detail: Mapping[str, Any]) -> np.ndarray:
    dtype = np.dtype(detail["dtype"])
    if dtype.kind == "f":
        return x.astype(dtype)
    scale, zero = detail["quantization"]
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale) + zero, info.min, info.max).astype(dtype)


def _dequantise(y: np.ndarray, detail: Mapping[str, Any]) -> np.ndarray:
    if np.dtype(detail["dtype"]).kind == "f":
        return y.astype(np.float64)
    scale, zero = detail["quantization"]
    return (y.astype(np.float64) - zero) * scale


def compare_with_interpreter(tflite: Path, onnx_path: Path, inputs: Sequence[np.ndarray]) -> float:
    """Max |ONNX - TFLite| over every output, for each of ``inputs`` (TFLite layout,
    float): each runtime gets them in its own layout and type."""
    import onnxruntime as ort

    interpreter = _interpreter(tflite)
    (tin,) = interpreter.get_input_details()
    touts = interpreter.get_output_details()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    (oin,) = session.get_inputs()
    onnx_shape = tuple(d if isinstance(d, int) else 1 for d in oin.shape)
    worst = 0.0
    for x in inputs:
        interpreter.set_tensor(tin["index"], _quantise(x, tin))
        interpreter.invoke()
        want = [_dequantise(interpreter.get_tensor(t["index"]), t) for t in touts]
        fed = x if x.shape == onnx_shape else np.moveaxis(x, -1, 1)  # NHWC -> NCHW
        got = session.run(None, {oin.name: _quantise(fed, tin)})
        for w, g, t in zip(want, got, touts, strict=True):
            diff = np.abs(_dequantise(np.asarray(g), t).reshape(w.shape) - w)
            worst = max(worst, float(diff.max()))
    return worst


def convert_tflite(tflite: Path, out: Path, *, checks: int = 20, seed: int = 0) -> Conversion:
    """Convert ``tflite`` to the ONNX file ``out`` and check it on ``checks`` random inputs
    (uniform over [-1, 1], or the int8 range of a quantised input)."""
    tflite, out = Path(tflite), Path(out)
    if not tflite.is_file():
        raise ConfigError(f"{tflite} is not a file", hint="Pass a .tflite model file.")
    interpreter = _interpreter(tflite)
    (tin,) = interpreter.get_input_details()
    shape = tuple(int(d) for d in tin["shape"])
    quantised_input = np.dtype(tin["dtype"]).kind != "f"
    out.parent.mkdir(parents=True, exist_ok=True)
    # a float model's int8 weights are dequantised; a quantised model stays quantised (QDQ)
    _run_tf2onnx(tflite, out, tin["name"], nchw=len(shape) == 4, dequantise=not quantised_input)
    _finish(out)
    rng = np.random.default_rng(seed)
    if quantised_input:
        scale, zero = tin["quantization"]
        low, high = (-128 - zero) * scale, (127 - zero) * scale
        xs = [rng.uniform(low, high, shape).astype(np.float32) for _ in range(checks)]
    else:
        xs = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(checks)]
    difference = compare_with_interpreter(tflite, out, xs)
    return Conversion(
        tflite, out, not quantised_input, shape, str(np.dtype(tin["dtype"])), checks, difference
    )


__all__ = ["GEMM_PASSES", "OPSET", "Conversion", "compare_with_interpreter", "convert_tflite"]
