"""One check of a run before anything is exported (``configcheck.check_run``), the same for the
pytest plugin's ``aidge_run``, the CLI's ``profile`` and the API (``check_run``, ``deploy()``).

Each refusal is a typed error with both shapes or the offending value, and leaves the cache
without an export, build or run folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.config import DeployConfig
from aidge_deploy.configcheck import check_run
from aidge_deploy.errors import ConfigError
from aidge_deploy.modelexport import Dtype, ExportRequest
from aidge_deploy.modelinputs import check_inputs, model_inputs

#: (case, aidge_run keywords, what the refusal says) for the tiny CNN (input x: 1x3x4x4)
CASES: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "shape",
        "inputs=[np.zeros((1, 3, 8, 8), np.float32)]",
        ("input 0 has shape (1, 3, 8, 8); the model's input 'x' has shape (1, 3, 4, 4)",),
    ),
    (
        "dtype",
        "inputs=[np.zeros((1, 3, 4, 4), np.uint8)]",
        ("input 0 is uint8; the model's input 'x' is float32",),
    ),
    (
        "int8_range",
        "dtype='int8', inputs=[np.full((1, 3, 4, 4), 2.0, np.float32)]",
        ("int8 export: input values reach 2, outside [-1, 1]",),
    ),
    ("iterations", "iterations=10**9", ("needs 8,000,000,000 B of timing arrays",)),
    ("no_iterations", "iterations=0", ("--iterations must be at least 1, got 0",)),
]


def _nothing_made(cache: Path) -> bool:
    return not any(
        (cache / sub).exists() and any((cache / sub).iterdir())
        for sub in ("exports", "builds", "runs")
    )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(root))
    return root


def test_aidge_run_refuses_bad_runs_with_typed_errors_and_exports_nothing(
    pytester: pytest.Pytester, tiny_cnn: Path, cache: Path
) -> None:
    """Every case of issue 28 item 4 through the fixture: a ``ConfigError`` (a
    ``DeployError``, with its hint) raised by ``aidge_run``, nothing exported."""
    body = [
        "import numpy as np, pytest",
        "from aidge_deploy.errors import ConfigError",
        f"MODEL = {str(tiny_cnn)!r}",
    ]
    for case, kwargs, expected in CASES:
        body += [
            f"def test_{case}(aidge_run):",
            "    with pytest.raises(ConfigError) as refused:",
            f"        aidge_run(MODEL, {kwargs})",
            "    text = ' '.join(str(refused.value).split())",
            *(f"    assert {e!r} in text, text" for e in expected),
            "    assert refused.value.hint",
        ]
    body += [
        "def test_missing_model(aidge_run):",
        "    with pytest.raises(ConfigError, match='Model file .*missing.onnx not found'):",
        "        aidge_run('missing.onnx')",
    ]
    pytester.makepyfile(test_refusals="\n".join(body) + "\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=len(CASES) + 1)
    assert _nothing_made(cache), "a refused run exported, built or ran something"


def _request(model: Path, **changes: Any) -> ExportRequest:
    values: dict[str, Any] = {
        "model": model,
        "target": "host",
        "out_dir": Path("."),
        "nb_iterations": 10,
        **changes,
    }
    return ExportRequest(**values)


def test_the_api_refuses_the_same_runs(tiny_cnn: Path, cache: Path) -> None:
    """``check_run`` (what the CLI and the fixture call) with the same cases."""
    config = DeployConfig(target="host")
    for request, expected in (
        (_request(tiny_cnn, inputs=(np.zeros((1, 3, 8, 8), np.float32),)), "(1, 3, 8, 8)"),
        (_request(tiny_cnn, inputs=(np.zeros((1, 3, 4, 4), np.uint8),)), "is uint8"),
        (
            _request(tiny_cnn, dtype=Dtype.INT8, inputs=(np.full((1, 3, 4, 4), 2.0),)),
            "outside [-1, 1]",
        ),
        (_request(tiny_cnn, nb_iterations=10**9), "needs 8,000,000,000 B of timing arrays"),
        (_request(tiny_cnn.parent / "missing.onnx"), "not found"),
    ):
        with pytest.raises(ConfigError) as refused:
            check_run(config, "host", request=request)
        assert expected in str(refused.value)
    _, inputs = check_run(
        config, "host", request=_request(tiny_cnn, inputs=(np.ones((1, 3, 4, 4), np.float64),))
    )
    assert inputs[0].dtype == np.float32  # as the export takes them
    assert _nothing_made(cache)


def test_deploy_refuses_an_export_whose_iterations_do_not_fit(
    export_factory: Any, cache: Path, tmp_path: Path
) -> None:
    """``deploy()`` of an export made with 10**9 timed iterations: refused in Preflight,
    before its build (the program would overflow its stack and die of SIGSEGV)."""
    from aidge_deploy.api import deploy

    artifact = export_factory("benchmark", nb_iterations=10**9)
    build = tmp_path / "build"
    with pytest.raises(ConfigError, match="more than this machine's stack limit"):
        deploy(artifact, DeployConfig(target="host", build_dir=build))
    assert not build.exists() or not any(build.iterdir())


def test_the_cli_refuses_calibration_inputs_of_another_shape_or_range(
    tiny_cnn: Path, cache: Path, tmp_path: Path
) -> None:
    """``profile --calibration DIR`` goes through the same check: an int8 calibration set
    outside [-1, 1] is refused with the fixture's and the API's words."""
    folder = tmp_path / "calib"
    folder.mkdir()
    np.save(folder / "a.npy", np.full((1, 3, 4, 4), 3.0, np.float32))
    res = CliRunner().invoke(
        app, ["profile", str(tiny_cnn), "--dtype", "int8", "--calibration", str(folder)]
    )
    out = " ".join(res.output.split())
    assert res.exit_code == 2, out
    assert "int8 export: input values reach 3, outside [-1, 1]" in out
    assert _nothing_made(cache)


def test_model_inputs_and_their_checks(tmp_path: Path) -> None:
    import modelzoo

    mlp = modelzoo.two_head_mlp(tmp_path / "mlp.onnx")
    (declared,) = model_inputs(mlp)
    assert declared.dims == (1, 16) and declared.dtype == "float32"
    # a dynamic batch dimension takes any size
    import onnx

    proto = onnx.load(str(mlp))
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    dynamic = tmp_path / "dynamic.onnx"
    onnx.save(proto, str(dynamic))
    assert model_inputs(dynamic)[0].dims == (None, 16)
    (ok,) = check_inputs(dynamic, [np.zeros((4, 16))], "float32")
    assert ok.shape == (4, 16) and ok.dtype == np.float32
    with pytest.raises(
        ConfigError, match=r"shape \(4, 8\); the model's input 'x' has shape \(\?, 16\)"
    ):
        check_inputs(dynamic, [np.zeros((4, 8))], "float32")
    with pytest.raises(ConfigError, match="NaN or infinite"):
        check_inputs(mlp, [np.full((1, 16), np.nan)], "float32")
    assert check_inputs(mlp, [], "int8") == ()
