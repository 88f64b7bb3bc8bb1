"""Random-weight ONNX models of the four MLPerf Tiny reference shapes.

Why this module exists: the trained models are downloads CI cannot make; their cost on a
board depends on their shapes, not their weights. ``build_model`` writes the reference
architecture layer for layer (the convolutions' "same" padding of the TFLite models,
BatchNorm folded into the convolutions as in the trained files) with He-initialised random
weights, so its MACs and parameters equal the published counts (``models``; checked by
``count_onnx`` in the tests). Inputs are NCHW (batch 1), the layout the conversion script
gives the trained models.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.mlperf.models import TinyModel, model_spec

OPSET = 13


class _Graph:
    """A small builder of a sequential ONNX graph with named, seeded weights."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def _weight(self, name: str, shape: tuple[int, ...], fan_in: int) -> str:
        from onnx import numpy_helper

        array = self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def _bias(self, name: str, size: int) -> str:
        from onnx import numpy_helper

        array = self.rng.standard_normal(size) * 0.05
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        name = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(
        self, x: str, cin: int, cout: int, kernel: tuple[int, int], stride: int,
        size: tuple[int, int], *, depthwise: bool = False,
    ) -> tuple[str, tuple[int, int]]:  # fmt: skip
        """A TFLite "same" convolution (asymmetric padding: the extra row at the end)."""
        out = (-(-size[0] // stride), -(-size[1] // stride))
        pads = [max((o - 1) * stride + k - s, 0) for o, k, s in zip(out, kernel, size, strict=True)]
        group = cin if depthwise else 1
        shape = (cout, cin // group, *kernel)
        base = self._name("conv")
        w = self._weight(f"{base}_W", shape, (cin // group) * kernel[0] * kernel[1])
        b = self._bias(f"{base}_B", cout)
        y = self.node(
            "Conv", [x, w, b], kernel_shape=list(kernel), strides=[stride, stride], group=group,
            pads=[pads[0] // 2, pads[1] // 2, pads[0] - pads[0] // 2, pads[1] - pads[1] // 2],
        )  # fmt: skip
        return y, out

    def dense(self, x: str, fin: int, fout: int) -> str:
        base = self._name("fc")
        w = self._weight(f"{base}_W", (fout, fin), fin)
        b = self._bias(f"{base}_B", fout)
        return self.node("Gemm", [x, w, b], transB=1)

    def flatten(self, x: str, size: int) -> str:
        """Reshape to (1, size): Aidge's float exporters have no Flatten kernel."""
        from onnx import numpy_helper

        shape = self._name("shape")
        self.inits.append(numpy_helper.from_array(np.array([1, size], np.int64), shape))
        return self.node("Reshape", [x, shape])

    def save(self, x_shape: tuple[int, ...], y: str, y_shape: tuple[int, ...], path: Path) -> Path:
        import onnx
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, list(y_shape))],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(path))
        return path


def _kws(g: _Graph) -> str:
    x, size = g.conv("input", 1, 64, (10, 4), 2, (49, 10))
    x = g.node("Relu", [x])
    for _ in range(4):
        x, size = g.conv(x, 64, 64, (3, 3), 1, size, depthwise=True)
        x = g.node("Relu", [x])
        x, size = g.conv(x, 64, 64, (1, 1), 1, size)
        x = g.node("Relu", [x])
    # Keras AveragePooling2D((49 // 2, 10 // 2)), strides = pool size: 25x5 -> 1x1
    x = g.node("AveragePool", [x], kernel_shape=[24, 5], strides=[24, 5])
    return g.node("Softmax", [g.dense(g.flatten(x, 64), 64, 12)], axis=1)


def _ic(g: _Graph) -> str:
    x, size = g.conv("input", 3, 16, (3, 3), 1, (32, 32))
    x = g.node("Relu", [x])
    channels = 16
    for stack, width in enumerate((16, 32, 64)):
        stride = 1 if stack == 0 else 2
        y, out = g.conv(x, channels, width, (3, 3), stride, size)
        y = g.node("Relu", [y])
        y, out = g.conv(y, width, width, (3, 3), 1, out)
        if stack:
            x, _ = g.conv(x, channels, width, (1, 1), stride, size)  # the shortcut
        x = g.node("Relu", [g.node("Add", [x, y])])
        channels, size = width, out
    x = g.node("AveragePool", [x], kernel_shape=list(size))
    return g.node("Softmax", [g.dense(g.flatten(x, 64), 64, 10)], axis=1)


#: MobileNetV1 (width 0.25): (depthwise stride, pointwise channels) per block
_VWW_BLOCKS = ((1, 16), (2, 32), (1, 32), (2, 64), (1, 64), (2, 128),
               (1, 128), (1, 128), (1, 128), (1, 128), (1, 128), (2, 256), (1, 256))  # fmt: skip


def _vww(g: _Graph) -> str:
    x, size = g.conv("input", 3, 8, (3, 3), 2, (96, 96))
    x = g.node("Relu", [x])
    channels = 8
    for stride, width in _VWW_BLOCKS:
        x, size = g.conv(x, channels, channels, (3, 3), stride, size, depthwise=True)
        x = g.node("Relu", [x])
        x, size = g.conv(x, channels, width, (1, 1), 1, size)
        x = g.node("Relu", [x])
        channels = width
    x = g.node("AveragePool", [x], kernel_shape=list(size))
    return g.node("Softmax", [g.dense(g.flatten(x, 256), 256, 2)], axis=1)


def _ad(g: _Graph) -> str:
    widths = (640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640)
    x = "input"
    for k, (fin, fout) in enumerate(itertools.pairwise(widths)):
        x = g.dense(x, fin, fout)
        if k < len(widths) - 2:
            x = g.node("Relu", [x])
    return x


_BUILDERS = {TinyModel.KWS: _kws, TinyModel.IC: _ic, TinyModel.VWW: _vww, TinyModel.AD: _ad}


def build_model(name: str, path: Path, *, seed: int = 0) -> Path:
    """Write a random-weight ONNX model of the reference ``name`` (kws, ic, vww, ad) to
    ``path``: the published shapes, MACs and parameters; weights from ``seed``."""
    spec = model_spec(name)
    graph = _Graph(f"mlperf_tiny_{spec.name.value}_random", seed)
    y = _BUILDERS[spec.name](graph)
    return graph.save(spec.input_shape, y, (1, spec.outputs), Path(path))


__all__ = ["build_model"]
