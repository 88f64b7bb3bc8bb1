"""MLPerf Tiny (EEMBC ``th_*`` style) UART protocol: the session driver and its parser.

The ``tinyml_benchmark.jinja`` firmware never exits: it loops reading ``%``-terminated
commands into a 128-character buffer and answers each with ``m-…`` lines ending in
``m-ready``. The driver loads one input sample (``db load`` + hex chunks), runs
``infer N W`` and ``results``; the parser turns the transcript into an ``MlperfResult`` with
the mean latency ``(t1 - t0) / N`` µs from the two ``m-lap-us-`` timestamps.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aidge_deploy.errors import CaptureError, ConfigError, ManifestError, ProtocolError
from aidge_deploy.protocols.base import Channel, MlperfResult, ProtocolResult, SessionRequest
from aidge_deploy.protocols.lines import (
    Line,
    check_side_channel,
    protocol_error,
    read_session_line,
    split_lines,
)
from aidge_deploy.protocols.manifest_facts import (
    TensorSpec,
    app_int,
    app_str,
    input_specs,
    output_specs,
)
from aidge_deploy.protocols.numbers import parse_float_list
from aidge_deploy.timing import MLPERF_LAP_US, ProtocolTimer

if TYPE_CHECKING:
    from aidge_deploy.exportspec import Manifest

_log = logging.getLogger(__name__)

MLPERF_TINY_UART_V1 = "mlperf-tiny-uart/v1"

#: the firmware's command buffer (``EE_CMD_SIZE``); longer commands are silently truncated
COMMAND_BUFFER = 128
#: bytes per ``db <hex>%`` command: "db " + 2 x 62 hex digits = 127 characters < 128
DB_CHUNK_BYTES = 62
#: input conversion constants of the kws01 firmware (``prepare_input_buffer``)
KWS01_SCALE = 0.5847029089927673
KWS01_ZERO_POINT = 83

_NAME_RE = re.compile(r"m-name-dut-\[(.*)\]")
_MODEL_RE = re.compile(r"m-model-\[(.*)\]")
_EXPECTING_RE = re.compile(r"m-\[Expecting (\d+) bytes\]")
_WARMUP_RE = re.compile(r"m-warmup-start-(\d+)")
_INFER_START_RE = re.compile(r"m-infer-start-(\d+)")
_LAP_RE = re.compile(r"m-lap-us-(\d+)")
_RESULTS_RE = re.compile(r"m-results-\[(.*)\]")


def _strip_echo(line: Line) -> Line:
    """Drop an echoed command glued in front of a reply (``name%m-name-dut-[…]``)."""
    if "%" not in line.text:
        return line
    return Line(line.number, line.text.rsplit("%", 1)[1].strip(), line.raw)


@dataclass
class _InferRun:
    nb: int
    start: Line
    warmup: int
    laps: list[int]
    done: bool = False
    results: tuple[float, ...] | None = None


def parse_mlperf_transcript(
    text: str, manifest: Manifest | None, log_path: Path | None = None
) -> ProtocolResult:
    """Parse an MLPerf Tiny session transcript (the last complete ``infer`` run counts).

    With a manifest, the model the device reports must be the manifest's
    ``tinyml_benchmark_model`` and the results must have one value per class (one for ad01).
    """
    notices: list[str] = []
    dut_name = ""
    model: str | None = None
    warmup = 0
    current: _InferRun | None = None
    complete: _InferRun | None = None
    for raw_line in split_lines(text):
        notice = check_side_channel(raw_line, log_path)
        if notice is not None:
            notices.append(notice)
            continue
        line = _strip_echo(raw_line)
        text_ = line.text
        if not text_.startswith("m-"):
            continue
        if match := _NAME_RE.fullmatch(text_):
            dut_name = match.group(1)
        elif match := _MODEL_RE.fullmatch(text_):
            model = match.group(1)
        elif text_.startswith("m-warmup-start-"):
            warmup = int(_require(_WARMUP_RE, line, "m-warmup-start-<W>", log_path).group(1))
        elif text_.startswith("m-infer-start-"):
            nb = int(_require(_INFER_START_RE, line, "m-infer-start-<N>", log_path).group(1))
            current = _InferRun(nb=nb, start=line, warmup=warmup, laps=[])
        elif text_.startswith("m-lap-us-"):
            lap = int(_require(_LAP_RE, line, "m-lap-us-<µs>", log_path).group(1))
            if current is not None and not current.done:
                current.laps.append(lap)
        elif text_ == "m-infer-done":
            if current is None:
                raise protocol_error(
                    "m-infer-done without m-infer-start",
                    "The transcript lost lines; re-run the session.",
                    line,
                    log_path,
                )
            if len(current.laps) != 2:
                raise protocol_error(
                    f"The infer run has {len(current.laps)} m-lap-us timestamps, expected 2",
                    "The transcript lost lines; re-run the session.",
                    line,
                    log_path,
                )
            current.done = True
        elif text_.startswith("m-results-"):
            match = _require(_RESULTS_RE, line, "m-results-[a,b,…]", log_path)
            body = match.group(1).strip()
            tokens = [t.strip() for t in body.split(",")] if body else []
            values = tuple(parse_float_list(line, tokens, "m-results", log_path))
            if current is not None and current.done:
                current.results = values
                complete = current
    if complete is None:
        raise protocol_error(
            "No complete infer run (m-infer-start … m-infer-done, m-results) in the transcript",
            "The session was cut short or the firmware crashed during inference; check the "
            "transcript and the benchmark timeout.",
            current.start if current is not None else None,
            log_path,
        )
    return _result(complete, dut_name, model, manifest, notices, log_path)


def _require(
    pattern: re.Pattern[str], line: Line, shape: str, log_path: Path | None
) -> re.Match[str]:
    match = pattern.fullmatch(line.text)
    if match is None:
        raise protocol_error(
            f"Malformed MLPerf line, expected '{shape}'",
            "The UART dropped or corrupted bytes; re-run the session.",
            line,
            log_path,
        )
    return match


def _result(
    run: _InferRun,
    dut_name: str,
    model: str | None,
    manifest: Manifest | None,
    notices: list[str],
    log_path: Path | None,
) -> ProtocolResult:
    if run.nb <= 0:
        raise protocol_error(
            "The infer run timed zero inferences",
            "Send 'infer N W%' with N >= 1.",
            run.start,
            log_path,
        )
    t0, t1 = run.laps
    if t1 < t0:
        raise protocol_error(
            f"m-lap-us went backwards ({t0} -> {t1}): the cycle counter wrapped",
            "DWT->CYCCNT wraps after 2^32 cycles; run fewer inferences per infer command.",
            run.start,
            log_path,
        )
    results = run.results or ()
    if manifest is not None:
        expected_model = app_str(manifest, "tinyml_benchmark_model")
        if model is not None and expected_model is not None and model != expected_model:
            raise protocol_error(
                f"The device runs model {model!r}, the manifest says {expected_model!r}",
                "The board runs another firmware than this export; flash it again.",
                run.start,
                log_path,
            )
        model = model or expected_model
        outputs = output_specs(manifest)
        if outputs:
            expected = 1 if model == "ad01" else outputs[0].size
            if len(results) != expected:
                raise protocol_error(
                    f"m-results has {len(results)} values, expected {expected}",
                    "The results line was cut, or the firmware is not this export.",
                    run.start,
                    log_path,
                )
    latency_us = (t1 - t0) / run.nb
    mlperf = MlperfResult(
        dut_name=dut_name,
        model=model or "",
        nb_inferences=run.nb,
        nb_warmup=run.warmup,
        lap_us=(t0, t1),
        latency_us=latency_us,
        results=results,
    )
    # one mean over nb inferences, not a series of per-inference samples: no ``timings_ms``
    return ProtocolResult(
        protocol=MLPERF_TINY_UART_V1,
        mlperf=mlperf,
        notices=tuple(notices),
    )


# --- input encoding -----------------------------------------------------------------------


def mlperf_input_bytes(sample: np.ndarray, spec: TensorSpec, model: str) -> bytes:
    """The raw bytes ``db`` must load so that ``prepare_input_buffer`` rebuilds ``sample``.

    What the firmware does with the bytes depends on the model and the input type:

    * ``ad01`` with a float/double input: ``memcpy`` of little-endian floats (4 or 8 bytes
      per value);
    * ``kws01`` with a float input: each byte is an int8 code dequantised as
      ``(q - 83) * 0.5847``; an int8 sample is sent as is, a float sample is quantised;
    * any other model with a float input (ic01, vww01): each byte is cast to float, so the
      sample must hold integers in [0, 255] (EEMBC images are uint8);
    * an integer input: ``memcpy`` into a buffer of ``input_size`` bytes, so only 1-byte
      types can be loaded.
    """
    flat = np.asarray(sample).reshape(-1)
    if flat.size != spec.size:
        raise ConfigError(
            f"MLPerf sample has {flat.size} values, input {spec.name!r} expects {spec.size}",
            hint="Pass the sample in the exported input layout (the manifest input 'dims').",
        )
    if spec.dtype.kind == "f":
        if model == "ad01":
            little = spec.dtype.newbyteorder("<")
            return flat.astype(little).tobytes()
        if model == "kws01":
            if flat.dtype == np.int8:
                return flat.tobytes()
            codes = np.round(flat.astype(np.float64) / KWS01_SCALE + KWS01_ZERO_POINT)
            return np.clip(codes, -128, 127).astype(np.int8).tobytes()
        return _bytes_of_integers(flat, 0, 255, np.dtype(np.uint8), spec, model)
    if spec.dtype.kind in "iub":
        if spec.dtype.itemsize != 1:
            raise ConfigError(
                f"The MLPerf firmware cannot load a {spec.c_type} input: its raw buffer holds "
                f"{spec.size} bytes, one per value",
                hint="Export the model with a float or 8-bit input for MLPerf Tiny.",
            )
        info = np.iinfo(spec.dtype) if spec.dtype.kind != "b" else None
        low, high = (0, 1) if info is None else (int(info.min), int(info.max))
        return _bytes_of_integers(flat, low, high, spec.dtype, spec, model)
    raise ManifestError(f"Input {spec.name!r} has an unsupported dtype {spec.c_type!r}")


def _bytes_of_integers(
    flat: np.ndarray, low: int, high: int, dtype: np.dtype[np.generic], spec: TensorSpec, model: str
) -> bytes:
    values = flat.astype(np.float64)
    if not bool(np.all((values == np.round(values)) & (values >= low) & (values <= high))):
        raise ConfigError(
            f"The {model} firmware reads one byte per value of input {spec.name!r}; the sample "
            f"must hold integers in [{low}, {high}]",
            hint="EEMBC image/audio samples are 8-bit: pass the raw dataset sample, not a "
            "normalised float tensor.",
        )
    return values.astype(dtype).tobytes()


# --- the session --------------------------------------------------------------------------


class _Session:
    """Send one command at a time and collect the replies up to ``m-ready``."""

    def __init__(self, channel: Channel, timeout: float) -> None:
        self._channel = channel
        self._timeout = timeout
        self._number = 0

    def read(self, timeout: float, waiting_for: str) -> Line:
        self._number += 1
        line = read_session_line(self._channel, timeout, waiting_for, self._number)
        check_side_channel(line)
        return _strip_echo(line)

    def wait_ready(self, timeout: float, waiting_for: str) -> list[Line]:
        replies: list[Line] = []
        while True:
            line = self.read(timeout, waiting_for)
            if line.text == "m-ready":
                return replies
            if line.text:
                replies.append(line)

    def command(self, command: str, timeout: float | None = None) -> list[Line]:
        if len(command) > COMMAND_BUFFER or "%" in command or "\n" in command:
            raise ConfigError(f"Invalid EEMBC command {command!r}")  # a bug in this module
        _log.debug("EEMBC command %.40s%%", command)
        self._channel.write(command.encode("ascii") + b"%")
        return self.wait_ready(timeout or self._timeout, f"m-ready after '{command[:24]}%'")


def _find(replies: list[Line], pattern: re.Pattern[str], command: str) -> re.Match[str]:
    for line in replies:
        match = pattern.fullmatch(line.text)
        if match is not None:
            return match
    shown = "; ".join(line.text for line in replies) or "nothing"
    raise ProtocolError(
        f"No expected reply to '{command}%' (got: {shown})",
        hint="The firmware is not the MLPerf Tiny build of this export, or the UART lost bytes.",
        stage="execute",
    )


def drive_mlperf(channel: Channel, manifest: Manifest, request: SessionRequest) -> str:
    """Run one MLPerf Tiny measurement and return the transcript.

    Sequence: wait for the boot ``m-ready`` (if the board booted before we attached, carry on),
    ``name%``, ``profile%``, ``db load N%``, ``db <hex>%`` chunks of at most 62 bytes,
    ``infer N W%`` (N, W from the request or the manifest's nb_iterations / nb_warmup), then
    ``results%``. The firmware keeps running afterwards; stopping it is the caller's job.
    """
    inputs = input_specs(manifest)
    if not inputs:
        raise ManifestError("The manifest lists no input to load", hint="Re-export the model.")
    if not request.samples:
        raise ConfigError(
            "An MLPerf Tiny session needs one input sample to load",
            hint="Pass the sample (in the exported input layout) in SessionRequest.samples.",
        )
    nb = (
        request.nb_iterations
        if request.nb_iterations is not None
        else app_int(manifest, "nb_iterations")
    )
    warmup = request.nb_warmup if request.nb_warmup is not None else app_int(manifest, "nb_warmup")
    nb = 1 if nb is None else nb
    warmup = 0 if warmup is None else warmup
    if nb < 1 or warmup < 0:
        raise ConfigError(f"Invalid MLPerf run: infer {nb} {warmup}", hint="Use N >= 1, W >= 0.")
    session = _Session(channel, request.line_timeout_s)
    # If we attached after boot, the prompt was already printed: the commands will tell.
    with contextlib.suppress(CaptureError):
        session.wait_ready(request.line_timeout_s, "the boot 'm-ready'")
    _find(session.command("name"), _NAME_RE, "name")
    model = _find(session.command("profile"), _MODEL_RE, "profile").group(1)
    expected_model = app_str(manifest, "tinyml_benchmark_model")
    if expected_model is not None and model != expected_model:
        raise ProtocolError(
            f"The device runs model {model!r}, the manifest says {expected_model!r}",
            hint="The board runs another firmware than this export; flash it again.",
            stage="execute",
        )
    payload = mlperf_input_bytes(request.samples[0], inputs[0], model)
    announced = int(
        _find(session.command(f"db load {len(payload)}"), _EXPECTING_RE, "db load").group(1)
    )
    if announced != len(payload):
        raise ProtocolError(
            f"The device expects {announced} bytes, the sample has {len(payload)}",
            hint="The firmware's input size differs from the manifest; rebuild the export.",
            stage="execute",
        )
    loaded = False
    for offset in range(0, len(payload), DB_CHUNK_BYTES):
        chunk = payload[offset : offset + DB_CHUNK_BYTES].hex()
        replies = session.command(f"db {chunk}")
        loaded = loaded or any(line.text == "m-load-done" for line in replies)
    if not loaded:
        raise ProtocolError(
            "The device never confirmed the input load (m-load-done)",
            hint="Bytes were lost on the UART or the firmware's buffer is smaller than the input.",
            stage="execute",
        )
    benchmark_timeout = request.benchmark_timeout_s or request.line_timeout_s
    replies = session.command(f"infer {nb} {warmup}", timeout=benchmark_timeout)
    _find(replies, _RESULTS_RE, "infer")
    _find(session.command("results"), _RESULTS_RE, "results")
    return channel.transcript()


class MlperfTinyUartV1:
    """EEMBC-style MLPerf Tiny session over UART (never ends by itself)."""

    name = MLPERF_TINY_UART_V1
    interactive = True
    timer: ProtocolTimer | None = MLPERF_LAP_US
    #: the session is complete once the results of the driven ``infer`` are printed
    end_markers: tuple[str, ...] = ("m-results-",)

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        return parse_mlperf_transcript(text, manifest)

    def drive(self, channel: Channel, manifest: Manifest, request: SessionRequest) -> str:
        return drive_mlperf(channel, manifest, request)


__all__ = [
    "COMMAND_BUFFER",
    "DB_CHUNK_BYTES",
    "MLPERF_TINY_UART_V1",
    "MlperfTinyUartV1",
    "drive_mlperf",
    "mlperf_input_bytes",
    "parse_mlperf_transcript",
]
