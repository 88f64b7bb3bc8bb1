"""Parsers of the three protocols host and Linux-board programs print on stdout.

``aidge-stdout/v1`` (aidge_core ``main.jinja``), ``aidge-stdout-output/v1``
(``main_benchmark_display_output.jinja``) and ``aidge-stdout-benchmark/v1``
(export_cpp ``sbc_inference_time.jinja``). The program exits by itself, so none of them is
interactive; the parsers are pure functions of the captured stdout and the manifest.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from aidge_deploy.errors import ProtocolError
from aidge_deploy.protocols.base import Channel, ProtocolResult, SessionRequest
from aidge_deploy.protocols.blocks import (
    STDOUT_TRUNCATION,
    NamedOutputReader,
    TimingCollector,
    TimingKey,
)
from aidge_deploy.protocols.lines import Line, check_side_channel, protocol_error, split_lines
from aidge_deploy.protocols.manifest_facts import (
    app_int,
    output_specs,
    parse_values_for,
    profiling_enabled,
)
from aidge_deploy.protocols.numbers import parse_float_token, parse_int_token
from aidge_deploy.timing import STEADY_CLOCK, ProtocolTimer

if TYPE_CHECKING:
    from aidge_deploy.exportspec import Manifest

STDOUT_V1 = "aidge-stdout/v1"
STDOUT_OUTPUT_V1 = "aidge-stdout-output/v1"
STDOUT_BENCHMARK_V1 = "aidge-stdout-benchmark/v1"

_PREDICTION_RE = re.compile(r"Prediction out#(\d+): (\S+) \((\S+)\)")
_LABEL_RE = re.compile(r"Label out#(\d+): (\S+)")


class _NonInteractive:
    """Stdout programs run to completion; there is no session to drive."""

    name: str
    interactive = False
    end_markers: tuple[str, ...] = ()
    timer: ProtocolTimer | None = None

    def drive(self, channel: Channel, manifest: Manifest, request: SessionRequest) -> str:
        raise ProtocolError(
            f"Protocol {self.name} is not interactive",
            hint="Run the program and parse its captured stdout with parse().",
        )


def parse_stdout_v1(text: str, manifest: Manifest, log_path: Path | None = None) -> ProtocolResult:
    """Parse ``aidge-stdout/v1``: named output blocks, or the Prediction/Label variant."""
    specs = output_specs(manifest)
    reader = NamedOutputReader(
        specs, truncate_at=STDOUT_TRUNCATION, protocol=STDOUT_V1, log_path=log_path
    )
    lines = split_lines(text)
    notices: list[str] = []
    predictions: dict[int, tuple[int, Line]] = {}
    labels: dict[int, tuple[int, Line]] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        notice = check_side_channel(line, log_path)
        if notice is not None:
            notices.append(notice)
            continue
        if reader.is_header(line):
            index = reader.read(lines, index - 1)
            continue
        if line.text.startswith("Prediction out#"):
            _read_indexed(line, _PREDICTION_RE, predictions, len(specs), log_path)
            continue
        if line.text.startswith("Label out#"):
            _read_indexed(line, _LABEL_RE, labels, len(specs), log_path)
            continue
    if predictions or labels:
        if reader.blocks:
            raise protocol_error(
                "The capture mixes output blocks and Prediction/Label lines",
                "One program prints one or the other; the capture holds two programs' output.",
                next(iter(predictions.values()), next(iter(labels.values())))[1],
                log_path,
            )
        return ProtocolResult(
            protocol=STDOUT_V1,
            output_names=tuple(spec.name for spec in specs),
            predictions=_complete(predictions, len(specs), "Prediction", log_path),
            labels=_complete(labels, len(specs), "Label", log_path),
            notices=tuple(notices),
        )
    outputs, names, truncation_notices = reader.finish()
    return ProtocolResult(
        protocol=STDOUT_V1,
        outputs=outputs,
        output_names=names,
        notices=tuple(notices) + truncation_notices,
    )


def _read_indexed(
    line: Line,
    pattern: re.Pattern[str],
    into: dict[int, tuple[int, Line]],
    nb_outputs: int,
    log_path: Path | None,
) -> None:
    what = "Prediction" if pattern is _PREDICTION_RE else "Label"
    match = pattern.fullmatch(line.text)
    value = None if match is None else parse_int_token(match.group(2))
    if (
        match is not None
        and pattern is _PREDICTION_RE
        and parse_float_token(match.group(3)) is None
    ):
        value = None
    if match is None or value is None:
        raise protocol_error(
            f"Malformed {what} line",
            f"Expected '{what} out#<o>: <int>{' (<confidence>)' if what == 'Prediction' else ''}'"
            "; the line was cut or corrupted. Re-run the program.",
            line,
            log_path,
        )
    output_index = int(match.group(1))
    if output_index >= nb_outputs:
        raise protocol_error(
            f"{what} for output #{output_index}, the manifest has {nb_outputs} output(s)",
            "The manifest does not describe this program; re-export and rebuild.",
            line,
            log_path,
        )
    if output_index in into:
        raise protocol_error(
            f"{what} for output #{output_index} is printed twice",
            "The capture holds two runs; capture a single run.",
            line,
            log_path,
        )
    into[output_index] = (value, line)


def _complete(
    found: dict[int, tuple[int, Line]], nb_outputs: int, what: str, log_path: Path | None
) -> tuple[int, ...]:
    missing = [str(o) for o in range(nb_outputs) if o not in found]
    if missing:
        raise protocol_error(
            f"No {what} line for output(s) #{', #'.join(missing)}",
            "The program stopped before printing every output; check the raw log.",
            None,
            log_path,
        )
    return tuple(found[o][0] for o in range(nb_outputs))


def parse_stdout_output_v1(
    text: str, manifest: Manifest, log_path: Path | None = None
) -> ProtocolResult:
    """Parse ``aidge-stdout-output/v1``: one unnamed line of all values per output, in order.

    A line whose first token is a number is a values line; one whose first token is not is
    noise. A values line with a non-number later on is corrupted and raises.
    """
    specs = output_specs(manifest)
    # An empty output prints an empty line, which cannot be told apart from a blank line:
    # only non-empty outputs are matched against the value lines.
    pending = [spec for spec in specs if spec.size > 0]
    arrays = {
        spec.name: parse_values_for(Line(0, "", ""), [], spec) for spec in specs if spec.size == 0
    }
    notices: list[str] = []
    for line in split_lines(text):
        notice = check_side_channel(line, log_path)
        if notice is not None:
            notices.append(notice)
            continue
        tokens = line.text.split()
        if not tokens or parse_float_token(tokens[0]) is None:
            continue
        if not pending:
            raise protocol_error(
                f"An extra line of values after the manifest's {len(specs)} output(s)",
                "The capture holds two runs, or the manifest does not describe this program.",
                line,
                log_path,
            )
        spec = pending.pop(0)
        values = parse_values_for(line, tokens, spec, log_path)
        if values.size != spec.size:
            raise protocol_error(
                f"Output {spec.name!r} has {values.size} values, expected {spec.size}",
                "The line was cut, or the program was built from another export than this "
                "manifest. Rebuild and re-run.",
                line,
                log_path,
            )
        arrays[spec.name] = values
    if pending:
        raise protocol_error(
            f"No values for output(s) {', '.join(s.name for s in pending)} in the capture "
            f"({STDOUT_OUTPUT_V1})",
            "The program crashed or was stopped before printing them; check the raw log.",
            None,
            log_path,
        )
    return ProtocolResult(
        protocol=STDOUT_OUTPUT_V1,
        outputs=tuple(arrays[spec.name] for spec in specs),
        output_names=tuple(spec.name for spec in specs),
        notices=tuple(notices),
    )


def parse_stdout_benchmark_v1(
    text: str, manifest: Manifest, log_path: Path | None = None
) -> ProtocolResult:
    """Parse ``aidge-stdout-benchmark/v1``: ``inference_time: … ms`` (+ ``layer_time_ms:``)."""
    collector = TimingCollector(unit="ms", log_path=log_path)
    notices: list[str] = []
    for line in split_lines(text):
        notice = check_side_channel(line, log_path)
        if notice is not None:
            notices.append(notice)
            continue
        collector.feed(line)
    required = [TimingKey.INFERENCE_TIME]
    if profiling_enabled(manifest):
        required.append(TimingKey.LAYER_TIME_MS)
    block = collector.finish(
        expected_iterations=app_int(manifest, "nb_iterations"),
        required=required,
        protocol=STDOUT_BENCHMARK_V1,
    )
    if block.cycles is not None or block.layer_cycles is not None:
        raise protocol_error(
            "A host program printed cycle counters",
            "aidge-stdout-benchmark/v1 has no cycles; the manifest's protocol does not match "
            "the program that ran.",
            block.lines.get(TimingKey.CPU_CYCLES) or block.lines.get(TimingKey.LAYER_CYCLES),
            log_path,
        )
    return ProtocolResult(
        protocol=STDOUT_BENCHMARK_V1,
        timings_ms=block.timings_ms,
        layer_times_ms=block.layer_times_ms,
        notices=tuple(notices),
    )


class StdoutV1(_NonInteractive):
    """``<name>:`` + up to 100 ``%f`` values per output, or ``Prediction``/``Label`` lines."""

    name = STDOUT_V1

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        return parse_stdout_v1(text, manifest)


class StdoutOutputV1(_NonInteractive):
    """One line of all values per output, in manifest order."""

    name = STDOUT_OUTPUT_V1

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        return parse_stdout_output_v1(text, manifest)


class StdoutBenchmarkV1(_NonInteractive):
    """Host timings in ms (steady_clock), optional per-layer averages."""

    name = STDOUT_BENCHMARK_V1
    timer = STEADY_CLOCK

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        return parse_stdout_benchmark_v1(text, manifest)


__all__ = [
    "STDOUT_BENCHMARK_V1",
    "STDOUT_OUTPUT_V1",
    "STDOUT_V1",
    "StdoutBenchmarkV1",
    "StdoutOutputV1",
    "StdoutV1",
    "parse_stdout_benchmark_v1",
    "parse_stdout_output_v1",
    "parse_stdout_v1",
]
