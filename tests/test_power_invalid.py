"""An invalid power capture publishes no figure as valid (issue 34, item 4).

The capture is a JLS file written here with pyjls (``power_support.write_jls``), as the
instrument's recorder writes one: 80 Hz, a gate 0.5 s wide, so its window holds 40 samples
where at least ``MIN_POWER_WINDOW_SAMPLES`` are needed (``power.samples_too_few``). Its
energy per inference would read 165 µJ. Every output must say the figure is unavailable
(the reason naming the code) and exit 5: ``power analyse`` (text and JSON), and a board run
on the SSH test board with ``--power jls:FILE`` (CLI text, ``--json``, summary.json, the HTML
report, the results history).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from aidge_deploy.history import HistoryStore
from aidge_deploy.report import verify_bundle
from aidge_deploy.report.schemas import SchemaName, schema_errors
from envparts import missing
from power_support import write_jls

try:
    import pyjls  # noqa: F401
except ImportError:
    missing("pyjls is not installed (it comes with the package's dependencies)")

N = 250
#: what the window's energy ÷ N would read: 25 mA x 3.3 V x 0.5 s ÷ 250
WOULD_BE_UJ = 165.0
CODE = "power.samples_too_few"


@pytest.fixture(scope="module")
def capture_80hz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("captures") / "cap80.jls"
    energy = write_jls(path, rate=80, seconds=10.0, gate=(2.0, 2.5))
    assert energy / N * 1e6 == pytest.approx(WOULD_BE_UJ)
    return path


def _power_figures(doc: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every figure (``value`` or ``values`` with a provenance) under ``doc``."""
    if isinstance(doc, dict):
        if "provenance" in doc and ("value" in doc or "values" in doc):
            yield path, doc
        for key, value in doc.items():
            yield from _power_figures(value, f"{path}/{key}")
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _power_figures(value, f"{path}[{index}]")


def _published_silicon(doc: Any) -> list[str]:
    """The figures of ``doc`` that publish a silicon value (an empty series publishes none)."""
    bad = []
    for where, fig in _power_figures(doc):
        if fig["provenance"] != "silicon":
            continue
        if fig.get("value") is not None or fig.get("values"):
            bad.append(f"{where} = {fig.get('value', fig.get('values'))}")
    return bad


#: the figures of the plan: N x the clean latency of the board's own profile run (its
#: latency, silicon and valid), not anything read from the capture
PLAN_FIGURES = ("power_window_expected",)


def _capture_part(power: dict[str, Any]) -> dict[str, Any]:
    """The power block less its plan and terminal record: those come from the board's own
    profile run (its clean latency) and firmware, not from the capture, and stay valid."""
    part = {k: v for k, v in power.items() if k not in ("plan", "terminal")}
    part["metrics"] = [m for m in power["metrics"] if m["name"] not in PLAN_FIGURES]
    return part


def _power_metrics(named: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in named.items()
        if k.startswith(("power_", "energy_")) and k not in PLAN_FIGURES
    }


def _assert_unavailable_for_the_capture(metrics: dict[str, Any]) -> None:
    for name in ("energy_per_inference", "power_average", "power_samples", "power_idle"):
        metric = metrics[name]
        assert metric["value"] is None, (name, metric)
        assert CODE in metric["unavailable_reason"], (name, metric)


def test_power_analyse_publishes_no_figure_of_an_invalid_capture(capture_80hz: Path) -> None:
    res = CliRunner().invoke(
        app, ["power", "analyse", str(capture_80hz), "--inferences", str(N), "--json"]
    )
    assert res.exit_code == 5, res.output
    out = json.loads(res.stdout)
    assert CODE in out["invalid_reason"]
    assert _published_silicon(_capture_part(out)) == []
    assert out["trace"] is None and out["gate_detection"] is None
    _assert_unavailable_for_the_capture({m["name"]: m for m in out["metrics"]})
    text = CliRunner().invoke(
        app, ["power", "analyse", str(capture_80hz), "--inferences", str(N)], env={"COLUMNS": "200"}
    )
    assert text.exit_code == 5
    flat = " ".join(text.output.split())
    assert "INVALID capture: no figure published" in flat
    assert f"unavailable (invalid capture, {CODE}" in flat
    assert "165" not in flat and "silicon │" not in text.output


