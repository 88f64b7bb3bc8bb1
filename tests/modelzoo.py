"""Small ONNX models built in the tests (no downloads), and helpers to export them with Aidge.

``tiny_cnn`` is Conv(3->4, 3x3) + ReLU + Flatten + Gemm(64->10) on a 1x3x4x4 input: small
enough to build and run in well under a second on the host and on an emulated Cortex-M.
``big_mlp`` has ~1.2 MB of float weights and activations that overflow a 192 KB RAM part.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(model: onnx.ModelProto, path: Path) -> Path:
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def tiny_cnn(path: Path, seed: int = 0) -> Path:
    """Conv + ReLU + Reshape + Gemm, input ``x`` [1,3,4,4] float32, output ``y`` [1,10]."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "W"),
        numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32), "B"),
        numpy_helper.from_array((rng.standard_normal((10, 64)) * 0.1).astype(np.float32), "FW"),
        numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "FB"),
        numpy_helper.from_array(np.array([1, 64], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "FW", "FB"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def gap_cnn(path: Path, seed: int = 0) -> Path:
    """Conv + ReLU + GlobalAveragePool + Reshape + Gemm, input ``x`` [1,3,4,4], output ``y``
    [1,10]: its exported layers have long names (``_3_GlobalAveragePooling_0``)."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "W"),
        numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "B"),
        numpy_helper.from_array((rng.standard_normal((10, 8)) * 0.1).astype(np.float32), "FW"),
        numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "FB"),
        numpy_helper.from_array(np.array([1, 8], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Reshape", ["g", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "FW", "FB"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "gap_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def _mlp(path: Path, name: str, inputs: int, hidden: int, seed: int, w2_scale: float) -> Path:
    """Gemm(inputs->hidden) + ReLU + Gemm(hidden->10), zero biases."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(
            (rng.standard_normal((hidden, inputs)) * 0.05).astype(np.float32), "W1"
        ),
        numpy_helper.from_array(np.zeros(hidden, np.float32), "B1"),
        numpy_helper.from_array(
            (rng.standard_normal((10, hidden)) * w2_scale).astype(np.float32), "W2"
        ),
        numpy_helper.from_array(np.zeros(10, np.float32), "B2"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "W2", "B2"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, inputs])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def big_mlp(path: Path, seed: int = 0) -> Path:
    """Gemm(1024->256) + ReLU + Gemm(256->10): ~1.05 MB of float32 weights."""
    return _mlp(path, "big_mlp", 1024, 256, seed, w2_scale=0.05)


