"""A model's declared inputs, and the tensors a user gives for them, checked before export.

Aidge's exporter answers a tensor of the wrong shape with its own internals ("Cannot
generate memory with token-based producer-consumer model") and quantises int8 inputs
outside [-1, 1] by saturating them silently. Every way of exporting a model (``profile``,
the pytest plugin's ``aidge_run``, ``validate``, the API's ``configcheck.check_run``) checks
the tensors here first, so a bad one is refused with both shapes or the offending range,
before anything is exported.

The tensors are the model's input tensors in its reference layout (NCHW for an ONNX image
model). For a model with one input, each tensor is a sample of it (the first is the
exported sample, all are the int8 calibration set); a model with several inputs takes one
tensor per input, in the graph's order. A dynamic dimension (``N``, ``batch``) takes any
size. int8 inputs outside [-1, 1] are **refused**, not warned about: Aidge's int8 export
scales inputs by 127 into int8, so larger values would saturate and the run would measure
another input than the one given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aidge_deploy.errors import ConfigError

#: the int8 export's input range (Aidge scales inputs by 127 into int8)
INT8_RANGE = 1.0

#: ONNX TensorProto element types -> numpy dtype names
_ONNX_DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
}


@dataclass(frozen=True)
class ModelInput:
    """One input tensor the model's graph declares."""

    name: str
    #: each dimension's size; None for a dynamic one (``dim_param``, or unset)
    dims: tuple[int | None, ...]
    dtype: str

    def shape_text(self) -> str:
        return "(" + ", ".join("?" if d is None else str(d) for d in self.dims) + ")"

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == len(self.dims) and all(
            d is None or d == s for d, s in zip(self.dims, shape, strict=True)
        )


def model_inputs(model: Path) -> list[ModelInput]:
    """The graph's inputs that are not initializers (its weights), in order."""
    import onnx

    proto = onnx.load(str(model), load_external_data=False)
    initializers = {i.name for i in proto.graph.initializer}
    found = []
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dims = tuple(d.dim_value if d.dim_value > 0 else None for d in tensor.shape.dim)
        found.append(ModelInput(value.name, dims, _ONNX_DTYPES.get(tensor.elem_type, "unknown")))
    return found


def _shape(array: np.ndarray) -> str:
    return "(" + ", ".join(str(d) for d in array.shape) + ")"


def check_int8_range(inputs: Sequence[np.ndarray]) -> None:
    """``ConfigError`` when an int8 export's input leaves [-1, 1] (see the module docstring)."""
    peak = max((float(np.max(np.abs(x))) for x in inputs if x.size), default=0.0)
    if not peak <= INT8_RANGE:  # NaN too
        raise ConfigError(
            f"int8 export: input values reach {peak:.3g}, outside [-{INT8_RANGE:g}, "
            f"{INT8_RANGE:g}]: Aidge's int8 export would saturate them",
            hint="Aidge's int8 export scales inputs by 127 into int8: normalise them to [-1, 1].",
        )


def check_inputs(model: Path, inputs: Sequence[object], dtype: str) -> tuple[np.ndarray, ...]:
    """The tensors ``inputs`` as the export takes them (float32 arrays), or ``ConfigError``:
    a tensor whose shape or dtype the model does not take (both named), too few or too many
    tensors for a model with several inputs, int8 inputs outside [-1, 1]."""
    if not inputs:
        return ()
    declared = model_inputs(model)
    if not declared:
        raise ConfigError(f"{model.name} declares no input tensor", hint="Export another model.")
    arrays = [np.asarray(x) for x in inputs]
    if len(declared) > 1 and len(arrays) != len(declared):
        raise ConfigError(
            f"{model.name} has {len(declared)} inputs "
            f"({', '.join(d.name for d in declared)}); {len(arrays)} tensors were given",
            hint="Give one tensor per model input, in the graph's order.",
        )
    out = []
    for i, array in enumerate(arrays):
        spec = declared[i] if len(declared) > 1 else declared[0]
        which = f"input {i}" + (f" ({spec.name})" if len(declared) > 1 else "")
        if array.dtype.kind not in "fiub":
            raise ConfigError(
                f"{which} is an array of {array.dtype}; the model's input {spec.name!r} is "
                f"{spec.dtype}",
                hint="Pass numeric arrays (float32) in the model's input layout.",
            )
        if spec.dtype.startswith("float") and array.dtype.kind != "f":
            raise ConfigError(
                f"{which} is {array.dtype}; the model's input {spec.name!r} is {spec.dtype}",
                hint="Convert it to float32 (normalised as the model was trained), e.g. "
                "x.astype(np.float32) / 255.",
            )
        if not spec.accepts(tuple(array.shape)):
            raise ConfigError(
                f"{which} has shape {_shape(array)}; the model's input {spec.name!r} has "
                f"shape {spec.shape_text()}",
                hint="Pass tensors of the model's input shape, in its layout (NCHW for an "
                "ONNX image model).",
            )
        if not np.all(np.isfinite(array)):
            raise ConfigError(f"{which} holds NaN or infinite values", hint="Pass finite values.")
        out.append(np.ascontiguousarray(array, dtype=np.float32))
    if dtype == "int8":
        check_int8_range(out)
    return tuple(out)
