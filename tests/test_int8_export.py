"""int8 exports: small-channel convolutions give the float model's answers, and a failed
quantisation names its step, the operator and what to do.

* Aidge 0.10.1 plans int8 activation rows 16 bytes wide; the kernels after a 4- or
  8-channel convolution then read padding (``exportfixes``). A LeNet-style model (4 and 8
  channels) exported int8 for the host agrees with onnxruntime on 24 inputs.
* Aidge 0.10.1 labels the Quantizer and ReLU after a residual Add with a stale NCHW layout
  in the Cortex-M export and transposes from it (ResNet-8 int8 on mps2-an386 was wrong): a
  residual block exported for mps2-an386 stays NHWC with ``exportfixes.layouts_from_parents``,
  and is still mislabelled without it.
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


def _residual_block(path: Path) -> Path:
    """ResNet-8's first stack at 8x8: conv-ReLU, then a block whose Add meets the shortcut
    before a ReLU and the next convolution (where Aidge 0.10.1 mislabels the layout)."""
    from aidge_deploy.mlperf.build import _Graph

    g = _Graph("residual", seed=3)
    x, size = g.conv("input", 3, 16, (3, 3), 1, (8, 8))
    x = g.node("Relu", [x])
    y, _ = g.conv(x, 16, 16, (3, 3), 1, size)
    y, _ = g.conv(g.node("Relu", [y]), 16, 16, (3, 3), 1, size)
    x = g.node("Relu", [g.node("Add", [x, y])])
    x, _ = g.conv(x, 16, 16, (3, 3), 1, size)
    x = g.node("AveragePool", [g.node("Relu", [x])], kernel_shape=list(size))
    y = g.dense(g.flatten(x, 16), 16, 10)
    return g.save((1, 3, 8, 8), y, (1, 10), path)


def _layouts(export: Path) -> dict[str, str]:
    """Each generated layer's output layout, in the forward's order."""
    import re

    found = {}
    for header in (export / "dnn" / "include" / "layers").glob("*.h"):
        m = re.search(r"_OUTPUT_0_DEV_FMT export_cpp::DataFormat_T::(\w+)", header.read_text())
        if m and not header.stem.endswith(("_weights", "_biases")):
            found[header.stem] = m[1]
    return dict(sorted(found.items(), key=lambda kv: int(kv[0].split("_")[1])))


@pytest.mark.parametrize("corrected", [True, False], ids=["corrected", "aidge-0.10.1"])
def test_a_residual_add_keeps_its_layout_in_the_cortex_m_int8_export(
    tmp_path: Path, corrected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Aidge 0.10.1 labels the Quantizer and ReLU after a residual Add NCHW while their data
    is NHWC, then transposes from that label (scrambling the activations: ResNet-8 int8 on
    mps2-an386 disagreed with its float model). ``layouts_from_parents`` keeps the Add's
    layout: no Transpose before the pooling, every layer NHWC. Without it the defect is
    still there (this fails once Aidge fixes it: then the correction can go)."""
    import contextlib

    from aidge_deploy import exportfixes
    from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model

    if not corrected:
        monkeypatch.setattr(
            exportfixes, "layouts_from_parents", lambda: contextlib.nullcontext(False)
        )
    else:
        with exportfixes.layouts_from_parents() as installed:
            assert installed  # written against this Aidge's adapt_node
    model = _residual_block(tmp_path / "residual.onnx")
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    export_model(
        ExportRequest(
            model, "mps2-an386", tmp_path / "export", dtype=Dtype.INT8,
            kind=ApplicationKind.OUTPUT, inputs=(x,),
        )
    )  # fmt: skip
    layouts = _layouts(tmp_path / "export")
    names = list(layouts)
    pool = next(i for i, n in enumerate(names) if "Pooling" in n)
    before_pool = {n: layouts[n] for n in names[: pool + 1]}
    add = next(n for n in names if "_Add_" in n)
    after_add = names[names.index(add) + 1]
    assert layouts[add] == "NHWC", layouts
    if corrected:
        assert set(before_pool.values()) == {"NHWC"}, layouts
        assert not any("Transpose" in n for n in before_pool), layouts
    else:
        assert layouts[after_add] == "NCHW", layouts  # the Add's NHWC data, labelled NCHW
        assert any("Transpose" in n for n in before_pool), layouts
