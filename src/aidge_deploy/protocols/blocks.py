"""Readers of the multi-line parts of a capture: the benchmark lines and the output blocks.

Host and UART firmwares print the same ``inference_time:``/``cpu_cycles:``/per-layer lines and
the same ``<name>:`` output blocks; one strict reader of each checks presence, duplicates and
counts against the manifest identically for every protocol.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aidge_deploy.protocols.lines import Line, protocol_error
from aidge_deploy.protocols.manifest_facts import TensorSpec, parse_values_for
from aidge_deploy.protocols.numbers import (
    parse_float_list,
    parse_int_list,
    parse_named_floats,
    parse_named_ints,
)

# --- benchmark lines (inference_time, cpu_cycles, layer_time_ms, layer_cycles) -------------


class TimingKey:
    """Prefixes of the benchmark lines (a closed set shared by host and UART firmwares)."""

    INFERENCE_TIME = "inference_time:"
    CPU_CYCLES = "cpu_cycles:"
    LAYER_TIME_MS = "layer_time_ms:"
    LAYER_CYCLES = "layer_cycles:"
    ALL = (INFERENCE_TIME, CPU_CYCLES, LAYER_TIME_MS, LAYER_CYCLES)


@dataclass(frozen=True)
class TimingBlock:
    """What the benchmark lines of one capture say, with the line each value came from."""

    timings_ms: tuple[float, ...] | None
    cycles: tuple[int, ...] | None
    layer_times_ms: dict[str, float] | None
    layer_cycles: dict[str, int] | None
    lines: dict[str, Line]


class TimingCollector:
    """Collect the benchmark lines of a capture, each at most once, strictly parsed.

    ``unit`` is the token the firmware appends after the values (``ms`` on the host, nothing
    on UART). ``optional_unit`` accepts both (used when no manifest says which firmware ran).
    """

    def __init__(
        self, *, unit: str | None, optional_unit: bool = False, log_path: Path | None = None
    ):
        self._unit = unit
        self._optional_unit = optional_unit
        self._log_path = log_path
        self._lines: dict[str, Line] = {}
        self._timings: list[float] | None = None
        self._cycles: list[int] | None = None
        self._layer_times: dict[str, float] | None = None
        self._layer_cycles: dict[str, int] | None = None

    def feed(self, line: Line) -> bool:
        """Consume ``line`` if it is a benchmark line; return whether it was one."""
        key = next((k for k in TimingKey.ALL if line.text.startswith(k)), None)
        if key is None:
            return False
        if key in self._lines:
            raise protocol_error(
                f"'{key}' appears twice (first on line {self._lines[key].number})",
                "The capture holds two runs (the board restarted, or two captures were "
                "concatenated). Capture a single run.",
                line,
                self._log_path,
            )
        self._lines[key] = line
        body = line.text[len(key) :]
        tokens = body.split()
        if key == TimingKey.INFERENCE_TIME:
            tokens = self._strip_unit(line, tokens)
            values = parse_float_list(line, tokens, "inference_time", self._log_path)
            for value in values:
                if not value >= 0.0 or value == float("inf"):
                    raise protocol_error(
                        f"inference_time: {value!r} is not a duration",
                        "The timer or the capture is broken; re-run the benchmark.",
                        line,
                        self._log_path,
                    )
            self._timings = values
        elif key == TimingKey.CPU_CYCLES:
            cycles = parse_int_list(line, tokens, "cpu_cycles", self._log_path)
            self._check_non_negative(line, cycles, "cpu_cycles")
            self._cycles = cycles
        elif key == TimingKey.LAYER_TIME_MS:
            times = parse_named_floats(line, body, "layer_time_ms", self._log_path)
            for name, value in times.items():
                if not value >= 0.0:
                    raise protocol_error(
                        f"layer_time_ms: layer {name!r} has the duration {value!r}",
                        "The profiling timer is broken; re-run the benchmark.",
                        line,
                        self._log_path,
                    )
            self._layer_times = times
        else:
            layer_cycles = parse_named_ints(line, body, "layer_cycles", self._log_path)
            self._check_non_negative(line, list(layer_cycles.values()), "layer_cycles")
            self._layer_cycles = layer_cycles
        return True

    def _strip_unit(self, line: Line, tokens: list[str]) -> list[str]:
        has_unit = bool(tokens) and tokens[-1] == "ms"
        if self._unit == "ms" and not self._optional_unit and not has_unit:
            raise protocol_error(
                "inference_time: the line does not end with the 'ms' unit",
                "The host program prints 'ms' after the last value; the line was cut "
                "(the program was killed or its output truncated). Re-run it.",
                line,
                self._log_path,
            )
        if has_unit and (self._unit == "ms" or self._optional_unit):
            return tokens[:-1]
        return tokens

    def _check_non_negative(self, line: Line, values: Sequence[int], what: str) -> None:
        for value in values:
            if value < 0:
                raise protocol_error(
                    f"{what}: negative counter value {value}",
                    "Counters are printed unsigned; the capture is corrupted.",
                    line,
                    self._log_path,
                )

    @property
    def seen(self) -> bool:
        return bool(self._lines)

    def first_line(self) -> Line | None:
        return min(self._lines.values(), key=lambda ln: ln.number) if self._lines else None

    def last_line(self) -> Line | None:
        return max(self._lines.values(), key=lambda ln: ln.number) if self._lines else None

    def finish(
        self,
        *,
        expected_iterations: int | None,
        required: Sequence[str],
        protocol: str,
    ) -> TimingBlock:
        """Check presence and counts, then freeze what was collected."""
        for key in required:
            if key not in self._lines:
                raise protocol_error(
                    f"No '{key}' line in the capture ({protocol})",
                    "The program did not finish its benchmark (crash, hang or capture "
                    "stopped too early), or it was built without the profiling the manifest "
                    "declares. Check the raw log and the capture timeout.",
                    None,
                    self._log_path,
                )
        for key, count in (
            (TimingKey.INFERENCE_TIME, None if self._timings is None else len(self._timings)),
            (TimingKey.CPU_CYCLES, None if self._cycles is None else len(self._cycles)),
        ):
            if (
                count is not None
                and expected_iterations is not None
                and count != expected_iterations
            ):
                raise protocol_error(
                    f"'{key}' has {count} values, the manifest's nb_iterations is {expected_iterations}",
                    "The line was cut, or the firmware was built from another export than this "
                    "manifest. Rebuild and re-run.",
                    self._lines[key],
                    self._log_path,
                )
        if (
            self._timings is not None
            and self._cycles is not None
            and len(self._timings) != len(self._cycles)
        ):
            raise protocol_error(
                f"cpu_cycles has {len(self._cycles)} values but inference_time has {len(self._timings)}",
                "One of the two lines was cut; re-run the capture.",
                self._lines[TimingKey.CPU_CYCLES],
                self._log_path,
            )
        if (
            self._layer_times is not None
            and self._layer_cycles is not None
            and set(self._layer_times) != set(self._layer_cycles)
        ):
            raise protocol_error(
                "layer_cycles and layer_time_ms name different layers",
                "One of the two profiling lines was cut; re-run the capture.",
                self._lines[TimingKey.LAYER_CYCLES],
                self._log_path,
            )
        return TimingBlock(
            timings_ms=None if self._timings is None else tuple(self._timings),
            cycles=None if self._cycles is None else tuple(self._cycles),
            layer_times_ms=self._layer_times,
            layer_cycles=self._layer_cycles,
            lines=dict(self._lines),
        )


# --- named output blocks (``<name>:`` then one line of values) ----------------------------

_TRUNCATION_RE = re.compile(r"Output (\d+) is too large and has been truncated\.$")
STDOUT_TRUNCATION = 100


@dataclass(frozen=True)
class OutputBlock:
    spec: TensorSpec
    values: np.ndarray
    header: Line
    truncated: bool


class NamedOutputReader:
    """Read ``<name>:`` blocks for the manifest's outputs, strictly, in manifest order.

    ``truncate_at`` is the ``aidge-stdout/v1`` rule: at most that many values are printed and
    an output of that size or more carries ``Output <i> is too large and has been truncated.``
    at the end of its values line.
    """

    def __init__(
        self,
        specs: Sequence[TensorSpec],
        *,
        truncate_at: int | None,
        protocol: str,
        log_path: Path | None = None,
    ) -> None:
        self._specs = {spec.name: (index, spec) for index, spec in enumerate(specs)}
        self._nb = len(specs)
        self._truncate_at = truncate_at
        self._protocol = protocol
        self._log_path = log_path
        self.blocks: dict[str, OutputBlock] = {}

    def is_header(self, line: Line) -> bool:
        return line.text.endswith(":") and line.text[:-1] in self._specs

    def read(self, lines: Sequence[Line], index: int) -> int:
        """Parse the block whose header is ``lines[index]``; return the index after it.

        Blank lines between the header and the values are skipped: reading a UART log in
        text mode turns the firmware's ``\n\r`` into two line breaks. An empty output prints
        an empty values line, so nothing is read for it.
        """
        header = lines[index]
        index += 1
        name = header.text[:-1]
        spec_size = self._specs[name][1].size
        while spec_size > 0 and index < len(lines) and not lines[index].text:
            index += 1
        values_line: Line | None
        if index < len(lines):
            values_line = lines[index]
            index += 1
        else:
            values_line = None
        self._read_values(header, values_line)
        return index

    def _read_values(self, header: Line, values_line: Line | None) -> None:
        name = header.text[:-1]
        index, spec = self._specs[name]
        if name in self.blocks:
            raise protocol_error(
                f"Output {name!r} is printed twice (first on line {self.blocks[name].header.number})",
                "The capture holds two runs (the board restarted or captures were "
                "concatenated). Capture a single run.",
                header,
                self._log_path,
            )
        expected_index = len(self.blocks)
        if index != expected_index:
            raise protocol_error(
                f"Output {name!r} is printed at position {expected_index}, the manifest lists "
                f"it at position {index}",
                "The manifest does not describe this program; re-export and rebuild.",
                header,
                self._log_path,
            )
        if values_line is None:
            raise protocol_error(
                f"Output {name!r}: the capture ends right after its header",
                "The program was killed or the capture stopped while it printed its "
                "outputs; increase the capture timeout and re-run.",
                header,
                self._log_path,
            )
        text = values_line.text
        truncated = False
        match = _TRUNCATION_RE.search(text)
        if match is not None:
            truncated = True
            if int(match.group(1)) != index:
                raise protocol_error(
                    f"Output {name!r}: the truncation notice names output {match.group(1)}",
                    "The manifest does not describe this program; re-export and rebuild.",
                    values_line,
                    self._log_path,
                )
            text = text[: match.start()]
        expected = spec.size
        if self._truncate_at is not None and spec.size >= self._truncate_at:
            expected = self._truncate_at
            if not truncated:
                raise protocol_error(
                    f"Output {name!r} has {spec.size} values, so its line must end with the "
                    "truncation notice, which is missing",
                    "The line was cut (program killed or capture stopped early); re-run.",
                    values_line,
                    self._log_path,
                )
        elif truncated:
            raise protocol_error(
                f"Output {name!r}: the program truncated an output the manifest sizes at {spec.size}",
                "The manifest does not describe this program; re-export and rebuild.",
                values_line,
                self._log_path,
            )
        values = parse_values_for(values_line, text.split(), spec, self._log_path)
        if values.size != expected:
            raise protocol_error(
                f"Output {name!r} has {values.size} values, expected {expected}",
                "The line was cut, or the firmware was built from another export than this "
                "manifest. Rebuild and re-run.",
                values_line,
                self._log_path,
            )
        self.blocks[name] = OutputBlock(spec, values, header, truncated)

    def finish(self) -> tuple[tuple[np.ndarray, ...], tuple[str, ...], tuple[str, ...]]:
        """Arrays and names in manifest order, and the truncation notices."""
        ordered = sorted(self._specs.values(), key=lambda item: item[0])
        missing = [spec.name for _, spec in ordered if spec.name not in self.blocks]
        if missing:
            raise protocol_error(
                f"No values for output(s) {', '.join(missing)} in the capture ({self._protocol})",
                "The program crashed or was stopped before printing them; check the raw log "
                "and the capture timeout.",
                None,
                self._log_path,
            )
        blocks = [self.blocks[spec.name] for _, spec in ordered]
        notices = tuple(
            f"output {b.spec.name}: only the first {b.values.size} of {b.spec.size} values are "
            "printed by this protocol"
            for b in blocks
            if b.truncated
        )
        return (
            tuple(b.values for b in blocks),
            tuple(b.spec.name for b in blocks),
            notices,
        )

    @property
    def last_header(self) -> Line | None:
        if not self.blocks:
            return None
        return max((b.header for b in self.blocks.values()), key=lambda ln: ln.number)
