"""Name the step and the operator when an int8 export's quantisation fails.

Why this module exists: Aidge's int8 export quantises the float graph inside
``aidge_core.export_utils.export.export`` (``quantize_graph``: ``aidge_quantization``'s
post-training quantisation over the calibration inputs, then ``quantize_inputs``: the
inputs × 127 into int8). A failure there surfaces as a C++ registrar message ("missing or
invalid registrar key ... Abs_Op ... Available registrar keys are: [float64 ...]") that
reads like an exporter limit. Two things make it actionable:

* ``check_weight_types`` reads the ONNX model before Aidge does. A model whose Conv, Gemm
  or MatMul weights are integers (a TFLite model with int8 weights converted without
  dequantising them, as the MLPerf Tiny KWS reference is) is not a float model:
  ``aidge_quantization`` measures every weight's range with ``Abs``, which Aidge's CPU
  backend has for float64, float32 and int32 only — hence the registrar error — and a
  float32 export would compute with the raw codes. It is refused naming the operator and
  its weight. A model already quantised (QuantizeLinear/DequantizeLinear, QLinearConv...)
  is refused for int8 too: Aidge quantises a float model itself; so is a Gemm whose weight
  is stored (in, out) with ``transB=0``, on which ``aidge_quantization`` crashes the process.
* ``named_steps`` wraps those two steps for the duration of one export (under the
  exporter's lock, ``modelexport``) so that any other failure is a ``QuantisationError``
  naming the step, the operator when the message identifies it, and what to do.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.errors import ConfigError, QuantisationError

#: the steps of Aidge's int8 export, as an error names them
STEP_MODEL_CHECK = "model check before quantisation"
STEP_OUTPUT_RANGES = "output ranges (the float model on the calibration inputs)"
STEP_CALIBRATION = "calibration and quantisation (aidge_quantization.quantize_network)"
STEP_INPUTS = "input quantisation (inputs x 127 into int8)"

#: operators whose input 1 (and 2) are weights (and biases) that must be float
_WEIGHTED = {"Conv": (1, 2), "ConvTranspose": (1, 2), "Gemm": (1, 2), "MatMul": (1,)}
#: operators of a model that is already quantised
_QUANTISED_OPS = {
    "QuantizeLinear",
    "DequantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "ConvInteger",
    "MatMulInteger",
    "DynamicQuantizeLinear",
}
_FLOAT_TYPES = {"float", "float16", "double", "bfloat16"}

_CONVERT_HINT = (
    "Convert the float TFLite model, dequantising its weights "
    "(scripts/convert_mlperf_tiny.py, or tf2onnx --dequantize), and export that float "
    "model: aidge-deploy quantises it itself with --dtype int8"
)


@dataclass(frozen=True)
class IntegerWeight:
    """A weight of a weighted operator stored as integers."""

    operator: str
    op_type: str
    weight: str
    dtype: str


def integer_weights(model: Any) -> list[IntegerWeight]:
    """The integer weights and biases of ``model``'s Conv/Gemm/MatMul nodes (an
    ``onnx.ModelProto``), in graph order."""
    from onnx import TensorProto

    types = {
        i.name: TensorProto.DataType.Name(i.data_type).lower() for i in model.graph.initializer
    }
    found = []
    for index, node in enumerate(model.graph.node):
        for slot in _WEIGHTED.get(node.op_type, ()):
            if slot < len(node.input) and types.get(node.input[slot], "float") not in _FLOAT_TYPES:
                name = node.name or f"{node.op_type}#{index}"
                found.append(
                    IntegerWeight(name, node.op_type, node.input[slot], types[node.input[slot]])
                )
    return found


def untransposed_gemms(model: Any) -> list[str]:
    """Gemm nodes whose constant weight is stored (in, out) (``transB=0``): aidge_quantization
    0.10.1's cross-layer equalisation crashes the process on them (a segmentation fault,
    nothing to catch), where the same layer stored (out, in) with ``transB=1`` quantises."""
    from onnx import helper

    weights = {i.name for i in model.graph.initializer}
    found = []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "Gemm" or len(node.input) < 2 or node.input[1] not in weights:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if not attrs.get("transB", 0):
            found.append(node.name or f"Gemm#{index}")
    return found


def check_weight_types(model_path: Path, dtype: str) -> None:
    """Refuse a model Aidge cannot export as ``dtype`` for the types of its weights."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    bad = integer_weights(model)
    if bad:
        first = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        message = (
            f"{model_path.name} is not a float model: the weight {first.weight!r} of "
            f"{first.op_type} {first.operator!r} is {first.dtype}{more}"
        )
        if dtype == "int8":
            raise QuantisationError(
                f"int8 quantisation stopped at the step '{STEP_MODEL_CHECK}': "
                + message
                + "; aidge_quantization measures weight ranges with Abs, which "
                "Aidge's CPU backend has only for float64, float32 and int32",
                hint=_CONVERT_HINT + ".",
                step=STEP_MODEL_CHECK,
                operator=first.operator,
            )
        raise ConfigError(
            message + ": a float export would compute with the raw integer codes",
            hint=_CONVERT_HINT + ".",
        )
    if dtype != "int8":
        return
    gemms = untransposed_gemms(model)
    if gemms:
        raise QuantisationError(
            f"int8 quantisation stopped at the step '{STEP_MODEL_CHECK}': the weight of Gemm "
            f"{gemms[0]!r} is stored (in, out) with transB=0; aidge_quantization 0.10.1 crashes "
            "on it in cross-layer equalisation (a segmentation fault of the whole process)",
            hint="Store the weight transposed, (out, in), with transB=1 (the same layer; "
            "scripts/convert_mlperf_tiny.py writes it so), or export float32.",
            step=STEP_MODEL_CHECK,
            operator=gemms[0],
        )
    quantised = next((n for n in model.graph.node if n.op_type in _QUANTISED_OPS), None)
    if quantised is not None:
        raise QuantisationError(
            f"int8 quantisation stopped at the step '{STEP_MODEL_CHECK}': "
            f"{model_path.name} is already quantised ({quantised.op_type} "
            f"{quantised.name or '(unnamed)'}): Aidge's int8 export quantises a float model",
            hint="Export the float model with --dtype int8 (convert the float TFLite file), or "
            "this one with --dtype float32 if Aidge supports its operators.",
            step=STEP_MODEL_CHECK,
            operator=quantised.name or quantised.op_type,
        )


