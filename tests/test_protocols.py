"""Output-protocol parsers on logs captured from real runs, and on their corrupted variants.

Host logs: real exports of ``tiny_cnn`` built and run here (``tests/data/logs/host``).
UART logs: the lab study's real QEMU transcripts (``tests/data/logs/contract``) and, when the
board-integration work has captured them, this project's own QEMU logs (``tests/data/logs/qemu``).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aidge_core.export_utils.artifact import ExportManifest

from aidge_deploy.benchmark_api import build_results_from_uart_log
from aidge_deploy.errors import ProtocolError
from aidge_deploy.protocols.base import ProtocolResult
from aidge_deploy.protocols.registry import get_protocol, list_protocols
from aidge_deploy.protocols.uart import parse_uart_log_text

LOGS = Path(__file__).parent / "data" / "logs"
HOST = LOGS / "host"
CONTRACT = LOGS / "contract"
QEMU = LOGS / "qemu"


def load(folder: Path, name: str) -> tuple[str, ExportManifest]:
    """The log as bytes decoded (no newline translation) and its manifest."""
    text = (folder / f"{name}.log").read_bytes().decode("utf-8")
    manifest = ExportManifest.from_dict(
        json.loads((folder / f"{name}.aidge-export.json").read_text())
    )
    return text, manifest


def parse(text: str, manifest: ExportManifest) -> ProtocolResult:
    return get_protocol(manifest.protocol).parse(text, manifest)


def without_end_banner(text: str) -> str:
    """The capture cut just before the END DEMO frame (a firmware that hung or crashed)."""
    end = text.index("END DEMO")
    return text[: text.rindex("\r\n*", 0, end)]


def with_app(manifest: ExportManifest, **changes: object) -> ExportManifest:
    return replace(manifest, application_config={**manifest.application_config, **changes})


EXPECTED = json.loads((HOST / "expected_outputs.json").read_text())


def test_registry_lists_the_seven_protocols() -> None:
    assert [p.name for p in list_protocols()] == [
        "aidge-stdout-benchmark/v1",
        "aidge-stdout-output/v1",
        "aidge-stdout/v1",
        "aidge-uart-benchmark/v1",
        "aidge-uart-output/v1",
        "aidge-uart-validation/v1",
        "mlperf-tiny-uart/v1",
    ]
    interactive = {p.name for p in list_protocols() if p.interactive}
    assert interactive == {"aidge-uart-validation/v1", "mlperf-tiny-uart/v1"}


# --- host: aidge-stdout/v1 -----------------------------------------------------------------


def test_stdout_v1_real_values_match_onnxruntime() -> None:
    text, manifest = load(HOST, "standalone")
    result = parse(text, manifest)
    assert result.protocol == "aidge-stdout/v1"
    assert result.output_names == ("_3_FC_0_output_0",)
    (out,) = result.outputs or ()
    assert out.dtype == np.float32 and out.shape == (10,)
    # %f prints 6 decimals: half an ulp of the print plus float32 noise
    np.testing.assert_allclose(out, EXPECTED["onnxruntime"], atol=1.5e-6, rtol=0)
    np.testing.assert_allclose(out, EXPECTED["aidge_backend_cpu"], atol=1.5e-6, rtol=0)


def test_stdout_v1_truncated_output_and_second_output() -> None:
    text, manifest = load(HOST, "standalone_wide")
    result = parse(text, manifest)
    first, second = result.outputs or ()
    assert first.shape == (100,) and second.shape == (4,)
    np.testing.assert_allclose(first, EXPECTED["wide_onnxruntime"][0][:100], atol=1.5e-6, rtol=0)
    np.testing.assert_allclose(second, EXPECTED["wide_onnxruntime"][1], atol=1.5e-6, rtol=0)
    assert any("first 100 of 120" in n for n in result.notices)


def test_stdout_v1_prediction_label_variant() -> None:
    text, manifest = load(HOST, "standalone_labels")
    result = parse(text, manifest)
    assert result.outputs is None
    assert result.predictions == (int(np.argmax(EXPECTED["onnxruntime"])),)
    assert result.labels == (3,)


def test_stdout_v1_missing_truncation_tail_is_an_error() -> None:
    text, manifest = load(HOST, "standalone_wide")
    cut = text.replace("Output 0 is too large and has been truncated.", "")
    with pytest.raises(ProtocolError, match="truncation notice") as info:
        parse(cut, manifest)
    assert info.value.line_number == 2


def test_stdout_v1_errors_name_the_line() -> None:
    text, manifest = load(HOST, "standalone")
    bad = text.replace("0.943637", "0.94x637")
    with pytest.raises(ProtocolError, match="not a number") as info:
        parse(bad, manifest)
    assert info.value.line_number == 2 and "0.94x637" in (info.value.line or "")
    assert info.value.hint
    short = re.sub(r" -0\.762107 $", " ", text.rstrip("\n")) + "\n"
    with pytest.raises(ProtocolError, match="9 values, expected 10"):
        parse(short, manifest)
    with pytest.raises(ProtocolError, match="No values for output"):
        parse("boot message\n", manifest)
    with pytest.raises(ProtocolError, match="ends right after its header"):
        parse("_3_FC_0_output_0:", manifest)
    with pytest.raises(ProtocolError, match="printed twice"):
        parse(text + text, manifest)


def test_stdout_v1_tolerates_crlf_noise_and_notices() -> None:
    text, manifest = load(HOST, "standalone")
    noisy = (
        "booting...\r\n"
        "[NOTICE] - Comparing with Aidge ref for node : _3_FC_0 -> [SUCCESS]\r\n\r\n"
        + text.replace("\n", "\r\n")
        + "bye\n"
    )
    result = parse(noisy, manifest)
    np.testing.assert_allclose((result.outputs or ())[0], EXPECTED["onnxruntime"], atol=1.5e-6)
    assert result.notices == (
        "[NOTICE] - Comparing with Aidge ref for node : _3_FC_0 -> [SUCCESS]",
    )


@pytest.mark.parametrize(
    "fatal",
    [
        "[NOTICE] - Comparing with Aidge ref for node : _3_FC_0 -> [FAILURE]",
        "Abort program.",
        "[ERROR] - Abort program.",
        "HardFault_Handler: CFSR=0x00000400",
        "\r\n[ERROR] Trapped in Error_Handler!",
    ],
)
def test_failure_lines_raise_with_the_line(fatal: str) -> None:
    text, manifest = load(HOST, "standalone")
    with pytest.raises(ProtocolError) as info:
        parse(fatal + "\n" + text, manifest)
    assert info.value.line_number in (1, 2)
    assert info.value.hint


# --- host: aidge-stdout-output/v1 ----------------------------------------------------------


def test_stdout_output_real_values_match_references() -> None:
    text, manifest = load(HOST, "output")
    (out,) = parse(text, manifest).outputs or ()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, EXPECTED["onnxruntime"], atol=1e-6, rtol=0)
    # different summation order: a couple of float32 ulps
    np.testing.assert_allclose(out, EXPECTED["aidge_backend_cpu"], atol=3e-7, rtol=0)


def test_stdout_output_two_outputs_in_manifest_order() -> None:
    text, manifest = load(HOST, "output_wide")
    result = parse(text, manifest)
    first, second = result.outputs or ()
    assert first.shape == (120,) and second.shape == (4,)
    np.testing.assert_allclose(first, EXPECTED["wide_onnxruntime"][0], atol=1e-6, rtol=0)
    np.testing.assert_allclose(second, EXPECTED["wide_onnxruntime"][1], atol=1e-6, rtol=0)
    second_name = manifest.outputs[1]["name"]  # node numbering varies between exports
    with pytest.raises(ProtocolError, match=second_name):
        parse(text.split("\n")[0] + "\n", manifest)
    with pytest.raises(ProtocolError, match="extra line of values"):
        parse(text + text, manifest)
    lines = text.split("\n")
    with pytest.raises(ProtocolError, match="has 3 values, expected 4") as info:
        parse(lines[0] + "\n" + " ".join(lines[1].split()[:3]) + "\n", manifest)
    assert info.value.line_number == 2


def test_stdout_output_integer_dtypes() -> None:
    _, manifest = load(HOST, "output")
    as_int8 = replace(manifest, outputs=[{**manifest.outputs[0], "dtype": "int8_t"}])
    values = "-128 -3 0 1 2 3 4 5 6 127 \n"
    (out,) = parse(values, as_int8).outputs or ()
    assert out.dtype == np.int8 and out.tolist() == [-128, -3, 0, 1, 2, 3, 4, 5, 6, 127]
    with pytest.raises(ProtocolError, match="outside"):
        parse(values.replace("127", "128"), as_int8)
    with pytest.raises(ProtocolError, match="not an integer"):
        parse(values.replace(" 5 ", " 5.0 "), as_int8)
    as_bool = replace(manifest, outputs=[{**manifest.outputs[0], "dtype": "bool"}])
    (flags,) = parse("0 1 0 1 1 0 0 0 1 0 \n", as_bool).outputs or ()
    assert flags.dtype == np.bool_ and int(flags.sum()) == 4


# --- host: aidge-stdout-benchmark/v1 -------------------------------------------------------


def test_stdout_benchmark_real_logs() -> None:
    text, manifest = load(HOST, "benchmark")
    result = parse(text, manifest)
    assert result.timings_ms is not None and len(result.timings_ms) == 10
    assert all(0 < t < 1000 for t in result.timings_ms)
    assert result.layer_times_ms is None and result.cycles is None
    text, manifest = load(HOST, "benchmark_profiling")
    result = parse(text, manifest)
    assert result.layer_times_ms is not None
    assert list(result.layer_times_ms) == [
        "_0_PadConvAct_0",
        "_1_Transpose_0",
        "_2_Reshape_0",
        "_3_FC_0",
    ]


def test_stdout_benchmark_checks_counts_unit_and_profiling() -> None:
    text, manifest = load(HOST, "benchmark_profiling")
    with pytest.raises(ProtocolError, match="nb_iterations is 11"):
        parse(text, with_app(manifest, nb_iterations=11))
    with pytest.raises(ProtocolError, match="'ms' unit") as info:
        parse(text.replace(" ms\n", "\n"), manifest)
    assert info.value.line_number == 1
    with pytest.raises(ProtocolError, match="No 'layer_time_ms:' line"):
        parse(text.split("\n")[0] + "\n", manifest)
    with pytest.raises(ProtocolError, match="No 'inference_time:' line"):
        parse("", manifest)
    with pytest.raises(ProtocolError, match="not 'layer=value'"):
        parse(text.replace("_3_FC_0=", "_3_FC_0:"), manifest)
    with pytest.raises(ProtocolError, match="appears twice"):
        parse(text + text, manifest)


# --- UART: the lab's real QEMU transcripts -------------------------------------------------


def test_uart_output_contract_log() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_output")
    result = parse(text, manifest)
    assert result.protocol == "aidge-uart-output/v1"
    (out,) = result.outputs or ()
    assert out.tolist() == pytest.approx(
        [0.032504, -0.111390, 0.112598, 0.019488, 0.050769, 0.029845, -0.100037, -0.062632,
         -0.001162, 0.114839]
    )  # fmt: skip


def test_uart_output_survives_text_mode_newline_translation(tmp_path: Path) -> None:
    """``read_text`` turns ``\\n\\r`` into two line breaks; the parser must not care."""
    text, manifest = load(CONTRACT, "mps2-an386_output")
    (tmp_path / "log.txt").write_bytes(text.encode())
    translated = (tmp_path / "log.txt").read_text()
    assert "\n\n0.032504" in translated
    assert parse(translated, manifest).outputs is not None


def test_uart_output_requires_end_banner() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_output")
    truncated = without_end_banner(text)
    assert "END DEMO" not in truncated and "0.114839" in truncated
    with pytest.raises(ProtocolError, match="END DEMO") as info:
        parse(truncated, manifest)
    assert info.value.line is not None
    # and a reboot in the middle of the capture
    with pytest.raises(ProtocolError, match="started twice"):
        parse(text + text, manifest)


def test_uart_benchmark_contract_log() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_benchmark_profiling")
    result = parse(text, manifest)
    assert result.timings_ms == (0.6, 0.5, 0.6, 0.5, 0.6)
    assert result.cycles == (14037, 14036, 14044, 14038, 14044)
    assert result.layer_times_ms == {
        "_0_ConvAct_0": 0.18,
        "_1_Transpose_0": 0.22,
        "_2_Reshape_0": 0.0,
        "_3_FC_0": 0.16,
    }
    assert result.layer_cycles == {
        "_0_ConvAct_0": 4310,
        "_1_Transpose_0": 5291,
        "_2_Reshape_0": 281,
        "_3_FC_0": 3867,
    }


def test_uart_benchmark_malformed_variants() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_benchmark_profiling")
    with pytest.raises(ProtocolError, match="END DEMO"):
        parse(without_end_banner(text), manifest)
    with pytest.raises(ProtocolError, match="not an integer") as info:
        parse(text.replace("14038", "140#8"), manifest)
    assert info.value.line_number == 7  # 5 banner lines, inference_time, cpu_cycles
    with pytest.raises(ProtocolError, match="cpu_cycles has 4 values"):
        parse(text.replace("14038 14044 \n", "14038 \n"), with_app(manifest, nb_iterations=None))
    with pytest.raises(ProtocolError, match="nb_iterations is 5"):
        parse(text.replace("0.500 0.600 \n", "0.500 \n"), manifest)
    with pytest.raises(ProtocolError, match="different layers"):
        parse(text.replace("_3_FC_0=3867", "_3_FC=3867"), manifest)
    with pytest.raises(ProtocolError, match="No 'layer_cycles:' line"):
        parse(re.sub(r"layer_cycles:[^\n]*\n", "", text), manifest)
    with pytest.raises(ProtocolError, match="is not a number"):
        parse(text.replace("0.600 0.500 0.600", "0.600 0.5OO 0.600"), manifest)


def test_uart_validation_contract_transcript() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_validation")
    result = parse(text, manifest)
    assert result.predictions == (9, 0)
    assert result.timings_ms == (0.5, 0.6, 0.5)
    assert result.cycles == (14033, 14042, 14039)
    assert result.layer_cycles is not None and result.layer_cycles["_3_FC_0"] == 3867


def test_uart_validation_malformed_variants() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_validation")
    with pytest.raises(ProtocolError, match="nb_validation_iterations is 3"):
        parse(text, with_app(manifest, nb_validation_iterations=3))
    with pytest.raises(ProtocolError, match="No VALIDATION_DONE"):
        parse(text.replace("VALIDATION_DONE\n", ""), manifest)
    with pytest.raises(ProtocolError, match="No BENCHMARK_DONE"):
        parse(text.replace("BENCHMARK_DONE\n", ""), manifest)
    with pytest.raises(ProtocolError, match="error: inference") as info:
        parse(text.replace("prediction: 0", "error: inference"), manifest)
    assert info.value.line_number == 4
    with pytest.raises(ProtocolError, match="Malformed prediction"):
        parse(text.replace("prediction: 9", "prediction: 9x"), manifest)
    with pytest.raises(ProtocolError, match="not a class"):
        parse(text.replace("prediction: 9", "prediction: 10"), manifest)
    with pytest.raises(ProtocolError, match="samples were skipped"):
        parse(text.replace("READY 1", "READY 2"), manifest)
    with pytest.raises(ProtocolError, match="classification firmware"):
        metrics = re.sub(r"prediction: \d", "validation_metric: 0.1", text)
        parse(metrics, manifest)


def test_uart_validation_parse_error_retry_is_a_notice() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_validation")
    retried = text.replace("READY 1\n", "READY 1\nerror: parse_input\nREADY 1\n")
    result = parse(retried, manifest)
    assert result.predictions == (9, 0)
    assert result.notices == ("sample 1: the device could not parse the input line (resent)",)


def test_uart_validation_autoencoder_metrics() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_validation")
    auto = with_app(manifest, validation_inference_type="autoencoder")
    metric_text = text.replace("prediction: 9", "validation_metric: 0.0123456789").replace(
        "prediction: 0", "validation_metric: 0.5000000000"
    )
    result = parse(metric_text, auto)
    assert result.validation_metrics == (0.0123456789, 0.5) and result.predictions is None
    with pytest.raises(ProtocolError, match="autoencoder firmware"):
        parse(text, auto)


def test_mlperf_contract_transcript() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_tinyml")
    result = parse(text, manifest)
    mlperf = result.mlperf
    assert mlperf is not None
    assert mlperf.dut_name == "Aidge_ARM_CortexM" and mlperf.model == "ic01"
    assert (mlperf.nb_inferences, mlperf.nb_warmup, mlperf.lap_us) == (3, 1, (3889, 5626))
    assert mlperf.latency_us == pytest.approx((5626 - 3889) / 3)
    assert mlperf.results == (0.009, 0.001, 0.0, 0.015, 0.118, 0.0, 0.0, 0.0, 0.182, 0.674)
    # one mean over 3 inferences is not a one-sample latency series (issue 9 item 4)
    assert result.timings_ms is None


def test_mlperf_tolerates_echo_and_rejects_broken_runs() -> None:
    text, manifest = load(CONTRACT, "mps2-an386_tinyml")
    echoed = text.replace("m-name-dut", "name%m-name-dut").replace(
        "m-warmup-start", "infer 3 1%\r\nm-warmup-start"
    )
    assert parse(echoed, manifest).mlperf == parse(text, manifest).mlperf
    with pytest.raises(ProtocolError, match="No complete infer run"):
        parse(text.split("m-infer-done")[0], manifest)
    with pytest.raises(ProtocolError, match="1 m-lap-us"):
        parse(text.replace("m-lap-us-5626\r\n", ""), manifest)
    with pytest.raises(ProtocolError, match="went backwards"):
        parse(text.replace("m-lap-us-5626", "m-lap-us-3000"), manifest)
    with pytest.raises(ProtocolError, match="Malformed MLPerf line"):
        parse(text.replace("m-lap-us-5626", "m-lap-us-56x6"), manifest)
    with pytest.raises(ProtocolError, match="m-results has 9 values"):
        parse(text.replace(",0.674]", "]"), manifest)
    with pytest.raises(ProtocolError, match="runs model 'ic01'"):
        parse(text, with_app(manifest, tinyml_benchmark_model="kws01"))
    with pytest.raises(ProtocolError, match="not a number"):
        parse(text.replace("0.118", "0.1-8"), manifest)


# --- the manifest-less parser used by the published exporter --------------------------------


def test_parse_uart_log_text_on_every_contract_log() -> None:
    out, _ = load(CONTRACT, "mps2-an386_output")
    result = parse_uart_log_text(out, tinymlbenchmark=False)
    assert result.output_names == ("_3_FC_0_output_0",)
    assert (result.outputs or ())[0][0] == pytest.approx(0.032504)
    bench, _ = load(CONTRACT, "mps2-an386_benchmark_profiling")
    result = parse_uart_log_text(bench, tinymlbenchmark=False)
    assert result.protocol == "aidge-uart-benchmark/v1" and result.cycles is not None
    val, _ = load(CONTRACT, "mps2-an386_validation")
    assert parse_uart_log_text(val, tinymlbenchmark=False).predictions == (9, 0)
    tiny, _ = load(CONTRACT, "mps2-an386_tinyml")
    result = parse_uart_log_text(tiny, tinymlbenchmark=True)
    assert result.mlperf is not None and result.mlperf.latency_us == pytest.approx(579.0)
    with pytest.raises(ProtocolError, match="No results"):
        parse_uart_log_text("boot\n", tinymlbenchmark=False)
    with pytest.raises(ProtocolError, match="no 'END DEMO'"):
        parse_uart_log_text(without_end_banner(bench), tinymlbenchmark=False)


def test_build_results_from_uart_log(tmp_path: Path) -> None:
    text, _ = load(CONTRACT, "mps2-an386_validation")
    log = tmp_path / "uart_output.txt"
    log.write_bytes(text.encode())
    results = build_results_from_uart_log(log, [], [9, 1], True, False)
    assert results["accuracy"] == 0.5
    assert results["predictions"] == [9, 0]
    assert results["timings"] == [0.5, 0.6, 0.5]
    assert results["layer_cycles"]["_2_Reshape_0"] == 281
    broken = tmp_path / "broken.txt"
    broken.write_bytes(text.replace("14042", "1404?").encode())
    with pytest.raises(ProtocolError) as info:
        build_results_from_uart_log(broken, [], None, False, False)
    assert info.value.log_path == broken


# --- this project's own QEMU captures (appear once the board-integration work lands) ---------

_QEMU_KIND_PROTOCOL = {
    "output": "aidge-uart-output/v1",
    "standalone": "aidge-uart-output/v1",
    "benchmark": "aidge-uart-benchmark/v1",
    "validation": "aidge-uart-validation/v1",
    "tinyml": "mlperf-tiny-uart/v1",
}


def _qemu_logs() -> list[Path]:
    return sorted(QEMU.glob("*.log")) if QEMU.is_dir() else []


def _qemu_protocol(path: Path) -> str:
    # <board>_<kind>[-<variant>][_<dtype>].log; the board name may contain '-'
    for kind, protocol in _QEMU_KIND_PROTOCOL.items():
        if re.search(rf"_{kind}(?:[-_][a-z0-9]+)*$", path.stem):
            return protocol
    raise AssertionError(f"cannot tell the protocol of {path.name} from its name")


@pytest.mark.parametrize("log", _qemu_logs(), ids=lambda p: p.name)
def test_qemu_captured_logs(log: Path) -> None:
    protocol = _qemu_protocol(log)
    text = log.read_bytes().decode("utf-8", errors="replace")
    manifest_path = log.with_suffix(".aidge-export.json")
    if manifest_path.is_file():
        manifest = ExportManifest.from_dict(json.loads(manifest_path.read_text()))
        assert manifest.protocol == protocol
        result = parse(text, manifest)
    else:
        result = parse_uart_log_text(text, tinymlbenchmark=protocol == "mlperf-tiny-uart/v1")
        assert result.protocol == protocol
    if protocol == "aidge-uart-output/v1":
        assert result.outputs and all(np.all(np.isfinite(o)) for o in result.outputs)
    elif protocol == "mlperf-tiny-uart/v1":
        assert result.mlperf is not None and result.mlperf.latency_us >= 0
    else:
        assert result.timings_ms
    if protocol == "aidge-uart-validation/v1":
        assert result.predictions or result.validation_metrics
    # what the capture recorded alongside: onnxruntime's answers for the same inputs
    record = _qemu_captures().get(log.stem, {})
    if "expected_output" in record:
        np.testing.assert_allclose(
            (result.outputs or ())[0], record["expected_output"], atol=1.5e-6, rtol=0
        )
    if "expected_predictions" in record:
        assert list(result.predictions or ()) == record["expected_predictions"]


def _qemu_captures() -> dict[str, dict[str, Any]]:
    path = QEMU / "captures.json"
    if not path.is_file():
        return {}
    records = json.loads(path.read_text())
    return {k: v for k, v in records.items() if isinstance(v, dict)}
