"""``validate --inputs``: one export and one build per target, every input fed to that build.

28 inputs on the host and a real emulated board (mps2-an386, QEMU), float32 and int8: one
export and one build per target (counted from what is on disk: the ``--work-dir`` exports,
the runs that have a build log, the patched copies), every input's outputs within tolerance
of onnxruntime. A program whose input array is not the export's input size is refused with
a typed error and a hint, and ``validate`` then says it builds once per input.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import modelzoo
from aidge_deploy.cli.main import app
from envparts import needs

runner = CliRunner()
N = 28

needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm and the Arm cross toolchain are needed",
)


def _inputs(folder: Path, shape: tuple[int, ...], count: int, seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1, 1, (count, *shape)).astype(np.float32)
    folder.mkdir()
    np.savez(folder / "inputs.npz", *xs)  # every array of an .npz is a sample
    return xs


def _run_dir(cache: Path) -> Path:
    (found,) = (cache / "runs").glob("*-validate-*")
    return found


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_28_inputs_build_once_per_target_and_agree_with_onnxruntime(
    dtype: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(cache))
    model = modelzoo.conv_pool_classifier(tmp_path / "model.onnx", seed=7)
    xs = _inputs(tmp_path / "in", (1, 1, 6, 6), N)
    predicted = {int(np.argmax(modelzoo.onnx_reference(model, x))) for x in xs}
    assert len(predicted) > 1, "the inputs must not all give one class"
    work = tmp_path / "work"
    targets = ("host", "mps2-an386")
    res = runner.invoke(
        app,
        [
            "validate",
            str(model),
            "--targets",
            ",".join(targets),
            "--inputs",
            str(tmp_path / "in"),
            "--dtype",
            dtype,
            "--work-dir",
            str(work),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["inputs"] == N and doc["passed"]
    for target in targets:
        assert doc["feeds"][target] == {"feed": "one-build", "builds": 1, "reason": None}
    # what is on disk: one export per target, one run that built, N - 1 patched copies
    assert sorted(p.name for p in work.iterdir()) == [f"{t}-{dtype}-0" for t in targets]
    runs = _run_dir(cache)
    for target in targets:
        folders = [runs / f"{target}-{i}" for i in range(N)]
        assert [f for f in folders if (f / "build.log").is_file()] == [folders[0]]
        copies = [p for f in folders[1:] for p in (f / "program").iterdir()]
        assert len(copies) == N - 1
        assert len({p.read_bytes() for p in copies}) == N - 1  # each its own input
    # every input's outputs against onnxruntime (the matrix holds all N of each target)
    cells = {c["target"]: c for c in doc["matrix"]}
    assert set(cells) == set(targets)
    for cell in cells.values():
        assert cell["passed"] and cell["top1_agreement"] == 1.0, cell
        if dtype == "float32":
            assert cell["max_abs_error"] < 1e-4, cell
        else:
            assert cell["max_abs_error"] <= 4 * cell["quantisation_step"], cell


def _widen_input_array(export: Path, extra: int) -> None:
    """The export's input array declared ``extra`` elements longer (zero-filled): the
    program still runs input 0, but its symbol is not the input tensor's size."""
    for path in (export / "data").iterdir():
        text = path.read_text()
        widened, n = re.subn(r"(input_0\[[0-9*]+)\]", rf"\1+{extra}]", text)
        if n:
            path.write_text(widened)


@pytest.mark.slow
def test_an_input_array_of_another_size_is_refused_and_validate_says_it_builds_per_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aidge_deploy.errors import ProgramPatchError
    from aidge_deploy.validation.feed import locate_input
    from aidge_deploy.validation.inputs import check_validation
    from aidge_deploy.validation.runner import output_export

    cache = tmp_path / "cache"
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(cache))
    model = modelzoo.two_head_mlp(tmp_path / "model.onnx", seed=3)
    _inputs(tmp_path / "in", (1, 16), 3)
    work = tmp_path / "work"
    request = check_validation(model, ["host"], inputs=tmp_path / "in", work_dir=work)
    export = Path(output_export(request, "host", 0).path)
    _widen_input_array(export, 4)
    args = ["validate", str(model), "--targets", "host", "--inputs", str(tmp_path / "in")]
    res = runner.invoke(app, [*args, "--work-dir", str(work)])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "one export and build per input, 3 build(s)" in flat, res.output
    assert "is 80 bytes; the export's input [1, 16] of float is 64 bytes" in flat, res.output
    assert sorted(p.name for p in work.iterdir()) == [f"host-float32-{i}" for i in range(3)]

    # the refusal itself, on the program that was built: typed, with a hint
    (program,) = (cache / "builds").glob("host-float32-0-*/run_export")
    manifest_input = json.loads((export / ".aidge-export.json").read_text())["inputs"][0]
    with pytest.raises(ProgramPatchError, match="is 80 bytes") as caught:
        locate_input(program, manifest_input)
    assert caught.value.hint and "once per input" in caught.value.hint
    with pytest.raises(ProgramPatchError, match="is not a symbol"):
        locate_input(program, {**manifest_input, "name": "no_such_input"})
