"""The four MLPerf Tiny reference models: what they are, their shapes and published counts.

Why this module exists: a team choosing a board compares figures of the same four models
everyone publishes (MLPerf Tiny's closed division runs exactly these). Their counts are
facts of the trained models in the ``mlcommons/tiny`` repository (``benchmark/training/
<task>/trained_models``), counted by ``count_onnx`` on the float models converted to ONNX
(``scripts/convert_mlperf_tiny.py``): multiply-accumulates of every Conv, Gemm and MatMul,
and parameters = the float weights and biases (BatchNorm folded into the convolutions, as
in the trained files). ``build`` makes random-weight models of these exact shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

#: where the trained models are published (a snapshot of this repository has them)
SOURCE_REPOSITORY = "mlcommons/tiny"
#: the commit of the snapshot the counts below were made from
SOURCE_COMMIT = "1afd2c9"


class TinyModel(StrEnum):
    KWS = "kws"
    IC = "ic"
    VWW = "vww"
    AD = "ad"


@dataclass(frozen=True)
class ModelSpec:
    """One reference model: its task, architecture, input and published counts."""

    name: TinyModel
    task: str
    architecture: str
    #: the ONNX input shape (NCHW, batch 1), as the conversion script writes it
    input_shape: tuple[int, ...]
    outputs: int
    macs: int
    params: int
    #: the trained float model in mlcommons/tiny (the int8 one beside it, if published)
    float_tflite: str
    int8_tflite: str | None
    #: what agreeing with the float model means for its outputs
    classifier: bool = True


MODELS: dict[TinyModel, ModelSpec] = {
    TinyModel.KWS: ModelSpec(
        TinyModel.KWS,
        "keyword spotting (Speech Commands, 12 classes)",
        "DS-CNN: Conv 10x4/2 + 4 x (depthwise 3x3 + pointwise 1x1), 64 channels",
        (1, 1, 49, 10),
        12,
        2_656_768,
        22_604,
        "benchmark/training/keyword_spotting/trained_models/kws_ref_model_float32.tflite",
        "benchmark/training/keyword_spotting/trained_models/kws_ref_model.tflite",
    ),
    TinyModel.IC: ModelSpec(
        TinyModel.IC,
        "image classification (CIFAR-10)",
        "ResNet-8: 3 residual stacks of 16, 32, 64 channels",
        (1, 3, 32, 32),
        10,
        12_501_632,
        77_706,
        "benchmark/training/image_classification/trained_models/pretrainedResnet.tflite",
        "benchmark/training/image_classification/trained_models/pretrainedResnet_quant.tflite",
    ),
    TinyModel.VWW: ModelSpec(
        TinyModel.VWW,
        "visual wake words (person / no person)",
        "MobileNetV1, width 0.25, 96x96 RGB",
        (1, 3, 96, 96),
        2,
        7_489_664,
        210_850,
        "benchmark/training/visual_wake_words/trained_models/vww_96_float.tflite",
        "benchmark/training/visual_wake_words/trained_models/vww_96_int8.tflite",
    ),
    TinyModel.AD: ModelSpec(
        TinyModel.AD,
        "anomaly detection (ToyADMOS machine sounds)",
        "FC autoencoder: 640 -> 4 x 128 -> 8 -> 4 x 128 -> 640",
        (1, 640),
        640,
        264_192,
        265_864,
        "benchmark/training/anomaly_detection/trained_models/ad01_fp32.tflite",
        "benchmark/training/anomaly_detection/trained_models/ad01_int8.tflite",
        classifier=False,
    ),
}


def model_spec(name: str) -> ModelSpec:
    """The reference model called ``name`` (kws, ic, vww, ad)."""
    from aidge_deploy.errors import ConfigError

    try:
        return MODELS[TinyModel(name.lower())]
    except ValueError:
        raise ConfigError(
            f"Unknown MLPerf Tiny model {name!r}",
            hint="One of: " + ", ".join(m.value for m in TinyModel),
        ) from None


@dataclass(frozen=True)
class Counts:
    """Multiply-accumulates and parameters of a model, counted on its ONNX graph."""

    macs: int
    params: int
    #: the bytes of its weights and biases as stored (float32 in an ONNX file)
    weight_bytes: int

    def within(self, spec: ModelSpec, tolerance: float = 0.01) -> bool:
        return (
            abs(self.macs - spec.macs) <= tolerance * spec.macs
            and abs(self.params - spec.params) <= tolerance * spec.params
        )


def count_onnx(path: Path) -> Counts:
    """MACs (Conv: weights x output positions; Gemm/MatMul: weights) and float parameters
    of the ONNX model at ``path``, from its shapes (``onnx`` shape inference)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper, shape_inference

    model = shape_inference.infer_shapes(onnx.load(str(path)))
    shapes = {
        v.name: [d.dim_value or 1 for d in v.type.tensor_type.shape.dim]
        for v in (*model.graph.value_info, *model.graph.output, *model.graph.input)
    }
    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    macs = 0
    for node in model.graph.node:
        w = weights.get(node.input[1]) if len(node.input) > 1 else None
        if w is None:
            continue
        if node.op_type == "Conv":
            out = shapes.get(node.output[0], [])
            macs += int(w.size) * int(np.prod(out[2:])) if len(out) > 2 else 0
        elif node.op_type in ("Gemm", "MatMul"):
            macs += int(w.size)
    floats = [a for a in weights.values() if a.dtype.kind == "f"]
    return Counts(macs, sum(int(a.size) for a in floats), sum(int(a.nbytes) for a in floats))


__all__ = [
    "MODELS",
    "SOURCE_COMMIT",
    "SOURCE_REPOSITORY",
    "Counts",
    "ModelSpec",
    "TinyModel",
    "count_onnx",
    "model_spec",
]
