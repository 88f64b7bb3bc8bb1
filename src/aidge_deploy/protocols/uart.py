"""Parsers of the Cortex-M UART protocols and the manifest-less UART log parser the published
exporter imports.

``aidge-uart-output/v1`` (``compute_output.jinja``), ``aidge-uart-benchmark/v1``
(``inference_time.jinja``) and ``aidge-uart-validation/v1``
(``validation_inference_time.jinja``) all run inside the BSP's ``DEMO EXPORT`` / ``END DEMO``
banners. Only validation is interactive: the firmware prints ``READY <id>`` and blocks until
the host sends that sample as one line of numbers (driven by ``protocols.uart_validation``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aidge_deploy.errors import ProtocolError
from aidge_deploy.protocols.base import Channel, ProtocolResult, SessionRequest
from aidge_deploy.protocols.blocks import NamedOutputReader, TimingBlock, TimingCollector, TimingKey
from aidge_deploy.protocols.lines import (
    Line,
    check_side_channel,
    is_end_banner,
    is_start_banner,
    protocol_error,
    split_lines,
)
from aidge_deploy.protocols.manifest_facts import (
    app_int,
    app_str,
    output_specs,
    profiling_enabled,
)
from aidge_deploy.protocols.numbers import parse_float_list, parse_float_token, parse_int_token
from aidge_deploy.protocols.uart_validation import (
    BENCHMARK_DONE,
    PARSE_INPUT_ERROR,
    READY_RE,
    VALIDATION_DONE,
    drive_validation,
)
from aidge_deploy.timing import UART_TICK, ProtocolTimer

if TYPE_CHECKING:
    from aidge_deploy.exportspec import Manifest

UART_OUTPUT_V1 = "aidge-uart-output/v1"
UART_BENCHMARK_V1 = "aidge-uart-benchmark/v1"
UART_VALIDATION_V1 = "aidge-uart-validation/v1"

_IDENTIFIER_HEADER_RE = re.compile(r"[A-Za-z_]\w*:")
_PROFILING_KEYS = (TimingKey.CPU_CYCLES, TimingKey.LAYER_TIME_MS, TimingKey.LAYER_CYCLES)


@dataclass
class _Scan:
    """Everything a UART capture says, gathered in one pass (each protocol checks its part)."""

    notices: list[str] = field(default_factory=list)
    predictions: list[tuple[int, Line]] = field(default_factory=list)
    metrics: list[tuple[float, Line]] = field(default_factory=list)
    ready: list[tuple[int, Line]] = field(default_factory=list)
    generic_outputs: dict[str, tuple[np.ndarray, Line]] = field(default_factory=dict)
    start_banner: Line | None = None
    end_banner: Line | None = None
    validation_done: Line | None = None
    benchmark_done: Line | None = None


def _scan(
    text: str,
    *,
    collector: TimingCollector,
    reader: NamedOutputReader | None,
    generic_outputs: bool,
    log_path: Path | None,
) -> _Scan:
    scan = _Scan()
    lines = split_lines(text)
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        notice = check_side_channel(line, log_path)
        if notice is not None:
            scan.notices.append(notice)
            continue
        if is_start_banner(line):
            if scan.start_banner is not None:
                raise protocol_error(
                    f"The firmware started twice (first banner on line {scan.start_banner.number})",
                    "The board reset during the run (watchdog, fault, brown-out) or two captures "
                    "were concatenated. Check the raw log before the second banner.",
                    line,
                    log_path,
                )
            scan.start_banner = line
            continue
        if is_end_banner(line):
            scan.end_banner = scan.end_banner or line
            continue
        if collector.feed(line):
            continue
        if reader is not None and reader.is_header(line):
            index = reader.read(lines, index - 1)
            continue
        if generic_outputs:
            after = _read_generic_output(scan, line, lines, index, log_path)
            if after is not None:
                index = after
                continue
        _read_validation_line(scan, line, log_path)
    return scan


def _read_generic_output(
    scan: _Scan, header: Line, lines: Sequence[Line], index: int, log_path: Path | None
) -> int | None:
    """Without a manifest: ``<identifier>:`` followed (blank lines aside) by a line that
    starts with a number. Returns the index after the block, or None if it is not one."""
    if not _IDENTIFIER_HEADER_RE.fullmatch(header.text):
        return None
    while index < len(lines) and not lines[index].text:
        index += 1
    if index >= len(lines):
        return None
    values_line = lines[index]
    tokens = values_line.text.split()
    if not tokens or parse_float_token(tokens[0]) is None:
        return None
    name = header.text[:-1]
    if name in scan.generic_outputs:
        raise protocol_error(
            f"Output {name!r} is printed twice",
            "The capture holds two runs; capture a single run.",
            header,
            log_path,
        )
    values = parse_float_list(values_line, tokens, f"output {name!r}", log_path)
    scan.generic_outputs[name] = (np.asarray(values, dtype=np.float64), header)
    return index + 1


def _read_validation_line(scan: _Scan, line: Line, log_path: Path | None) -> None:
    text = line.text
    if text.startswith("READY"):
        match = READY_RE.fullmatch(text)
        if match is None:
            raise protocol_error(
                "Malformed READY line",
                "Expected 'READY <sample id>'; the capture is corrupted.",
                line,
                log_path,
            )
        scan.ready.append((int(match.group(1)), line))
    elif text.startswith("prediction:"):
        value = parse_int_token(text[len("prediction:") :].strip())
        if value is None or value < 0:
            raise protocol_error(
                "Malformed prediction line",
                "Expected 'prediction: <class index>'; the capture is corrupted.",
                line,
                log_path,
            )
        scan.predictions.append((value, line))
    elif text.startswith("validation_metric:"):
        metric = parse_float_token(text[len("validation_metric:") :].strip())
        if metric is None:
            raise protocol_error(
                "Malformed validation_metric line",
                "Expected 'validation_metric: <mse>'; the capture is corrupted.",
                line,
                log_path,
            )
        scan.metrics.append((metric, line))
    elif text == PARSE_INPUT_ERROR:
        sample = scan.ready[-1][0] if scan.ready else len(scan.predictions) + len(scan.metrics)
        scan.notices.append(f"sample {sample}: the device could not parse the input line (resent)")
    elif text.startswith("error:"):
        raise protocol_error(
            f"The firmware reported {text!r}",
            "'error: inference' means the forward returned no output; check the export and "
            "the memory fit. Other errors come from the BSP.",
            line,
            log_path,
        )
    elif text == VALIDATION_DONE:
        scan.validation_done = scan.validation_done or line
    elif text == BENCHMARK_DONE:
        scan.benchmark_done = scan.benchmark_done or line


def _require_end_banner(
    scan: _Scan, after: Line | None, protocol: str, log_path: Path | None
) -> None:
    if scan.end_banner is None:
        raise protocol_error(
            f"No 'END DEMO' banner: the capture is incomplete ({protocol})",
            "The firmware crashed or hung, or the capture stopped before it finished. Check "
            "the raw log and raise the capture timeout (the Cortex-M exporter's benchmark "
            "runs nb_iterations x max(10, nb_iterations) forwards; the emulated boards' "
            "entry runs nb_iterations).",
            after,
            log_path,
        )
    if after is not None and scan.end_banner.number < after.number:
        raise protocol_error(
            f"Results printed after the 'END DEMO' banner (line {scan.end_banner.number})",
            "The capture mixes two runs; capture a single run.",
            after,
            log_path,
        )


def parse_uart_output_v1(
    text: str, manifest: Manifest, log_path: Path | None = None
) -> ProtocolResult:
    """Parse ``aidge-uart-output/v1``: ``<name>:`` + all values per output, then END DEMO."""
    reader = NamedOutputReader(
        output_specs(manifest), truncate_at=None, protocol=UART_OUTPUT_V1, log_path=log_path
    )
    collector = TimingCollector(unit=None, log_path=log_path)
    scan = _scan(text, collector=collector, reader=reader, generic_outputs=False, log_path=log_path)
    outputs, names, _ = reader.finish()
    _require_end_banner(scan, reader.last_header, UART_OUTPUT_V1, log_path)
    return ProtocolResult(
        protocol=UART_OUTPUT_V1, outputs=outputs, output_names=names, notices=tuple(scan.notices)
    )


def _timing_result(protocol: str, block: TimingBlock, notices: Sequence[str]) -> ProtocolResult:
    return ProtocolResult(
        protocol=protocol,
        timings_ms=block.timings_ms,
        cycles=block.cycles,
        layer_times_ms=block.layer_times_ms,
        layer_cycles=block.layer_cycles,
        notices=tuple(notices),
    )


def parse_uart_benchmark_v1(
    text: str, manifest: Manifest, log_path: Path | None = None
) -> ProtocolResult:
    """Parse ``aidge-uart-benchmark/v1``: ms per forward (no unit), cycles and layers."""
    collector = TimingCollector(unit=None, log_path=log_path)
    scan = _scan(text, collector=collector, reader=None, generic_outputs=False, log_path=log_path)
    required = [TimingKey.INFERENCE_TIME]
    if profiling_enabled(manifest):
        required.extend(_PROFILING_KEYS)
    block = collector.finish(
        expected_iterations=app_int(manifest, "nb_iterations"),
        required=required,
        protocol=UART_BENCHMARK_V1,
    )
    _require_end_banner(scan, collector.last_line(), UART_BENCHMARK_V1, log_path)
    return _timing_result(UART_BENCHMARK_V1, block, scan.notices)


def parse_uart_validation_v1(
    text: str, manifest: Manifest, log_path: Path | None = None
) -> ProtocolResult:
    """Parse a validation session transcript: one result per sample, then the benchmark."""
    collector = TimingCollector(unit=None, log_path=log_path)
    scan = _scan(text, collector=collector, reader=None, generic_outputs=False, log_path=log_path)
    expected = app_int(manifest, "nb_validation_iterations")
    inference_type = app_str(manifest, "validation_inference_type") or "classification"
    _check_validation_results(scan, expected, inference_type, log_path)
    outputs = output_specs(manifest)
    if outputs and scan.predictions:
        for value, line in scan.predictions:
            if value >= outputs[0].size:
                raise protocol_error(
                    f"prediction {value} is not a class of output {outputs[0].name!r} "
                    f"({outputs[0].size} values)",
                    "The manifest does not describe this firmware; re-export and rebuild.",
                    line,
                    log_path,
                )
    required = [TimingKey.INFERENCE_TIME]
    if profiling_enabled(manifest):
        required.extend(_PROFILING_KEYS)
    block = collector.finish(
        expected_iterations=app_int(manifest, "nb_iterations"),
        required=required,
        protocol=UART_VALIDATION_V1,
    )
    _check_validation_order(scan, collector, log_path)
    return ProtocolResult(
        protocol=UART_VALIDATION_V1,
        timings_ms=block.timings_ms,
        cycles=block.cycles,
        layer_times_ms=block.layer_times_ms,
        layer_cycles=block.layer_cycles,
        predictions=tuple(v for v, _ in scan.predictions) if scan.predictions else None,
        validation_metrics=tuple(v for v, _ in scan.metrics) if scan.metrics else None,
        notices=tuple(scan.notices),
    )


def _check_validation_results(
    scan: _Scan, expected: int | None, inference_type: str, log_path: Path | None
) -> None:
    if scan.predictions and scan.metrics:
        raise protocol_error(
            "The capture mixes prediction and validation_metric lines",
            "One firmware prints one kind; the capture holds two runs.",
            scan.metrics[0][1],
            log_path,
        )
    if inference_type == "classification" and scan.metrics:
        raise protocol_error(
            "validation_metric line from a classification firmware",
            "The manifest's validation_inference_type does not match the firmware; rebuild.",
            scan.metrics[0][1],
            log_path,
        )
    if inference_type == "autoencoder" and scan.predictions:
        raise protocol_error(
            "prediction line from an autoencoder firmware",
            "The manifest's validation_inference_type does not match the firmware; rebuild.",
            scan.predictions[0][1],
            log_path,
        )
    if scan.validation_done is None:
        raise protocol_error(
            f"No {VALIDATION_DONE} line: the sample exchange did not finish",
            "The device waited for samples that were never sent, or the session timed out. "
            "Check the transcript's last READY line.",
            scan.ready[-1][1] if scan.ready else None,
            log_path,
        )
    got = len(scan.predictions) + len(scan.metrics)
    if expected is not None and got != expected:
        raise protocol_error(
            f"{got} validation result(s), the manifest's nb_validation_iterations is {expected}",
            "Results were lost in the capture, or the firmware was built from another export.",
            scan.validation_done,
            log_path,
        )
    previous = -1
    for sample_id, line in scan.ready:
        if sample_id not in (previous, previous + 1):
            raise protocol_error(
                f"READY {sample_id} after READY {previous}: samples were skipped",
                "The capture lost lines; re-run the validation session.",
                line,
                log_path,
            )
        previous = sample_id
    for _, line in scan.predictions + [(0, ln) for _, ln in scan.metrics]:
        if line.number > scan.validation_done.number:
            raise protocol_error(
                f"A validation result after {VALIDATION_DONE}",
                "The capture mixes two runs; capture a single session.",
                line,
                log_path,
            )


def _check_validation_order(scan: _Scan, collector: TimingCollector, log_path: Path | None) -> None:
    done = scan.validation_done
    first = collector.first_line()
    last = collector.last_line()
    if done is not None and first is not None and first.number < done.number:
        raise protocol_error(
            f"Benchmark lines before {VALIDATION_DONE}",
            "The capture mixes two runs; capture a single session.",
            first,
            log_path,
        )
    if scan.benchmark_done is None:
        raise protocol_error(
            f"No {BENCHMARK_DONE} line: the benchmark phase did not finish",
            "The firmware hung or the capture stopped too early; raise the benchmark "
            "timeout (nb_iterations x max(10, nb_iterations) forwards).",
            last,
            log_path,
        )
    if last is not None and scan.benchmark_done.number < last.number:
        raise protocol_error(
            f"Benchmark lines after {BENCHMARK_DONE}",
            "The capture mixes two runs; capture a single session.",
            last,
            log_path,
        )


# --- manifest-less parsing for the published exporter -------------------------------------


def parse_uart_log_text(
    text: str, *, tinymlbenchmark: bool, log_path: Path | None = None
) -> ProtocolResult:
    """Parse any Cortex-M UART log without a manifest (``benchmark_api``'s entry point).

    Recognises the benchmark lines (with or without a unit), validation results, ``<name>:``
    output blocks and, with ``tinymlbenchmark``, an MLPerf Tiny transcript. Counts cannot be
    checked without a manifest, but malformed lines, firmware failures and a start banner
    without its end (or ``BENCHMARK_DONE``) raise ``ProtocolError``.
    """
    if tinymlbenchmark:
        from aidge_deploy.protocols.mlperf import parse_mlperf_transcript

        return parse_mlperf_transcript(text, None, log_path=log_path)
    collector = TimingCollector(unit=None, optional_unit=True, log_path=log_path)
    scan = _scan(text, collector=collector, reader=None, generic_outputs=True, log_path=log_path)
    block = collector.finish(expected_iterations=None, required=(), protocol="UART log")
    if scan.start_banner is not None and scan.end_banner is None and scan.benchmark_done is None:
        raise protocol_error(
            "The UART log has the start banner but no 'END DEMO' (or BENCHMARK_DONE)",
            "The firmware crashed or hung, or the capture stopped too early; check the log.",
            scan.start_banner,
            log_path,
        )
    has_validation = bool(scan.predictions or scan.metrics or scan.validation_done)
    if not (collector.seen or has_validation or scan.generic_outputs):
        raise protocol_error(
            "No results in the UART log (no inference_time, prediction or output block)",
            "The capture is empty or from another program; check the serial port, baud rate "
            "(115200) and that the firmware ran.",
            None,
            log_path,
        )
    protocol = (
        UART_VALIDATION_V1
        if has_validation
        else UART_BENCHMARK_V1
        if collector.seen
        else UART_OUTPUT_V1
    )
    names = tuple(scan.generic_outputs)
    return ProtocolResult(
        protocol=protocol,
        outputs=tuple(v for v, _ in scan.generic_outputs.values()) if names else None,
        output_names=names or None,
        timings_ms=block.timings_ms,
        cycles=block.cycles,
        layer_times_ms=block.layer_times_ms,
        layer_cycles=block.layer_cycles,
        predictions=tuple(v for v, _ in scan.predictions) if scan.predictions else None,
        validation_metrics=tuple(v for v, _ in scan.metrics) if scan.metrics else None,
        notices=tuple(scan.notices),
    )


# --- registration -------------------------------------------------------------------------


class _UartNonInteractive:
    name: str
    interactive = False
    end_markers: tuple[str, ...] = ("END DEMO",)
    timer: ProtocolTimer | None = None

    def drive(self, channel: Channel, manifest: Manifest, request: SessionRequest) -> str:
        raise ProtocolError(
            f"Protocol {self.name} is not interactive",
            hint="Capture the UART until the END DEMO banner and parse it with parse().",
        )


class UartOutputV1(_UartNonInteractive):
    """``<name>:\\n\\r`` + all values + ``\\n\\r`` per output, inside the DEMO banners."""

    name = UART_OUTPUT_V1

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        return parse_uart_output_v1(text, manifest)


class UartBenchmarkV1(_UartNonInteractive):
    """``inference_time`` (ms, no unit), and with profiling cycles and per-layer lines."""

    name = UART_BENCHMARK_V1
    timer = UART_TICK

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        return parse_uart_benchmark_v1(text, manifest)


class UartValidationV1:
    """Interactive: samples over UART rx, one result each, then the benchmark block."""

    name = UART_VALIDATION_V1
    interactive = True
    timer: ProtocolTimer | None = UART_TICK
    end_markers: tuple[str, ...] = (BENCHMARK_DONE,)

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        return parse_uart_validation_v1(text, manifest)

    def drive(self, channel: Channel, manifest: Manifest, request: SessionRequest) -> str:
        return drive_validation(channel, manifest, request)


__all__ = [
    "UART_BENCHMARK_V1",
    "UART_OUTPUT_V1",
    "UART_VALIDATION_V1",
    "UartBenchmarkV1",
    "UartOutputV1",
    "UartValidationV1",
    "parse_uart_benchmark_v1",
    "parse_uart_log_text",
    "parse_uart_output_v1",
    "parse_uart_validation_v1",
]
