"""int8 exports: small-channel convolutions give the float model's answers, and a failed
quantisation names its step, the operator and what to do.

* Aidge 0.10.1 plans int8 activation rows 16 bytes wide; the kernels after a 4- or
  8-channel convolution then read padding (``exportfixes``). A LeNet-style model (4 and 8
  channels) exported int8 for the host agrees with onnxruntime on 24 inputs.
* A model with int8 weights (a TFLite model converted without dequantising them) is
  refused before Aidge sees it, naming the operator and its weight; a float32 export of it
  too (it would compute with the raw codes).
* Aidge's registrar message, raised inside the quantisation, becomes a
  ``QuantisationError`` naming the step, the kernel and the tensor's operator.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

import modelzoo
from aidge_deploy.cli.main import app
from aidge_deploy.errors import QuantisationError
from aidge_deploy.quantsteps import (
    STEP_CALIBRATION,
    STEP_MODEL_CHECK,
    check_weight_types,
    quantisation_failure,
)

runner = CliRunner()


def int8_weight_model(path: Path) -> Path:
    """Conv with int8 weights on a float input: what a converter that keeps a TFLite
    model's int8 weights writes."""
    w = np.random.default_rng(0).integers(-127, 127, (4, 1, 3, 3)).astype(np.int8)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W"], ["y"], name="conv_in", pads=[1, 1, 1, 1])],
        "hybrid",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
        [numpy_helper.from_array(w, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_integer_weights_are_refused_before_aidge_with_the_operator(tmp_path: Path) -> None:
    model = int8_weight_model(tmp_path / "hybrid.onnx")
    with pytest.raises(QuantisationError) as caught:
        check_weight_types(model, "int8")
    err = caught.value
    assert err.step == STEP_MODEL_CHECK and err.operator == "conv_in"
    assert "'W' of Conv 'conv_in' is int8" in err.message
    assert "dequantis" in (err.hint or "")
    res = runner.invoke(
        app, ["profile", str(model), "--target", "host", "--dtype", "int8", "--iterations", "1"]
    )
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert STEP_MODEL_CHECK in text and "Conv 'conv_in'" in text
    assert "not supported by the exporter" not in text  # the old, misleading hint
    float_run = runner.invoke(app, ["profile", str(model), "--target", "host", "--iterations", "1"])
    assert float_run.exit_code == 2
    assert "raw integer codes" in " ".join(float_run.output.split())


def test_a_registrar_failure_inside_quantisation_names_step_kernel_and_operator() -> None:
    # Aidge's own words, as aidge_quantization 0.10.1 raised them on the KWS reference model
    text = (
        'missing or invalid registrar key: "[int8, NCHW, [(64, 64), (1, 1), (10, 10), (4, 4)]]'
        ', [int8, Default, [(64, 64), (1, 1), (10, 10), (4, 4)]]" for registrable object '
        "N5Aidge16OperatorImpl_cpuINS_6Abs_OpEFvmPKvPvEFvvEEE\nDid you include/import the "
        "corresponding module?\n\nAvailable registrar keys are:\n    [float64, Any, []], "
        "[float64, Any, []]\n    [float32, Any, []], [float32, Any, []]\n    [int32, Any, []]"
    )
    err = quantisation_failure(STEP_CALIBRATION, RuntimeError(text))
    assert err.step == STEP_CALIBRATION
    assert "no Abs kernel for int8 tensors (it has float32, float64, int32)" in err.message
    assert "[64, 1, 10, 4]" in err.message
    assert "dequantis" in (err.hint or "")
    cle = quantisation_failure(
        STEP_CALIBRATION,
        RuntimeError("CLE: unexpected dimensions: w1=[64, 64, 1, 1] vs w2=[64, 12]"),
    )
    assert "cross-layer equalisation paired a weight of shape [64, 64, 1, 1]" in cle.message
    assert "Gemm" in (cle.hint or "")
    other = quantisation_failure(STEP_CALIBRATION, ValueError("scaling overflow"))
    assert "ValueError: scaling overflow" in other.message and "--calibration" in other.hint


@pytest.mark.slow
def test_int8_lenet_with_4_and_8_channels_agrees_with_onnxruntime_on_the_host(
    tmp_path: Path,
) -> None:
    import json

    from aidge_deploy.exportfixes import dense_activation_rows

    with dense_activation_rows() as installed:
        assert installed  # written against this Aidge's planner
    model = modelzoo.lenet(tmp_path / "lenet.onnx", seed=2)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    xs = np.random.default_rng(5).uniform(-1, 1, (3, 1, 1, 16, 16)).astype(np.float32)
    np.savez(inputs / "x.npz", *list(xs))
    res = runner.invoke(
        app,
        [
            "validate",
            str(model),
            "--targets",
            "host",
            "--dtype",
            "int8",
            "--inputs",
            str(inputs),
            "--work-dir",
            str(tmp_path / "work"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    (cell,) = json.loads(res.stdout)["matrix"]
    # before the correction: max abs error ~1 (the next layers read padding), cosine ~0.2
    assert cell["passed"] and cell["top1_agreement"] == 1.0, cell
    assert cell["cosine_similarity"] > 0.99
    assert cell["max_abs_error"] <= 8 * cell["quantisation_step"]


def test_a_gemm_stored_in_by_out_is_refused_before_it_crashes_the_quantisation(
    tmp_path: Path,
) -> None:
    """aidge_quantization 0.10.1 dies of a segmentation fault on a Gemm with ``transB=0``
    (what an optimiser's MatMul + Add fusion writes): refused, the same layer with
    ``transB=1`` accepted."""
    rng = np.random.default_rng(0)

    def gemm(trans_b: int) -> Path:
        w = rng.standard_normal((16, 4) if trans_b == 0 else (4, 16)).astype(np.float32)
        graph = helper.make_graph(
            [helper.make_node("Gemm", ["x", "W"], ["y"], name="dense", transB=trans_b)],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
            [numpy_helper.from_array(w, "W")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        path = tmp_path / f"gemm{trans_b}.onnx"
        onnx.save(model, str(path))
        return path

    with pytest.raises(QuantisationError) as caught:
        check_weight_types(gemm(0), "int8")
    assert caught.value.operator == "dense" and "transB=1" in (caught.value.hint or "")
    check_weight_types(gemm(0), "float32")  # float exports are not affected
    check_weight_types(gemm(1), "int8")


def test_an_output_the_int8_export_ends_before_its_softmax_is_dequantised_through_it(
    tmp_path: Path,
) -> None:
    """Aidge 0.10.1's int8 export of a model ending in Softmax prints the last FC's codes:
    recorded with the logits' scale and the Softmax, the deploy gives probabilities."""
    from aidge_deploy.quantisation import read_quantisation, symmetric_int8, write_quantisation

    q = symmetric_int8("_10_QFC_0_output_0", "int8_t", 6.35, 4, softmax_after=True)
    assert q.scale == pytest.approx(0.05) and "before the model's final Softmax" in q.basis
    write_quantisation(tmp_path, [q])
    (back,) = read_quantisation(tmp_path) or ()
    assert back == q
    codes = np.array([40, -20, 100, 0], np.int8)
    probs = back.dequantise(codes)
    logits = codes * 0.05
    np.testing.assert_allclose(probs, np.exp(logits) / np.exp(logits).sum())
    plain = symmetric_int8("y", "int8_t", 1.27, 4)
    np.testing.assert_allclose(plain.dequantise(codes), codes * 0.01)
