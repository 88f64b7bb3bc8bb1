"""Fuzzing: on arbitrary text and on mutated real logs, every parser returns a
``ProtocolResult`` or raises ``ProtocolError`` — never anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aidge_core.export_utils.artifact import ExportManifest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidge_deploy.errors import ProtocolError
from aidge_deploy.protocols.base import ProtocolResult
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.protocols.uart import parse_uart_log_text

LOGS = Path(__file__).parent / "data" / "logs"
FUZZ = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _cases() -> list[tuple[str, str, ExportManifest]]:
    cases = []
    for folder in ("host", "contract", "qemu"):
        for log in sorted((LOGS / folder).glob("*.log")):
            manifest_path = log.with_suffix(".aidge-export.json")
            if not manifest_path.is_file():
                continue
            manifest = ExportManifest.from_dict(json.loads(manifest_path.read_text()))
            cases.append((f"{folder}/{log.name}", log.read_bytes().decode("utf-8"), manifest))
    return cases


CASES = _cases()
IDS = [case[0] for case in CASES]
assert {m.protocol for _, _, m in CASES} >= {
    "aidge-stdout/v1",
    "aidge-stdout-output/v1",
    "aidge-stdout-benchmark/v1",
    "aidge-uart-output/v1",
    "aidge-uart-benchmark/v1",
    "aidge-uart-validation/v1",
    "mlperf-tiny-uart/v1",
}

# Text made of the pieces real logs are made of, so the fuzzer reaches deep parser states.
_FRAGMENTS = st.sampled_from(
    [
        "\n",
        "\r\n",
        "\n\r",
        "\r",
        " ",
        "0.5",
        "-1",
        "nan",
        "inf",
        "1e9",
        "%",
        "=",
        ":",
        "ms",
        "inference_time:",
        "cpu_cycles:",
        "layer_time_ms:",
        "layer_cycles:",
        "_3_FC_0_output_0:",
        "_1_FC_0_output_0:",
        "_3_QFC_0_output_0:",
        "Output 0 is too large and has been truncated.",
        "Prediction out#0: ",
        "Label out#0: ",
        "READY ",
        "prediction: ",
        "validation_metric: ",
        "error: parse_input",
        "VALIDATION_DONE",
        "BENCHMARK_DONE",
        "****************** DEMO EXPORT ARM ******************",
        "********************** END DEMO *********************",
        "m-ready",
        "m-infer-start-",
        "m-lap-us-",
        "m-infer-done",
        "m-results-[",
        "]",
        ",",
        "m-model-[ic01]",
        "[NOTICE] - x",
    ]
)
_LOGLIKE = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=8)), max_size=60).map("".join)


def _check(protocol: str, text: str, manifest: ExportManifest) -> None:
    try:
        result = get_protocol(protocol).parse(text, manifest)
    except ProtocolError:
        return
    assert isinstance(result, ProtocolResult)
    assert result.protocol == protocol


@pytest.mark.parametrize(("name", "log", "manifest"), CASES, ids=IDS)
@FUZZ
@given(data=st.data())
def test_mutated_real_logs(
    name: str, log: str, manifest: ExportManifest, data: st.DataObject
) -> None:
    """Delete, duplicate, replace or insert a slice of a real log, then parse it."""
    n = len(log)
    start = data.draw(st.integers(0, n), label="start")
    end = data.draw(st.integers(start, min(n, start + 40)), label="end")
    action = data.draw(st.sampled_from(["delete", "duplicate", "replace", "insert", "truncate"]))
    if action == "delete":
        text = log[:start] + log[end:]
    elif action == "duplicate":
        text = log[:end] + log[start:end] + log[end:]
    elif action == "truncate":
        text = log[:start]
    else:
        chunk = data.draw(st.one_of(_FRAGMENTS, st.text(max_size=12)), label="chunk")
        text = log[:start] + chunk + (log[end:] if action == "replace" else log[start:])
    _check(manifest.protocol, text, manifest)
    # the manifest-less parser sees the same text
    try:
        result = parse_uart_log_text(text, tinymlbenchmark=manifest.protocol.startswith("mlperf"))
    except ProtocolError:
        return
    assert isinstance(result, ProtocolResult)


@pytest.mark.parametrize(
    "protocol",
    sorted({m.protocol for _, _, m in CASES}),
)
@FUZZ
@given(text=st.one_of(st.text(max_size=300), _LOGLIKE))
def test_arbitrary_text(protocol: str, text: str) -> None:
    manifests = [m for _, _, m in CASES if m.protocol == protocol]
    for manifest in manifests[:2]:
        _check(protocol, text, manifest)


@FUZZ
@given(text=st.one_of(st.text(max_size=300), _LOGLIKE), tiny=st.booleans())
def test_manifest_less_parser_on_arbitrary_text(text: str, tiny: bool) -> None:
    try:
        result = parse_uart_log_text(text, tinymlbenchmark=tiny)
    except ProtocolError:
        return
    assert isinstance(result, ProtocolResult)


def test_unmodified_logs_parse() -> None:
    """The seeds of the mutation fuzzing are themselves valid."""
    for name, log, manifest in CASES:
        result = get_protocol(manifest.protocol).parse(log, manifest)
        assert isinstance(result, ProtocolResult), name
