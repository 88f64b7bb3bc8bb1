"""Helpers shared by the output-protocol parsers: lines, numbers, side channels, manifest facts.

Every protocol reads the same raw material: text captured from a process or a UART, with mixed
line endings (``\\n``, ``\\r\\n``, ``\\n\\r``), banners, echo and diagnostics of the export's own
helpers (aidge_cmp, SAVE_OUTPUTS, board self-tests). Keeping line splitting, strict number
parsing and side-channel classification in one place makes every parser treat them alike and
report the offending line the same way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aidge_deploy.errors import CaptureError, ProtocolError

if TYPE_CHECKING:
    from aidge_core.export_utils import ExportManifest

    from aidge_deploy.protocols.base import Channel

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Line:
    """One captured line: its 1-based number in the capture and its text without ``\\r``/edges."""

    number: int
    text: str
    raw: str


def split_lines(text: str) -> list[Line]:
    """Split a capture into lines, tolerating ``\\r`` anywhere.

    Lines are cut at ``\\n`` only; a ``\\r`` (from ``\\r\\n`` or the UART's ``\\n\\r``) is
    treated as whitespace, so ``"name:\\n\\r1 2\\n\\r"`` gives ``name:``, ``1 2`` and an
    empty line, and numbers never get glued together by a dropped ``\\r``.
    """
    lines: list[Line] = []
    for index, raw in enumerate(text.split("\n"), start=1):
        lines.append(Line(index, raw.replace("\r", " ").strip(), raw))
    return lines


_FLOAT_RE = re.compile(
    r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)",
    re.IGNORECASE | re.ASCII,
)
_INT_RE = re.compile(r"[-+]?\d+", re.ASCII)


def parse_float_token(token: str) -> float | None:
    """``float(token)`` for C ``printf`` output, or ``None`` when it is not a number.

    Python's ``float`` also accepts ``1_0`` and surrounding spaces; C never prints those, so a
    strict pattern is checked first (a line with them is corrupted, not a number).
    """
    if not _FLOAT_RE.fullmatch(token):
        return None
    lowered = token.lower().lstrip("+-")
    if lowered.startswith("nan"):
        return float("nan")
    return float(token)


def parse_int_token(token: str) -> int | None:
    """``int(token)`` for a decimal C integer, or ``None``."""
    if not _INT_RE.fullmatch(token):
        return None
    return int(token)


def protocol_error(
    message: str,
    hint: str,
    line: Line | None = None,
    log_path: Path | None = None,
) -> ProtocolError:
    """A ``ProtocolError`` naming the line (its text as captured, ``\\r`` included)."""
    if line is None:
        return ProtocolError(message, hint=hint, log_path=log_path, stage="parse")
    return ProtocolError(
        message,
        hint=hint,
        line=line.raw,
        line_number=line.number,
        log_path=log_path,
        stage="parse",
    )


def parse_float_list(
    line: Line, tokens: Sequence[str], what: str, log_path: Path | None = None
) -> list[float]:
    """Parse every token as a float or raise naming the line."""
    values: list[float] = []
    for token in tokens:
        value = parse_float_token(token)
        if value is None:
            raise protocol_error(
                f"{what}: {token!r} is not a number",
                "The capture is corrupted or truncated (baud rate mismatch, lost UART bytes, "
                "or the program was killed while printing). Re-run the capture.",
                line,
                log_path,
            )
        values.append(value)
    return values


def parse_int_list(
    line: Line, tokens: Sequence[str], what: str, log_path: Path | None = None
) -> list[int]:
    """Parse every token as a decimal integer or raise naming the line."""
    values: list[int] = []
    for token in tokens:
        value = parse_int_token(token)
        if value is None:
            raise protocol_error(
                f"{what}: {token!r} is not an integer",
                "The capture is corrupted or truncated (lost UART bytes or a killed program). "
                "Re-run the capture.",
                line,
                log_path,
            )
        values.append(value)
    return values


def parse_named_floats(
    line: Line, body: str, what: str, log_path: Path | None = None
) -> dict[str, float]:
    """Parse ``name=1.5 name=0.25 …`` (``layer_time_ms``); names must be unique."""
    return {k: float(v) for k, v in _parse_named(line, body, what, False, log_path).items()}


def parse_named_ints(
    line: Line, body: str, what: str, log_path: Path | None = None
) -> dict[str, int]:
    """Parse ``name=12 name=7 …`` (``layer_cycles``); names must be unique."""
    return {k: int(v) for k, v in _parse_named(line, body, what, True, log_path).items()}


def _parse_named(
    line: Line, body: str, what: str, integers: bool, log_path: Path | None
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for token in body.split():
        name, sep, value_text = token.partition("=")
        value: float | int | None
        value = parse_int_token(value_text) if integers else parse_float_token(value_text)
        if not sep or not name or value is None:
            raise protocol_error(
                f"{what}: {token!r} is not 'layer=value'",
                "The profiling line is corrupted or truncated. Re-run the capture.",
                line,
                log_path,
            )
        if name in result:
            raise protocol_error(
                f"{what}: layer {name!r} appears twice",
                "Two profiling blocks were merged into one line; re-run the capture.",
                line,
                log_path,
            )
        result[name] = value
    return result


# --- side channels -----------------------------------------------------------------------

#: substrings that mean the program failed, with the hint shown for each
_FATAL_PATTERNS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"\[FAILURE\]"),
        "aidge_cmp reports a mismatch with the Aidge reference",
        "The exported kernels disagree with Aidge's CPU backend for this node; see the "
        "following '[ERROR] - First error detected at' line and report it upstream.",
    ),
    (
        re.compile(r"Abort program\."),
        "the program aborted",
        "An aidge_cmp check failed (see the lines before). Rebuild without AIDGE_CMP to "
        "measure anyway, or fix the export.",
    ),
    (
        re.compile(r"^\[ERROR\]"),
        "the program reported an error",
        "Read the error line; it comes from the export's runtime helpers or the BSP.",
    ),
    (
        re.compile(r"hard\s*fault", re.IGNORECASE),
        "the MCU took a HardFault",
        "The firmware crashed (stack overflow, unaligned or out-of-range access). Check the "
        "memory fit and the stack size in the linker script.",
    ),
    (
        re.compile(r"Error_Handler", re.IGNORECASE),
        "the firmware is trapped in its Error_Handler",
        "A HAL call failed during board initialisation; check the clock and UART setup.",
    ),
    (
        re.compile(r"Wrong parameters value: file"),
        "a HAL assert_failed fired",
        "A HAL function got an invalid parameter; see the file and line it names.",
    ),
    (
        re.compile(r"^(?:DUAL_CORE_TEST|APSS_M55_TEST): FAIL"),
        "the board's multi-core self-test failed",
        "The secondary core did not answer; check the heterogeneous deployment setup.",
    ),
)

#: prefixes of harmless diagnostics kept as notices, in order of appearance
_NOTICE_PREFIXES: tuple[str, ...] = (
    "[NOTICE]",
    "DUAL_CORE_TEST:",
    "APSS_M55_TEST:",
    "M55-HP:",
)


def check_side_channel(line: Line, log_path: Path | None = None) -> str | None:
    """Raise on a fatal diagnostic line; return the line's text if it is a notice, else None."""
    for pattern, message, hint in _FATAL_PATTERNS:
        if pattern.search(line.text):
            raise protocol_error(f"The capture shows that {message}", hint, line, log_path)
    if line.text.startswith(_NOTICE_PREFIXES):
        return line.text
    return None


# --- banners -----------------------------------------------------------------------------

START_BANNER = "DEMO EXPORT"
END_BANNER = "END DEMO"


def is_start_banner(line: Line) -> bool:
    return START_BANNER in line.text and line.text.startswith("*")


def is_end_banner(line: Line) -> bool:
    return END_BANNER in line.text and line.text.startswith("*")


# --- manifest facts ----------------------------------------------------------------------

#: C type of a manifest tensor -> numpy dtype
C_TYPE_TO_NUMPY: Mapping[str, np.dtype[Any]] = {
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "bool": np.dtype(np.bool_),
    "int8_t": np.dtype(np.int8),
    "int16_t": np.dtype(np.int16),
    "int32_t": np.dtype(np.int32),
    "int64_t": np.dtype(np.int64),
    "uint8_t": np.dtype(np.uint8),
    "uint16_t": np.dtype(np.uint16),
    "uint32_t": np.dtype(np.uint32),
    "uint64_t": np.dtype(np.uint64),
    "int": np.dtype(np.int32),
    "char": np.dtype(np.int8),
    "signed char": np.dtype(np.int8),
    "unsigned char": np.dtype(np.uint8),
    "short": np.dtype(np.int16),
    "unsigned short": np.dtype(np.uint16),
    "unsigned int": np.dtype(np.uint32),
    "long": np.dtype(np.int64),
    "unsigned long": np.dtype(np.uint64),
    "long long": np.dtype(np.int64),
    "unsigned long long": np.dtype(np.uint64),
}


def numpy_dtype(c_type: str) -> np.dtype[Any]:
    """The numpy dtype of a manifest ``dtype`` (a C type name)."""
    try:
        return C_TYPE_TO_NUMPY[c_type.strip()]
    except KeyError:
        from aidge_deploy.errors import ManifestError

        raise ManifestError(
            f"Unknown tensor dtype {c_type!r} in the manifest",
            hint="Expected a C type such as float, double, int8_t, uint8_t, int32_t or bool.",
        ) from None


@dataclass(frozen=True)
class TensorSpec:
    """One manifest input or output: C name, numpy dtype, flat size."""

    name: str
    c_type: str
    dtype: np.dtype[Any]
    size: int


def _tensor_specs(entries: Iterable[Mapping[str, Any]], kind: str) -> tuple[TensorSpec, ...]:
    from aidge_deploy.errors import ManifestError

    specs: list[TensorSpec] = []
    for index, entry in enumerate(entries):
        try:
            name = str(entry["name"])
            c_type = str(entry["dtype"])
            size = int(entry["size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(
                f"Manifest {kind}[{index}] lacks a valid name/dtype/size: {entry!r}",
                hint="Re-export the model; the manifest was edited or written by another tool.",
            ) from exc
        if size < 0:
            raise ManifestError(
                f"Manifest {kind}[{index}] has a negative size {size}",
                hint="Re-export the model.",
            )
        specs.append(TensorSpec(name, c_type, numpy_dtype(c_type), size))
    return tuple(specs)


def output_specs(manifest: ExportManifest) -> tuple[TensorSpec, ...]:
    return _tensor_specs(manifest.outputs, "outputs")


def input_specs(manifest: ExportManifest) -> tuple[TensorSpec, ...]:
    return _tensor_specs(manifest.inputs, "inputs")


def app_int(manifest: ExportManifest, key: str) -> int | None:
    """An integer from ``application_config`` (the firmware's real settings), if present."""
    value = (manifest.application_config or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def app_str(manifest: ExportManifest, key: str) -> str | None:
    value = (manifest.application_config or {}).get(key)
    return value if isinstance(value, str) else None


def profiling_enabled(manifest: ExportManifest) -> bool:
    """Whether the firmware prints the per-layer lines (manifest flag or application config)."""
    return bool(manifest.profiling) or bool((manifest.application_config or {}).get("profiling"))


def to_output_array(
    values: Sequence[float] | Sequence[int],
    spec: TensorSpec,
    line: Line,
    log_path: Path | None = None,
) -> np.ndarray:
    """Convert parsed values to the output's dtype, refusing values it cannot hold."""
    if spec.dtype.kind in "iub":
        info_min, info_max = (0, 1) if spec.dtype.kind == "b" else _int_bounds(spec.dtype)
        for value in values:
            if not isinstance(value, int) or not info_min <= value <= info_max:
                raise protocol_error(
                    f"Output {spec.name!r} ({spec.c_type}) got the value {value!r}, "
                    f"outside [{info_min}, {info_max}]",
                    "The program printed a value its output type cannot hold; the manifest "
                    "does not describe this program, or the capture is corrupted.",
                    line,
                    log_path,
                )
    if spec.dtype.kind == "f" and spec.dtype.itemsize < 8:
        finfo = np.finfo(spec.dtype)
        for value in values:
            if abs(value) > float(finfo.max) and abs(value) != float("inf"):
                raise protocol_error(
                    f"Output {spec.name!r} ({spec.c_type}) got {value!r}, beyond its range",
                    "A float output cannot print such a value; the capture is corrupted.",
                    line,
                    log_path,
                )
    return np.asarray(values, dtype=spec.dtype)


def _int_bounds(dtype: np.dtype[Any]) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def parse_values_for(
    line: Line, tokens: Sequence[str], spec: TensorSpec, log_path: Path | None = None
) -> np.ndarray:
    """Parse an output's printed values with the strictness its C type implies."""
    what = f"output {spec.name!r}"
    if spec.dtype.kind in "iub":
        ints = parse_int_list(line, tokens, what, log_path)
        return to_output_array(ints, spec, line, log_path)
    return to_output_array(parse_float_list(line, tokens, what, log_path), spec, line, log_path)


def first_marker_line(lines: Sequence[Line], marker: str) -> Line | None:
    for line in lines:
        if line.text == marker:
            return line
    return None


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


# --- interactive sessions -----------------------------------------------------------------


def read_session_line(channel: Channel, timeout: float, waiting_for: str, number: int) -> Line:
    """Read one line or raise ``CaptureError`` saying what the session was waiting for."""
    try:
        raw = channel.read_line(timeout)
    except CaptureError as exc:
        # the channel says what failed (usually a timeout); we add what the session awaited
        raise CaptureError(
            f"No answer while waiting for {waiting_for} ({timeout:g} s): {exc.message}",
            hint="The firmware hung, crashed silently or is not running this protocol; check the "
            "transcript. Long benchmarks need a larger benchmark timeout.",
            log_path=exc.log_path,
            stage="execute",
        ) from exc
    if raw is None:
        raise CaptureError(
            f"The program's output ended while waiting for {waiting_for}",
            hint="The firmware exited or the connection closed; check the transcript.",
            stage="execute",
        )
    _log.debug("session line %d: %r", number, raw)
    return Line(number, raw.replace("\r", " ").strip(), raw)