@pytest.mark.ssh
@pytest.mark.slow
def test_a_board_run_with_an_invalid_capture_publishes_it_nowhere(
    ssh_board: Any, export_factory: Any, capture_80hz: Path, tmp_path: Path
) -> None:
    artifact = export_factory("benchmark", target="raspberrypi", nb_iterations=5)
    history = tmp_path / "history.db"
    bundle = tmp_path / "bundle"
    args = [
        "run",
        str(artifact.path),
        "--target",
        "raspberrypi",
        "--backend",
        "ssh",
        "--ssh-host",
        ssh_board.host,
        "--ssh-port",
        str(ssh_board.port),
        "--ssh-user",
        ssh_board.user,
        "--ssh-key-path",
        str(ssh_board.key_path),
        "--ssh-known-hosts-path",
        str(ssh_board.known_hosts_path),
        "--power",
        f"jls:{capture_80hz}",
        "--power-inferences",
        str(N),
        "--history",
        str(history),
    ]
    # CLI text, the bundle and the history
    res = CliRunner().invoke(app, [*args, "--report", str(bundle)], env={"COLUMNS": "200"})
    assert res.exit_code == 5, res.output
    flat = " ".join(res.output.split())
    assert CODE in flat and "INVALID capture: no figure published" in flat
    assert "165 uJ" not in flat and "165 µJ" not in flat
    verify_bundle(bundle)
    summary = json.loads((bundle / "summary.json").read_text())
    assert schema_errors(SchemaName.SUMMARY, summary) == []
    assert summary["validity"]["status"] == "invalid"
    power = summary["power"]
    assert CODE in power["invalid_reason"]
    assert _published_silicon(_capture_part(power)) == []
    assert _published_silicon(_power_metrics(summary["metrics"])) == []
    _assert_unavailable_for_the_capture(summary["metrics"])
    assert all("energy" not in layer["metrics"] for layer in summary["layers"])
    # the raw capture stays, for a later analysis
    assert power["raw_files"] == ["logs/power/cap80.jls"]
    html = (bundle / "report.html").read_text()
    start = html.index("<h2>Power")
    section = html[start : html.index("</section>", start)]
    assert "data-power-invalid='1'" in section and CODE in section
    assert "165" not in section and "gate-detection" not in section
    rows = re.findall(r"<tr data-metric='(\w+)' data-provenance='(\w+)'>(.*?)</tr>", section)
    assert {name for name, _, _ in rows} >= {"energy_per_inference", "power_average"}
    for name, provenance, cells in rows:
        if name not in PLAN_FIGURES:
            assert provenance == "none" and "prov-silicon" not in cells, (name, cells)
    with HistoryStore(history) as store:
        (record,) = store.records()
    recorded = _power_metrics(
        {k: {**vars(f), "provenance": str(f.provenance)} for k, f in record.figures.items()}
    )
    assert recorded, "the power figures are recorded, as unavailable"
    assert _published_silicon(recorded) == []
    assert CODE in str(recorded["energy_per_inference"]["unavailable_reason"])
    listed = CliRunner().invoke(app, ["history", "list", "--history", str(history), "--json"])
    assert listed.exit_code == 0, listed.output
    assert _published_silicon(_power_metrics(json.loads(listed.stdout)[0]["figures"])) == []
    # --json: the result as JSON
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 5, res.output
    doc = json.loads(res.stdout)
    assert CODE in doc["power"]["invalid_reason"]
    assert _published_silicon(_capture_part(doc["power"])) == []
    measured = {m["name"]: m for m in doc["measurements"]}
    assert _published_silicon(_power_metrics(measured)) == []
    _assert_unavailable_for_the_capture(measured)