def wide_conv(path: Path, seed: int = 0, channels: int = 8, size: int = 64) -> Path:
    """Conv(channels->16, 3x3) + ReLU on 1 x channels x size x size: big activations, tiny weights.

    The default (~384 KB of activations) is refused by Aidge's memory planner for a
    192 KB part; ``channels=4, size=48`` passes the planner but not the linker there.
    """
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(
            (rng.standard_normal((16, channels, 3, 3)) * 0.1).astype(np.float32), "W"
        ),
        numpy_helper.from_array(np.zeros(16, np.float32), "B"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "wide_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, size, size])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def sample_input(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def onnx_reference(model_path: Path, x: np.ndarray) -> np.ndarray:
    """Run the model with onnxruntime: the reference the targets' outputs are checked against."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.asarray(sess.run(None, {name: x})[0])


def two_head_mlp(path: Path, seed: int = 0) -> Path:
    """Gemm(16->24) + ReLU, then two heads: Gemm(24->6) ``logits`` and Gemm(24->3) ``aux``.

    Two outputs of different sizes: what ``validate`` prints as a target x output matrix.
    """
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((24, 16)) * 0.3).astype(np.float32), "W1"),
        numpy_helper.from_array((rng.standard_normal(24) * 0.1).astype(np.float32), "B1"),
        numpy_helper.from_array((rng.standard_normal((6, 24)) * 0.3).astype(np.float32), "W2"),
        numpy_helper.from_array((rng.standard_normal(6) * 0.1).astype(np.float32), "B2"),
        numpy_helper.from_array((rng.standard_normal((3, 24)) * 0.3).astype(np.float32), "W3"),
        numpy_helper.from_array((rng.standard_normal(3) * 0.1).astype(np.float32), "B3"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "W2", "B2"], ["logits"], transB=1),
        helper.make_node("Gemm", ["r", "W3", "B3"], ["aux"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "two_head_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 6]),
            helper.make_tensor_value_info("aux", TensorProto.FLOAT, [1, 3]),
        ],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def conv_pool_classifier(path: Path, seed: int = 0) -> Path:
    """Conv(1->4, 3x3) + ReLU + MaxPool(2) + Flatten + Gemm(36->5) on a 1x1x6x6 image."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32), "W"),
        numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32), "B"),
        numpy_helper.from_array((rng.standard_normal((5, 36)) * 0.3).astype(np.float32), "FW"),
        numpy_helper.from_array((rng.standard_normal(5) * 0.1).astype(np.float32), "FB"),
        numpy_helper.from_array(np.array([1, 36], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "FW", "FB"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_pool_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def lenet(path: Path, seed: int = 0, hidden: int = 16, retrained: float = 1.0) -> Path:
    """A LeNet-style classifier on a 1x1x16x16 image: Conv(1->4, 3x3) + ReLU + MaxPool(2),
    Conv(4->8, 3x3) + ReLU + MaxPool(2), Flatten, Gemm(32->``hidden``) + ReLU, Gemm(->10).

    ``hidden`` widens the first dense layer (a changed model); ``retrained`` scales that
    layer's weights (the same model retrained: same shapes, other values)."""
    rng = np.random.default_rng(seed)

    def weights(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w3 = weights(hidden, 32, scale=0.2)
    inits = [
        numpy_helper.from_array(weights(4, 1, 3, 3), "W1"),
        numpy_helper.from_array(weights(4, scale=0.1), "B1"),
        numpy_helper.from_array(weights(8, 4, 3, 3), "W2"),
        numpy_helper.from_array(weights(8, scale=0.1), "B2"),
        numpy_helper.from_array((w3 * retrained).astype(np.float32), "W3"),
        numpy_helper.from_array(weights(hidden, scale=0.1), "B3"),
        numpy_helper.from_array(weights(10, hidden, scale=0.2), "W4"),
        numpy_helper.from_array(weights(10, scale=0.1), "B4"),
        numpy_helper.from_array(np.array([1, 32], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "W2", "B2"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p2", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "W3", "B3"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r3"]),
        helper.make_node("Gemm", ["r3", "W4", "B4"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "lenet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def lenet5(path: Path, seed: int = 0) -> Path:
    """LeNet-5 on a 1x1x28x28 image: Conv(1->6, 5x5) + ReLU + MaxPool(2), Conv(6->16, 5x5) +
    ReLU + MaxPool(2), Gemm(256->120) + ReLU, Gemm(120->84) + ReLU, Gemm(84->10).

    About 0.28 M multiply-accumulates and 0.18 MB of float32 weights: a model whose
    inference costs millions of instructions on a Cortex-M.
    """
    rng = np.random.default_rng(seed)

    def weights(shape: tuple[int, ...], name: str) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:]))
        return numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name
        )

    inits = [
        weights((6, 1, 5, 5), "W1"),
        numpy_helper.from_array(np.zeros(6, np.float32), "B1"),
        weights((16, 6, 5, 5), "W2"),
        numpy_helper.from_array(np.zeros(16, np.float32), "B2"),
        weights((120, 256), "F1"),
        numpy_helper.from_array(np.zeros(120, np.float32), "G1"),
        weights((84, 120), "F2"),
        numpy_helper.from_array(np.zeros(84, np.float32), "G2"),
        weights((10, 84), "F3"),
        numpy_helper.from_array(np.zeros(10, np.float32), "G3"),
        numpy_helper.from_array(np.array([1, 256], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "W2", "B2"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p2", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "F1", "G1"], ["h1"], transB=1),
        helper.make_node("Relu", ["h1"], ["a1"]),
        helper.make_node("Gemm", ["a1", "F2", "G2"], ["h2"], transB=1),
        helper.make_node("Relu", ["h2"], ["a2"]),
        helper.make_node("Gemm", ["a2", "F3", "G3"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "lenet5",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def fat_mlp(path: Path, seed: int = 0) -> Path:
    """Gemm(128->2048) + ReLU + Gemm(2048->10): 1.13 MB of float32 weights, more than the
    1 MiB flash of netduinoplus2; int8 (283 KB) fits. (A wider first layer would exceed the
    C++ template depth of Aidge's fully-connected kernel.)"""
    return _mlp(path, "fat_mlp", 128, 2048, seed, w2_scale=0.02)


def labelled_set(model_path: Path, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``count`` inputs uniform in [-1, 1] and the float model's own top-1 labels
    (onnxruntime): float32 then scores 100 %, and what int8 loses is the quantisation's."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in inp.shape)
    xs = np.random.default_rng(seed).uniform(-1, 1, (count, *shape)).astype(np.float32)
    ys = np.array([int(np.argmax(sess.run(None, {inp.name: x})[0])) for x in xs])
    return xs, ys


def ds_cnn(path: Path, seed: int = 0, channels: int = 64) -> Path:
    """The MLPerf Tiny keyword-spotting DS-CNN's shape, random weights (batch norms folded
    into the convolutions): a 1x1x49x10 MFCC input, Conv(1->64, 10x4, stride 2) + ReLU, four
    depthwise-separable blocks (depthwise Conv 3x3 + ReLU, pointwise Conv 1x1 + ReLU), an
    average pool over the 25x5 map, Gemm(64->12). About 2.7 M multiply-accumulates."""
    rng = np.random.default_rng(seed)

    def weights(shape: tuple[int, ...], name: str) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:]))
        return numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name
        )

    def bias(n: int, name: str) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(n) * 0.05).astype(np.float32), name)

    c = channels
    inits = [weights((c, 1, 10, 4), "W0"), bias(c, "B0")]
    nodes = [
        helper.make_node("Conv", ["x", "W0", "B0"], ["c0"], strides=[2, 2], pads=[4, 1, 5, 2]),
        helper.make_node("Relu", ["c0"], ["a0"]),
    ]
    for i in range(1, 5):
        inits += [weights((c, 1, 3, 3), f"DW{i}"), bias(c, f"DB{i}")]
        inits += [weights((c, c, 1, 1), f"PW{i}"), bias(c, f"PB{i}")]
        nodes += [
            helper.make_node("Conv", [f"a{i - 1}", f"DW{i}", f"DB{i}"], [f"d{i}"], group=c,
                             pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"d{i}"], [f"r{i}"]),
            helper.make_node("Conv", [f"r{i}", f"PW{i}", f"PB{i}"], [f"p{i}"]),
            helper.make_node("Relu", [f"p{i}"], [f"a{i}"]),
        ]  # fmt: skip
    inits += [
        weights((12, c), "FW"),
        bias(12, "FB"),
        numpy_helper.from_array(np.array([1, c], np.int64), "shape"),
    ]
    nodes += [
        helper.make_node("AveragePool", ["a4"], ["g"], kernel_shape=[25, 5]),
        helper.make_node("Reshape", ["g", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "FW", "FB"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "ds_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 49, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
