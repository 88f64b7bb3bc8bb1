"""Reference runs and the comparison of one target's outputs with them.

The reference is the ONNX model itself, run by onnxruntime when it is installed, else by
Aidge's CPU backend, on the same inputs the target ran. Float outputs are judged with an
absolute plus relative tolerance (the UART prints six decimals); int8 outputs are judged in
quantisation steps: Aidge's int8 export (symmetric, MAX clipping over the calibration set)
gives each output the step ``max |reference| / 127`` over the calibration inputs (recorded
by the export, see ``quantisation``); the target's integers are read as ``q * step`` and
may be off by ``INT8_STEPS`` steps plus ``INT8_RTOL`` of the value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np

#: float outputs: |target - reference| <= FLOAT_ATOL + FLOAT_RTOL * |reference|
FLOAT_ATOL = 1e-5
FLOAT_RTOL = 1e-4
#: int8 outputs: |q * step - reference| <= INT8_STEPS * step + INT8_RTOL * |reference|:
#: rounding through the layers (steps) and Aidge's single-shift approximation of each
#: rescaling (a power-of-two multiplier: a relative error of a few percent per layer)
INT8_STEPS = 4.0
INT8_RTOL = 0.1
INT8_SCALE = 127.0


class ReferenceEngine(StrEnum):
    ONNXRUNTIME = "onnxruntime"
    AIDGE_CPU = "aidge_backend_cpu"


def reference_engine() -> ReferenceEngine:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return ReferenceEngine.AIDGE_CPU
    return ReferenceEngine.ONNXRUNTIME


def run_reference(model: Path, x: np.ndarray, engine: ReferenceEngine) -> list[np.ndarray]:
    """The model's outputs on input ``x`` (reference layout), in the model's output order."""
    if engine is ReferenceEngine.ONNXRUNTIME:
        import onnxruntime as ort

        sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        return [np.asarray(o) for o in sess.run(None, {name: x})]
    import aidge_backend_cpu  # noqa: F401
    import aidge_core
    import aidge_onnx

    graph = aidge_onnx.load_onnx(str(model))
    graph.set_backend("cpu")
    graph.set_datatype(aidge_core.dtype.float32)
    tensor = aidge_core.Tensor(np.ascontiguousarray(x, dtype=np.float32))
    tensor.set_backend("cpu")
    scheduler = aidge_core.SequentialScheduler(graph)
    scheduler.forward(True, [tensor])
    return [
        np.array(node.get_operator().get_output(index))
        for node, index in graph.get_ordered_outputs()
    ]


@dataclass(frozen=True)
class Tolerance:
    """How far an output may be from the reference: absolute + relative, in its unit."""

    atol: float
    rtol: float = 0.0
    #: int8: the quantisation step the target's integers are multiplied by
    step: float | None = None

    def describe(self) -> str:
        if self.step is not None:
            return f"{self.atol / self.step:g} steps of {self.step:.3g} + rtol {self.rtol:g}"
        return f"atol {self.atol:g} + rtol {self.rtol:g}"


def tolerance_for(
    c_type: str, references: Sequence[np.ndarray], step: float | None = None
) -> Tolerance:
    """The tolerance of one output, from its exported C type and its reference values.

    ``step`` is an int8 output's quantisation step as its export recorded it; without one,
    it is worked out from the reference values as Aidge's quantisation does.
    """
    if c_type.startswith("int8"):
        if step is None:
            peak = max((float(np.max(np.abs(r))) for r in references), default=0.0)
            step = peak / INT8_SCALE if peak > 0 else 1.0 / INT8_SCALE
        return int8_tolerance(step)
    return Tolerance(atol=FLOAT_ATOL, rtol=FLOAT_RTOL)


def int8_tolerance(step: float) -> Tolerance:
    """``INT8_STEPS`` quantisation steps plus ``INT8_RTOL`` of the value."""
    return Tolerance(atol=INT8_STEPS * step, rtol=INT8_RTOL, step=step)


@dataclass(frozen=True)
class OutputCheck:
    """One cell of the matrix: one output of one target over all inputs."""

    target: str
    output: str
    max_abs_error: float
    #: max |error| / max |reference| over the inputs
    max_rel_error: float
    cosine: float
    top1_agreement: float
    tolerance: Tolerance
    worst: str
    passed: bool
    #: the output's name in the export (named after its node there)
    exported_name: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "output": self.output,
            "exported_name": self.exported_name,
            "max_abs_error": _finite(self.max_abs_error),
            "max_rel_error": _finite(self.max_rel_error),
            "cosine_similarity": _finite(self.cosine),
            "top1_agreement": self.top1_agreement,
            "tolerance": self.tolerance.describe(),
            "quantisation_step": self.tolerance.step,
            "worst": self.worst,
            "passed": self.passed,
        }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def check_output(
    target: str,
    output: str,
    got: Sequence[np.ndarray],
    want: Sequence[np.ndarray],
    tolerance: Tolerance,
    exported_name: str = "",
) -> OutputCheck:
    """Compare the target's values of one output (one array per input, in the reference's
    unit: int8 outputs dequantised) with the reference."""
    g_all = [np.asarray(g, dtype=np.float64).reshape(-1) for g in got]
    w_all = [np.asarray(w, dtype=np.float64).reshape(-1) for w in want]
    errors = [np.abs(g - w) for g, w in zip(g_all, w_all, strict=True)]
    allowed = [tolerance.atol + tolerance.rtol * np.abs(w) for w in w_all]
    flat_g, flat_w = np.concatenate(g_all), np.concatenate(w_all)
    flat_e, flat_a = np.concatenate(errors), np.concatenate(allowed)
    max_abs = float(np.max(flat_e)) if flat_e.size else 0.0
    if not np.all(np.isfinite(flat_g)):
        max_abs = math.inf
    peak = float(np.max(np.abs(flat_w))) if flat_w.size else 0.0
    norm = float(np.linalg.norm(flat_g) * np.linalg.norm(flat_w))
    cosine = float(np.dot(flat_g, flat_w) / norm) if norm > 0 else (1.0 if max_abs == 0 else 0.0)
    agree = [int(np.argmax(g)) == int(np.argmax(w)) for g, w in zip(g_all, w_all, strict=True)]
    bad = ~(flat_e <= flat_a)
    worst = ""
    if flat_e.size:
        i = int(np.argmax(np.where(np.isfinite(flat_e), flat_e, np.inf)))
        sample, index = divmod(i, g_all[0].size) if g_all[0].size else (0, 0)
        worst = f"input {sample} [{index}]: {flat_g[i]:.6g} vs {flat_w[i]:.6g}"
    return OutputCheck(
        target=target,
        output=output,
        max_abs_error=max_abs,
        max_rel_error=max_abs / peak if peak > 0 else (0.0 if max_abs == 0 else math.inf),
        cosine=cosine,
        top1_agreement=sum(agree) / len(agree) if agree else 1.0,
        tolerance=tolerance,
        worst=worst,
        passed=not bool(bad.any()) and math.isfinite(max_abs),
        exported_name=exported_name,
    )
