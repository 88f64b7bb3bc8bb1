"""The MLPerf Tiny reference models as a set: random-weight models of the published shapes
(MACs and parameters equal to the counts of the trained models), and the published
closed-division Cortex-M rows with their sources (``aidge-deploy reference``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.mlperf.build import build_model
from aidge_deploy.mlperf.models import MODELS, TinyModel, count_onnx
from aidge_deploy.mlperf.published import (
    beside_published,
    identify_model,
    published_rows,
    select_rows,
)

runner = CliRunner()


@pytest.mark.parametrize("name", list(TinyModel))
def test_random_models_have_the_published_macs_and_parameters(
    name: TinyModel, tmp_path: Path
) -> None:
    spec = MODELS[name]
    path = build_model(name, tmp_path / f"{name}.onnx", seed=3)
    counts = count_onnx(path)
    assert counts.within(spec, 0.01), (counts, spec.macs, spec.params)
    # the builder reproduces the reference layer for layer: the counts are exact
    assert (counts.macs, counts.params) == (spec.macs, spec.params)
    assert identify_model(counts.macs, counts.params) is name
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,) = session.get_inputs()
    assert tuple(inp.shape) == spec.input_shape
    assert session.get_outputs()[0].shape == [1, spec.outputs]


def test_models_build_and_list_on_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "kws.onnx"
    res = runner.invoke(app, ["models", "build", "kws", "--out", str(out), "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert out.is_file() and "2,656,768 MACs, 22,604 parameters" in " ".join(res.output.split())
    listed = runner.invoke(app, ["models", "list"], env={"COLUMNS": "250"})
    assert listed.exit_code == 0
    for spec in MODELS.values():
        assert f"{spec.macs:,}" in listed.output
    bad = runner.invoke(app, ["models", "build", "resnet50", "--out", str(out)])
    assert bad.exit_code == 2 and "kws, ic, vww, ad" in bad.output


def test_the_published_rows_carry_their_sources_and_never_a_made_up_figure() -> None:
    rows = published_rows()
    assert len(rows) > 100
    rounds = {r.round for r in rows}
    assert rounds == {"v1.0", "v1.1", "v1.2", "v1.3"}
    for r in rows:
        assert r.core.startswith("cortex-m") and r.clock_hz > 0 and r.latency_s > 0
        assert r.repository == f"mlcommons/tiny_results_{r.round}"
        assert len(r.commit) == 40 and r.result_path.startswith("closed/")
        assert r.result_path.endswith(f"/{r.benchmark.value}/performance/results.txt")
        assert "/systems/" in r.system_path
    # a row read from the v1.2 summary as well: ST's NUCLEO-L4R5ZI, KWS, 23.155 inf./s
    (st,) = [r for r in select_rows("cortex-m4", "kws")
             if r.round == "v1.2" and r.submitter == "STMicroelectronics"]  # fmt: skip
    assert st.latency_s == pytest.approx(1 / 23.155, rel=1e-4)
    assert (st.engine, st.engine_version, st.clock_hz) == ("X-CUBE-AI", "9.0", 120e6)
    assert st.cycles_per_mac == pytest.approx(1 / 23.155 * 120e6 / 2_656_768)


def test_reference_prints_the_cortex_m4_rows_with_their_sources() -> None:
    res = runner.invoke(app, ["reference", "--core", "cortex-m4"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    text = res.output
    assert "NUCLEO-L4R5ZI" in text and "X-CUBE-AI 9.0" in text and "cycles/MAC" in text
    assert "mlcommons/tiny_results_v1.2@" in text
    as_json = runner.invoke(app, ["reference", "--core", "m4", "--model", "kws", "--json"])
    rows = json.loads(as_json.stdout)
    assert rows and {r["core"] for r in rows} == {"cortex-m4"}
    assert {r["benchmark"] for r in rows} == {"kws"}
    assert all(r["source"].startswith("mlcommons/tiny_results_v1.") for r in rows)
    unknown = runner.invoke(app, ["reference", "--core", "cortex-a53"])
    assert unknown.exit_code == 2 and "cortex-m4" in unknown.output


def test_an_estimate_beside_the_published_rows_is_a_ratio_per_engine() -> None:
    beside = beside_published(TinyModel.KWS, "cortex-m4", cycles=10_500_000.0, dtype="int8")
    engines = [b.row.engine for b in beside]
    assert len(engines) == len(set(engines)) >= 3  # the fastest row of each engine
    assert [b.row.cycles for b in beside] == sorted(b.row.cycles for b in beside)
    for b in beside:
        assert b.row.dtype in ("int8", None)
        assert b.ratio == pytest.approx(10_500_000.0 / b.row.cycles)
        assert b.cycles_per_mac == pytest.approx(10_500_000.0 / 2_656_768)
    assert os.environ.get("COLUMNS")  # the session pins it (conftest)
