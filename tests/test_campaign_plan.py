"""The campaign file and its cells: validation before anything runs, keys by content.

Nothing is exported or run here: the plan is what decides which cells exist and which of
them an earlier run already holds, so its keys are checked to change with what a result
depends on (the model's bytes, an option, the calibration set, how a target is reached)
and with nothing else (adding a model, reordering the file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import modelzoo
from aidge_deploy.campaign.models import ModelKind
from aidge_deploy.campaign.plan import (
    AIDGE_CALIBRATION_LIMIT,
    plan_campaign,
    quantisation_record,
)
from aidge_deploy.campaign.spec import (
    CampaignError,
    TargetKind,
    TargetRef,
    load_campaign,
    parse_targets,
)
from aidge_deploy.lab import Reach
from aidge_deploy.modelexport import ApplicationKind
from aidge_deploy.multitarget import Lane


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("campaign-models")
    modelzoo.tiny_cnn(root / "models" / "tiny.onnx")
    modelzoo.conv_pool_classifier(root / "models" / "cpc.onnx")
    xs, ys = modelzoo.labelled_set(root / "models" / "tiny.onnx", 6)
    (root / "data").mkdir()
    np.savez(root / "data" / "val.npz", x=xs, y=ys)
    (root / "calib").mkdir()
    np.savez(root / "calib" / "c.npz", *list(xs[:3]))
    return root


def write(root: Path, doc: dict[str, Any], name: str = "campaign.yaml") -> Path:
    path = root / name
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def plan_of(root: Path, doc: dict[str, Any], **kw: Any) -> Any:
    path = write(root, doc)
    return plan_campaign(load_campaign(path), path, **kw)


BASE: dict[str, Any] = {
    "models": ["models/*.onnx"],
    "targets": ["host", "mps2-an386"],
    "options": {"dtype": ["float32", "int8"], "iterations": 5},
}


def test_cells_are_every_model_target_and_option_set(models: Path) -> None:
    plan = plan_of(models, BASE)
    assert [m.name for m in plan.models] == ["cpc", "tiny"]  # the glob, sorted
    assert len(plan.cells) == 2 * 2 * 2
    assert plan.varying == ("dtype",)
    ids = {c.id for c in plan.cells}
    assert len(ids) == 8 and all(c.key[:12] in c.id for c in plan.cells)
    host = next(c for c in plan.cells if c.target.label == "host")
    an386 = next(c for c in plan.cells if c.target.label == "mps2-an386")
    # how cells share the machine: a host benchmark alone, emulated boards in parallel
    assert host.target.lane is Lane.ALONE and host.target.reach is Reach.HOST
    assert an386.target.lane is Lane.PARALLEL and an386.target.reach is Reach.EMULATED
    assert {c.options.label(plan.varying) for c in plan.cells} == {"float32", "int8"}


def test_keys_change_with_what_a_result_depends_on_only(models: Path, tmp_path: Path) -> None:
    first = {c.id: c.key for c in plan_of(models, BASE).cells}
    # the same campaign, its lists in another order and one more target: same keys
    again = plan_of(models, {**BASE, "targets": ["netduinoplus2", "mps2-an386", "host"]})
    assert {c.id: c.key for c in again.cells if c.id in first} == first
    assert len(again.cells) == 12
    # another iteration count: every key changes
    other = plan_of(models, {**BASE, "options": {**BASE["options"], "iterations": 6}})
    assert not {c.key for c in other.cells} & set(first.values())
    # a calibration set changes the int8 cells only (float32 takes its first sample as
    # its sample input: those change too), a validation set every cell
    tiny = {c.key for c in plan_of(models, {**BASE, "models": ["models/tiny.onnx"]}).cells}
    calibrated = plan_of(models, {**BASE, "models": ["models/tiny.onnx"], "calibration": "calib"})
    assert tiny <= set(first.values()) and not {c.key for c in calibrated.cells} & tiny
    # one changed model byte: only that model's cells
    copy = tmp_path / "models"
    copy.mkdir()
    for name in ("tiny", "cpc"):
        (copy / f"{name}.onnx").write_bytes((models / "models" / f"{name}.onnx").read_bytes())
    base = plan_campaign(load_campaign(write(tmp_path, BASE)), tmp_path / "campaign.yaml")
    modelzoo.tiny_cnn(copy / "tiny.onnx", seed=1)
    changed = plan_campaign(load_campaign(write(tmp_path, BASE)), tmp_path / "campaign.yaml")
    before = {c.id.rsplit("-", 1)[0]: c.key for c in base.cells}
    after = {c.id.rsplit("-", 1)[0]: c.key for c in changed.cells}
    assert {k for k in before if before[k] != after[k]} == {k for k in before if "tiny" in k}


def test_int8_cells_record_their_quantisation(models: Path) -> None:
    plan = plan_of(models, {**BASE, "models": ["models/tiny.onnx"], "calibration": "calib"})
    int8 = next(c for c in plan.cells if c.options.dtype == "int8")
    f32 = next(c for c in plan.cells if c.options.dtype == "float32")
    record = quantisation_record(int8)
    assert record is not None and quantisation_record(f32) is None
    assert "aidge_quantization" in record["method"] and "MAX clipping" in record["method"]
    assert record["calibration_samples"] == 3 and record["calibration_source"].endswith("calib")
    assert record["calibration_samples"] <= AIDGE_CALIBRATION_LIMIT
    # the export is calibrated on those samples; a float32 one takes the first as its input
    bench = ApplicationKind.BENCHMARK
    assert len(int8.export_request(Path("."), bench, plan.measure).inputs) == 3
    assert len(f32.export_request(Path("."), bench, plan.measure).inputs) == 1
    # without a calibration set, the record says which data was used
    bare = quantisation_record(
        next(c for c in plan_of(models, BASE).cells if c.options.dtype == "int8")
    )
    assert bare is not None and bare["calibration"] == "random"
    assert "one random input" in bare["calibration_source"]


def test_validation_samples_and_per_model_sets(models: Path) -> None:
    doc = {
        "models": [{"path": "models/tiny.onnx", "dataset": "data", "calibration": "calib"}],
        "targets": ["mps2-an386"],
        "measure": {"validation": {"samples": 4}},
    }
    plan = plan_of(models, doc)
    model = plan.models[0]
    assert model.dataset is not None and len(model.dataset.arrays) == 4
    assert model.calibration is not None and len(model.calibration.arrays) == 3
    # a dataset of another input shape is refused, naming the model
    with pytest.raises(
        CampaignError, match=r"model cpc: .*val.npz: each sample must have the model's input shape"
    ):
        plan_of(models, {**doc, "models": [{"path": "models/cpc.onnx", "dataset": "data"}]})


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"models": ["models/*.onnx"]}, "targets"),
        ({**BASE, "targets": ["host", "host"]}, "named twice"),
        ({**BASE, "colour": "blue"}, "colour: Extra inputs are not permitted"),
        ({**BASE, "options": {"dtype": ["float16"]}}, "options.dtype"),
        ({**BASE, "options": {"iterations": [0]}}, "options.iterations"),
        ({**BASE, "options": {"dtype": ["int8", "int8"]}}, "repeated"),
        ({**BASE, "targets": ["lab:nucleo"]}, "need the campaign's 'lab' file"),
        ({**BASE, "targets": ["farm:mps2-an386"]}, "need the campaign's 'farm'"),
        ({**BASE, "targets": ["mps2-an368"]}, "Did you mean 'mps2-an386'"),
        ({**BASE, "targets": ["stm32h7a3"]}, "is a physical board: say which one"),
        ({**BASE, "models": ["nothing/*.onnx"]}, "matches nothing"),
        ({**BASE, "run": {"timeout": "nan"}}, "run.timeout"),
        ({**BASE, "measure": {"power": {"mps2-an368": "emulated"}}}, "not a target of the"),
    ],
)
def test_bad_files_are_refused_before_anything_runs(
    models: Path, doc: dict[str, Any], message: str
) -> None:
    with pytest.raises(Exception, match=message) as info:
        plan_of(models, doc)
    from aidge_deploy.errors import DeployError

    assert isinstance(info.value, DeployError) and info.value.hint


def test_int8_inputs_out_of_range_are_refused(models: Path, tmp_path: Path) -> None:
    (tmp_path / "calib").mkdir()
    np.save(tmp_path / "calib" / "big.npy", np.full((1, 3, 4, 4), 3.0, np.float32))
    (tmp_path / "m.onnx").write_bytes((models / "models" / "tiny.onnx").read_bytes())
    doc = {"models": ["m.onnx"], "targets": ["host"], "options": {"dtype": "int8"}}
    path = write(tmp_path, {**doc, "calibration": "calib"})
    with pytest.raises(CampaignError, match=r"reach 3, outside \[-1, 1\]"):
        plan_campaign(load_campaign(path), path)


def test_target_names() -> None:
    assert TargetRef.parse("host") == TargetRef(kind=TargetKind.NAME, name="host")
    assert TargetRef.parse("lab:nucleo").label == "lab:nucleo"
    farm = TargetRef.parse("farm:mps2-an386@an386-2")
    assert (farm.kind, farm.name, farm.board) == (TargetKind.FARM, "mps2-an386", "an386-2")
    assert [r.label for r in parse_targets("host, mps2-an386,,farm:mps3-an547")] == [
        "host",
        "mps2-an386",
        "farm:mps3-an547",
    ]
    with pytest.raises(CampaignError, match="NAME, lab:BOARD or farm:TARGET"):
        parse_targets("ssh:pi")
    with pytest.raises(CampaignError, match="twice"):
        parse_targets("host,host")


def test_farm_and_lab_targets_are_reached_as_their_files_say(models: Path) -> None:
    lab = models / "lab.yaml"
    lab.write_text(
        "version: 1\nboards:\n"
        "  an386: {target: mps2-an386, emulated: true}\n"
        "  nucleo: {target: stm32h7a3, probe: {unique_id: '0670FF'}}\n",
        encoding="utf-8",
    )
    doc = {
        **BASE,
        "options": {"dtype": "float32"},
        "targets": [
            "lab:an386",
            "lab:nucleo",
            "farm:mps3-an547",
            {"target": "mps2-an386", "farm": True, "board": "b2"},
        ],
        "lab": "lab.yaml",
        "farm": {"url": "http://127.0.0.1:9/api", "username": "ci"},
    }
    plan = plan_of(models, doc)
    by_label = {t.label: t for t in plan.targets}
    assert by_label["lab:an386"].lane is Lane.PARALLEL
    nucleo = by_label["lab:nucleo"]
    assert nucleo.lane is Lane.PER_BOARD and nucleo.resource == "probe-0670FF"
    farm = by_label["farm:mps3-an547"]
    assert farm.lane is Lane.REMOTE and dict(farm.deploy_options)["backend"] == "api"
    assert dict(by_label["farm:mps2-an386@b2"].deploy_options)["api_board_name"] == "b2"
    assert not any("password" in k for t in plan.targets for k, _ in t.deploy_options)


def test_export_folders_run_on_their_own_target(models: Path, export_factory: Any) -> None:
    export = Path(export_factory("benchmark", target="mps2-an386").path)
    doc = {"models": [str(export)], "targets": ["host", "mps2-an386"]}
    plan = plan_of(models, doc)
    assert [c.target.label for c in plan.cells] == ["mps2-an386"]
    assert plan.models[0].kind is ModelKind.EXPORT
    with pytest.raises(CampaignError, match="exports are for none of its targets"):
        plan_of(models, {**doc, "targets": ["host"]})


# ----------------------------------------------------------------------------- command line


def _invoke(*args: str) -> Any:
    from typer.testing import CliRunner

    from aidge_deploy.cli.main import app

    return CliRunner().invoke(app, list(args))


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_commands_refuse_bad_input_before_running(models: Path, tmp_path: Path) -> None:
    model = str(models / "models" / "tiny.onnx")
    cases = [
        (["campaign", str(tmp_path / "none.yaml")], "campaign file"),
        (["campaign", str(write(tmp_path, {"models": ["x"]}, "bad.yaml"))], "targets"),
        (["profile", model, "--targets", "host,mps2-an368"], "Did you mean 'mps2-an386'"),
        (["profile", model, "--targets", "host,host"], "twice"),
        (["profile", model, "--target", "mps2-an386", "--targets", "host"], "exclude each other"),
        (["profile", model, "--lab", str(tmp_path / "lab.yaml")], "--lab names the boards"),
        (["profile", model, "--dataset", str(tmp_path)], "--dataset goes with --targets"),
        (
            ["profile", model, "--targets", "host", "--dataset", str(tmp_path / "no")],
            "is not a folder of samples",
        ),
        (["profile", model, "--targets", "lab:nucleo"], "lab"),
        (["profile", model, "--targets", "farm:mps2-an386"], "farm"),
    ]
    for args, message in cases:
        res = _invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert message in _flat(res.output), (args, res.output)
        assert "Traceback" not in res.output
    # a folder that is not a campaign's is never written into
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    doc = write(tmp_path, {"models": [model], "targets": ["host"]}, "ok.yaml")
    res = _invoke("campaign", str(doc), "--out", str(tmp_path / "mine"))
    assert res.exit_code == 2 and "holds no campaign" in _flat(res.output)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_power_and_counters_per_target_key_only_those_cells(models: Path) -> None:
    plain = {c.id.rsplit("-", 1)[0]: c.key for c in plan_of(models, BASE).cells}
    doc = {**BASE, "measure": {"power": {"mps2-an386": "emulated"},
                               "counters": {"mps2-an386": "emulated"}}}  # fmt: skip
    plan = plan_of(models, doc)
    assert plan.measure.power_for("mps2-an386", "mps2-an386") == "emulated"
    assert plan.measure.power_for("host", "host") is None
    assert plan.measure.counters_for("mps2-an386", "mps2-an386") == ("emulated",)
    assert plan.measure.counters_for("host", "host") == ()
    changed = {c.id.rsplit("-", 1)[0] for c in plan.cells if c.key not in plain.values()}
    assert changed == {k for k in plain if "mps2-an386" in k}
