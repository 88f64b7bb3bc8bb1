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


def test_a_model_too_big_for_the_flash_is_refused_before_the_export(tmp_path: Path) -> None:
    """The float32 autoencoder's 265,864 parameters need 1,063,456 B: more than the 1 MiB of
    netduinoplus2's flash. Refused in seconds, naming the memory, the need and the size."""
    model = build_model("ad", tmp_path / "ad.onnx")
    res = runner.invoke(app, ["profile", str(model), "--target", "netduinoplus2",
                              "--work-dir", str(tmp_path / "work")])  # fmt: skip
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "does not fit netduinoplus2" in text and "1,063,456 B of flash" in text
    assert "is 1,048,576 B" in text and "--dtype int8" in text
    assert not (tmp_path / "work").exists()  # nothing exported, nothing built


def test_the_report_of_a_kws_run_shows_the_published_rows_and_the_ratio() -> None:
    from aidge_deploy.report.published_html import published_section

    summary = {
        "target": "mps2-an386",
        "timing_model": {"model": "M4 timing model", "core": "cortex-m4"},
        "metrics": {
            "macs": {"value": 2_656_768},
            "params": {"value": 22_604},
            "estimated_cycles": {
                "value": 14_880_419.0,
                "provenance": "estimated",
                "description": "estimated cycles (M4 timing model)",
            },
        },
    }
    metadata = {"export": {"manifest": {"inputs": [{"dtype": "int8_t"}]}}}
    page = published_section(summary, metadata, lambda p: f"[{p}]")
    assert 'data-published="kws"' in page and "5.60 cycles/MAC" in page
    assert "X-CUBE-AI 9.0" in page and "mlcommons/tiny_results_v1.2@" in page
    assert "[estimated]" in page and "pass" in page and "not a pass or a fail" in page
    float_run = {"export": {"manifest": {"inputs": [{"dtype": "float"}]}}}
    float_page = published_section(summary, float_run, str)
    assert "float32" in float_page
    assert published_section({**summary, "metrics": {"macs": {"value": 1000}}}, metadata, str) == ""


def test_activations_too_big_for_the_ram_are_refused_at_the_export(tmp_path: Path) -> None:
    """The float32 VWW model's weights fit netduinoplus2's flash, but Aidge's memory plan
    cannot place its first activations in the board's RAM: a fit error naming the buffer and
    what was left, from the export, before anything is built."""
    model = build_model("vww", tmp_path / "vww.onnx")
    res = runner.invoke(app, ["profile", str(model), "--target", "netduinoplus2",
                              "--work-dir", str(tmp_path / "work")])  # fmt: skip
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "does not fit netduinoplus2: an activation buffer of 147,456 B" in text, text
    assert "122,880 B left" in text and "int8" in text
    assert not list((tmp_path / "work").rglob("*.elf"))  # nothing built