_REGISTRABLE = re.compile(r"registrable object \S*?\d+([A-Za-z0-9]+)_Op")
_KEY = re.compile(r'registrar key: "\[(\w+), \w+, \[([^\]]*)\]\]')
_AVAILABLE = re.compile(r"^\s*\[(\w+), ", re.M)
_CLE = re.compile(r"CLE: .*?w1=\[([\d, ]*)\] vs w2=\[([\d, ]*)\]")


def _graph_operator(graph: Any, dtype: str | None, dims: list[int]) -> str | None:
    """The operator of ``graph`` an input tensor of ``dims`` (and ``dtype``) belongs to."""
    for node in graph.get_nodes():
        if node.type() != "Producer":
            continue
        out = node.get_operator().get_output(0)
        if out is None or list(out.dims) != dims:
            continue
        if dtype is not None and str(out.dtype).split(".")[-1] != dtype:
            continue
        consumers = [c for c in node.get_children() if c is not None]
        if consumers:
            return f"{consumers[0].type()} {consumers[0].name()!r} (its input {node.name()!r})"
        return f"Producer {node.name()!r}"
    return None


def quantisation_failure(step: str, exc: BaseException, graph: Any = None) -> QuantisationError:
    """``exc``, raised by the quantisation ``step``, as a ``QuantisationError``."""
    if isinstance(exc, QuantisationError):
        return exc
    text = str(exc)
    kernel = _REGISTRABLE.search(text)
    key = _KEY.search(text)
    if kernel is not None and key is not None:
        op, dtype = kernel.group(1), key.group(1)
        dims = [int(a) for a, _ in re.findall(r"\((\d+), (\d+)\)", key.group(2))]
        where = _graph_operator(graph, dtype, dims) if graph is not None else None
        has = sorted(set(_AVAILABLE.findall(text.split("Available registrar keys", 1)[-1])))
        return QuantisationError(
            f"int8 quantisation failed in the step '{step}': Aidge's CPU backend has no {op} "
            f"kernel for {dtype} tensors"
            + (f" (it has {', '.join(has)})" if has else "")
            + (f", needed for {where}" if where else f", for a {dtype} tensor of shape {dims}"),
            hint=(
                _CONVERT_HINT + "."
                if dtype in {"int8", "uint8", "int16"}
                else f"Export with --dtype float32, or replace the operator that needs {op} on "
                f"{dtype}."
            ),
            step=step,
            operator=where,
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    cle = _CLE.search(text)
    if cle is not None:
        pair = [[int(d) for d in g.split(",") if d.strip()] for g in cle.groups()]
        places = [_graph_operator(graph, None, d) if graph is not None else None for d in pair]
        named = " and ".join(
            w or f"a weight of shape {d}" for w, d in zip(places, pair, strict=True)
        )
        return QuantisationError(
            f"int8 quantisation failed in the step '{step}': aidge_quantization's cross-layer "
            f"equalisation paired {named}, whose shapes it cannot equalise ({first})",
            hint="A dense layer written as MatMul + Add (as tf2onnx writes it) is paired with "
            "the convolution before it: write it as Gemm (scripts/convert_mlperf_tiny.py does, "
            "with onnxoptimizer's fuse_matmul_add_bias_into_gemm).",
            step=step,
            operator=places[1] or places[0],
        )
    return QuantisationError(
        f"int8 quantisation failed in the step '{step}': {type(exc).__name__}: {first}",
        hint="Export with --dtype float32 to check the float model, or give calibration "
        "inputs of the model's real range with --calibration DIR (values in [-1, 1]).",
        step=step,
    )


@contextlib.contextmanager
def named_steps() -> Iterator[None]:
    """For the duration, a failure of Aidge's quantisation steps is a ``QuantisationError``
    naming its step. The caller holds the exporter's lock (``modelexport``)."""
    module: Any = importlib.import_module("aidge_core.export_utils.export")
    quantize_graph = getattr(module, "quantize_graph", None)
    quantize_inputs = getattr(module, "quantize_inputs", None)
    if quantize_graph is None or quantize_inputs is None:  # another Aidge: its own messages
        yield
        return

    def graph_step(graph: Any, calibration_set: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return quantize_graph(graph, calibration_set, *args, **kwargs)
        except Exception as exc:
            raise quantisation_failure(STEP_CALIBRATION, exc, graph) from exc

    def inputs_step(*args: Any, **kwargs: Any) -> Any:
        try:
            return quantize_inputs(*args, **kwargs)
        except Exception as exc:
            raise quantisation_failure(STEP_INPUTS, exc) from exc

    module.quantize_graph, module.quantize_inputs = graph_step, inputs_step
    try:
        yield
    finally:
        module.quantize_graph, module.quantize_inputs = quantize_graph, quantize_inputs


__all__ = [
    "STEP_CALIBRATION",
    "STEP_INPUTS",
    "STEP_MODEL_CHECK",
    "STEP_OUTPUT_RANGES",
    "IntegerWeight",
    "check_weight_types",
    "integer_weights",
    "named_steps",
    "quantisation_failure",
    "untransposed_gemms",
]
