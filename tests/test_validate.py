"""``aidge-deploy validate``: two models outside the usual test set, on the host and three
emulated boards, against onnxruntime; a corrupted weight in an existing export is caught
with a failing exit; bad values exit 2 before anything is exported; a signal stops every
target's run (by process tree, as for ``profile``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import modelzoo
from aidge_deploy.cli.main import app
from aidge_deploy.validation.matrix import Tolerance, check_output, tolerance_for
from envparts import needs
from proctree import TreeWatch, assert_nothing_left, interrupt, named, patch_main

runner = CliRunner()
BOARDS = ("mps2-an386", "mps3-an547", "netduinoplus2")

needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm and the Arm cross toolchain are needed",
)


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
@pytest.mark.parametrize(
    ("maker", "dtype", "outputs"),
    [
        (modelzoo.conv_pool_classifier, "float32", ["y"]),
        (modelzoo.two_head_mlp, "int8", ["logits", "aux"]),
    ],
)
def test_matrix_over_host_and_three_emulated_boards(
    maker,
    dtype: str,
    outputs: list[str],
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    model = maker(tmp_path / "model.onnx", seed=7)
    report = tmp_path / "report"
    res = runner.invoke(
        app,
        [
            "validate",
            str(model),
            "--targets",
            ",".join(("host", *BOARDS)),
            "--dtype",
            dtype,
            "--report",
            str(report),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    cells = {(c["target"], c["output"]): c for c in doc["matrix"]}
    assert set(cells) == {(t, o) for t in ("host", *BOARDS) for o in outputs}
    for cell in cells.values():
        assert cell["passed"] and cell["top1_agreement"] == 1.0, cell
        assert cell["cosine_similarity"] > 0.999
        if dtype == "int8":
            # judged against the quantisation step: within a few steps of the float model
            assert cell["quantisation_step"] > 0
            assert cell["max_abs_error"] <= 8 * cell["quantisation_step"]
        else:
            assert cell["max_abs_error"] < 1e-4
    saved = json.loads((report / "validation.json").read_text())
    assert saved["passed"] and saved["reference"] == "onnxruntime"
    html = (report / "validation.html").read_text()
    assert "PASS" in html and "runs/mps3-an547/report.html" in html
    assert (report / "runs" / "netduinoplus2" / "manifest.json").is_file()


def _flat(text: str) -> str:
    """Console output with its line breaks and indents undone (any console width)."""
    return " ".join(text.split())


def _corrupt_aux_weight(export: Path) -> None:
    """One weight of the aux head (24 -> 3), in the generated parameter header (the export
    names it after its node: find the 3 x 24 weight array)."""
    sources = [
        p
        for p in export.rglob("dnn/src/parameters/*weights*.cpp")
        if "[3*24]" in p.with_suffix(".hpp").name
        or "[3*24]" in next(export.rglob(p.stem + ".hpp")).read_text()
    ]
    assert len(sources) == 1, sources
    text = sources[0].read_text()
    patched, n = re.subn(r"(\{\s*)(-?[0-9.eE+-]+)", r"\g<1>25.0", text, count=1)
    assert n == 1
    sources[0].write_text(patched)


@pytest.mark.slow
def test_a_corrupted_weight_in_an_existing_export_fails_naming_target_and_output(
    tmp_path: Path,
) -> None:
    """``--work-dir`` holds the exports: an export already there (same model and settings)
    is checked as it is — a weight edited by hand is run, not silently re-exported."""
    model = modelzoo.two_head_mlp(tmp_path / "model.onnx", seed=3)
    work = tmp_path / "work"
    args = ["validate", str(model), "--targets", "host", "--work-dir", str(work), "--json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["exports"]["host"].endswith("(exported)")
    again = runner.invoke(app, args)  # unchanged: nothing exported again
    assert again.exit_code == 0 and json.loads(again.stdout)["exports"]["host"].endswith("(reused)")
    _corrupt_aux_weight(work / "host-float32-0")
    res = runner.invoke(app, args)
    assert res.exit_code == 1, res.output
    assert "FAIL target host, output aux" in res.stderr
    assert "logits" not in res.stderr  # the other head is untouched
    assert json.loads(res.stdout)["exports"]["host"].endswith("(reused)")


@pytest.mark.slow
def test_int8_conv_export_agrees_with_the_float_model(tmp_path: Path) -> None:
    """Aidge 0.10.1's int8 export of a conv model (Conv+ReLU+MaxPool+Flatten+Gemm) gave
    outputs unrelated to the float model (cosine about 0.06, on the host and the emulated
    boards alike): its 16-byte int8 activation rows are read densely by the layers after a
    4-channel convolution. With the rows planned densely (``exportfixes``) it agrees."""
    model = modelzoo.conv_pool_classifier(tmp_path / "model.onnx", seed=7)
    res = runner.invoke(
        app, ["validate", str(model), "--targets", "host", "--dtype", "int8", "--json"]
    )
    assert res.exit_code == 0, res.output
    (cell,) = json.loads(res.stdout)["matrix"]
    assert cell["passed"] and cell["cosine_similarity"] > 0.99, cell
    assert cell["max_abs_error"] <= 8 * cell["quantisation_step"]


def test_int8_tolerance_is_counted_in_quantisation_steps() -> None:
    reference = [np.array([1.27, -0.5, 0.0])]
    tol = tolerance_for("int8_t", reference)
    assert tol.step == pytest.approx(0.01) and tol.atol == pytest.approx(0.04)
    assert tolerance_for("int8_t", reference, step=0.02).atol == pytest.approx(0.08)
    ok = check_output("t", "y", [np.array([127, -50, 2]) * 0.01], reference, tol)
    assert ok.passed and ok.top1_agreement == 1.0
    off = check_output("t", "y", [np.array([127, -30, 0]) * 0.01], reference, tol)
    assert not off.passed and "[1]" in off.worst
    float_tol = tolerance_for("float", reference)
    assert float_tol == Tolerance(atol=1e-5, rtol=1e-4)
    nan = check_output("t", "y", [np.array([np.nan, 0, 0])], reference, float_tol)
    assert not nan.passed


def test_bad_inputs_exit_2_before_anything_is_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(cache))
    model = modelzoo.two_head_mlp(tmp_path / "m.onnx")
    inputs = tmp_path / "in"
    inputs.mkdir()
    np.save(inputs / "a.npy", np.full((1, 16), 3.0, np.float32))
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "x.npy").write_bytes(b"not numpy at all")
    (tmp_path / "file").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    base = ["validate", str(model), "--targets", "host"]
    cases: list[tuple[list[str], str]] = [
        ([*base, "--dtype", "int8", "--inputs", str(inputs)], "outside [-1, 1]"),
        (["validate", str(model), "--targets", "host,mps2-an368"], "Did you mean 'mps2-an386'"),
        (["validate", str(model), "--targets", ""], "--targets names no target"),
        ([*base, "--timeout", "nan"], "--timeout must be a positive, finite number"),
        ([*base, "--inputs", str(tmp_path / "missing")], "does not exist"),
        ([*base, "--inputs", str(tmp_path / "file")], "is a file, not a folder"),
        ([*base, "--inputs", str(tmp_path / "garbage")], "is not a readable NumPy file"),
        ([*base, "--dataset", str(tmp_path / "file")], "is a file, not a folder"),
        ([*base, "--report", "/proc/aidge-x"], "cannot create the report under /proc"),
        ([*base, "--report", str(tmp_path / "file")], "is a file, not a folder"),
        ([*base, "--report", str(tmp_path / "other")], "holds no validation report"),
        ([*base, "--work-dir", str(tmp_path / "file")], "is a file, not a folder"),
        ([*base, "--dtype", "int4"], "Unknown dtype 'int4'"),
        (["validate", str(tmp_path / "none.onnx"), "--targets", "host"], "not found"),
    ]
    for args, message in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert message in _flat(res.output), (args, res.output)
        assert "Internal error" not in res.output
    np.save(inputs / "a.npy", np.zeros((1, 15), np.float32))
    res = runner.invoke(app, [*base, "--inputs", str(inputs)])
    assert res.exit_code == 2 and "has 15 values" in _flat(res.output), res.output
    assert not (cache / "exports").exists(), "a bad value cost an export"


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_dataset_accuracy_on_a_board_and_on_the_host(tmp_path: Path) -> None:
    model = modelzoo.conv_pool_classifier(tmp_path / "model.onnx", seed=5)
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (4, 1, 1, 6, 6)).astype(np.float32)
    predicted = [int(np.argmax(modelzoo.onnx_reference(model, s))) for s in x]
    labels = [*predicted[:3], (predicted[3] + 1) % 5]  # three right, one wrong
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    np.savez(dataset / "part0.npz", x=x, y=np.array(labels))
    res = runner.invoke(
        app,
        [
            "validate",
            str(model),
            "--targets",
            "host,mps2-an386",
            "--dataset",
            str(dataset),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["reference_accuracy"] == pytest.approx(0.75)
    accuracy = {a["target"]: a for a in doc["accuracy"]}
    assert accuracy["mps2-an386"]["accuracy"] == pytest.approx(0.75)
    assert accuracy["mps2-an386"]["samples"] == 4
    # the host has no interactive protocol: its output export's one build, fed every sample
    host = accuracy["host"]
    assert (host["accuracy"], host["samples"], host["provenance"]) == (
        pytest.approx(0.75),
        4,
        "host",
    )


@pytest.fixture(scope="module")
def hanging_exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A model and a ``--work-dir`` holding validate's own exports of it for the host (its
    program sleeps) and mps2-an386 (its firmware spins): a signal lands mid-run on both."""
    from aidge_deploy.validation.inputs import check_validation
    from aidge_deploy.validation.runner import output_export

    root = tmp_path_factory.mktemp("validate-signals")
    model = modelzoo.two_head_mlp(root / "model.onnx")
    work = root / "work"
    request = check_validation(model, ["host", "mps2-an386"], work_dir=work)
    statements = {
        "host": 'std::printf("started\\n"); std::fflush(stdout); sleep(600);',
        "mps2-an386": 'printf("spinning\\r\\n"); for (;;) { __asm volatile("nop"); }',
    }
    for target, statement in statements.items():
        patch_main(Path(output_export(request, target, 0).path), statement)
    return model, work


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name
)
def test_a_signal_stops_every_target_and_leaves_no_process(
    sig: signal.Signals,
    hanging_exports: tuple[Path, Path],
    cli: Callable[..., Any],
) -> None:
    model, work = hanging_exports
    builds = Path(os.environ["AIDGE_DEPLOY_CACHE_DIR"]) / "builds"
    # the worker's cache is shared: an earlier test's SIGKILLed build may have left one
    before = set(builds.glob(".tmp-*"))
    proc = cli("validate", str(model), "--targets", "host,mps2-an386", "--work-dir", str(work))
    watch = TreeWatch(proc.pid)
    watch.wait_for(
        lambda ps: named("run_export")(ps) and named("qemu-system-arm")(ps),
        "both targets running at once",
    )
    stderr = interrupt(proc, sig, watch)
    assert_nothing_left(watch)
    assert "Traceback" not in stderr
    left = set(builds.glob(".tmp-*")) - before
    assert not left, f"a private build folder was left behind: {sorted(left)}"
