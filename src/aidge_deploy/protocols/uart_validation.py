"""The host side of the interactive ``aidge-uart-validation/v1`` session, and its markers.

The validation firmware prints ``READY <id>`` and blocks until the host sends that sample as
one line of numbers; this driver answers it, formats samples the way the firmware's
``strtof``/``strtol`` loop reads them, and returns the transcript the parser in
``protocols.uart`` checks afterwards.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from aidge_deploy.errors import CaptureError, ConfigError, ManifestError, ProtocolError
from aidge_deploy.protocols.lines import check_side_channel, read_session_line
from aidge_deploy.protocols.manifest_facts import TensorSpec, app_int, input_specs

if TYPE_CHECKING:
    from aidge_deploy.exportspec import Manifest
    from aidge_deploy.protocols.base import Channel, SessionRequest

_log = logging.getLogger(__name__)

READY_RE = re.compile(r"READY (\d+)")
VALIDATION_DONE = "VALIDATION_DONE"
BENCHMARK_DONE = "BENCHMARK_DONE"
PARSE_INPUT_ERROR = "error: parse_input"
#: the firmware's token buffer is ``char[48]``
MAX_TOKEN_CHARS = 47
#: how many times one sample may be rejected (``error: parse_input``) before giving up
MAX_SAMPLE_ATTEMPTS = 3


def format_sample(sample: np.ndarray, spec: TensorSpec) -> str:
    """One sample as the line the firmware's ``strtof``/``strtol`` loop reads (no ``\\n``).

    Floats use ``%.9g`` (``%.17g`` for double), enough to round-trip exactly; integers are
    printed as integers after a range check. Values are in the order of ``sample``'s flat C
    layout, which must already be the exported input layout (manifest ``dims``).
    """
    flat = np.asarray(sample).reshape(-1)
    if flat.size != spec.size:
        raise ConfigError(
            f"Validation sample has {flat.size} values, input {spec.name!r} expects {spec.size}",
            hint="Pass samples in the exported input layout (the manifest input 'dims').",
        )
    if spec.dtype.kind == "f":
        fmt = "%.9g" if spec.dtype.itemsize <= 4 else "%.17g"
        tokens = [fmt % float(v) for v in flat.astype(spec.dtype)]
    elif spec.dtype.kind in "iub":
        if flat.dtype.kind == "f" and not bool(
            np.all(np.isfinite(flat) & (flat == np.round(flat)))
        ):
            raise ConfigError(
                f"Input {spec.name!r} is {spec.c_type} but the sample has non-integer values",
                hint="Quantize the samples to the exported input type before sending them.",
            )
        low, high = (0, 1) if spec.dtype.kind == "b" else _bounds(spec.dtype)
        ints = [int(v) for v in flat]
        bad = next((v for v in ints if not low <= v <= high), None)
        if bad is not None:
            raise ConfigError(
                f"Sample value {bad} does not fit input {spec.name!r} ({spec.c_type})",
                hint="Quantize the samples to the exported input type before sending them.",
            )
        tokens = [str(v) for v in ints]
    else:
        raise ManifestError(
            f"Input {spec.name!r} has a dtype the validation firmware cannot read: {spec.c_type}"
        )
    too_long = next((t for t in tokens if len(t) > MAX_TOKEN_CHARS), None)
    if too_long is not None:  # cannot happen with the formats above; the firmware would reject it
        raise ConfigError(f"Sample token {too_long!r} exceeds {MAX_TOKEN_CHARS} characters")
    return " ".join(tokens)


def _bounds(dtype: np.dtype[Any]) -> tuple[int, int]:
    info = np.iinfo(dtype)
    # strtol parses into a long: values beyond int64 cannot reach the device
    return max(int(info.min), -(2**63)), min(int(info.max), 2**63 - 1)


def drive_validation(channel: Channel, manifest: Manifest, request: SessionRequest) -> str:
    """Run the ``aidge-uart-validation/v1`` session and return the transcript.

    Answers each ``READY <id>`` with sample ``id`` (resending it after ``error: parse_input``,
    at most ``MAX_SAMPLE_ATTEMPTS`` times), then waits for ``BENCHMARK_DONE`` with
    ``request.benchmark_timeout_s``, and finally for the ``END DEMO`` banner (not required).
    """
    nb_samples = app_int(manifest, "nb_validation_iterations") or 0
    inputs = input_specs(manifest)
    if not inputs:
        raise ManifestError(
            "The manifest lists no input: the validation firmware has nothing to receive",
            hint="Re-export the model.",
        )
    if len(request.samples) < nb_samples:
        raise ConfigError(
            f"The firmware expects {nb_samples} validation samples, {len(request.samples)} given",
            hint="Pass at least nb_validation_iterations samples, or re-export with fewer.",
        )
    payloads = [
        format_sample(s, inputs[0]).encode("ascii") + b"\n" for s in request.samples[:nb_samples]
    ]
    benchmark_timeout = request.benchmark_timeout_s or request.line_timeout_s
    expected_id = 0
    attempts = 0
    number = 0
    in_benchmark = False
    while True:
        number += 1
        if in_benchmark:
            waiting = f"{BENCHMARK_DONE} (timed benchmark loop)"
            line = read_session_line(channel, benchmark_timeout, waiting, number)
        else:
            waiting = f"READY {expected_id}" if expected_id < nb_samples else VALIDATION_DONE
            line = read_session_line(channel, request.line_timeout_s, waiting, number)
        check_side_channel(line)
        text = line.text
        if in_benchmark:
            if text == BENCHMARK_DONE:
                break
            continue
        match = READY_RE.fullmatch(text)
        if match is not None:
            sample_id = int(match.group(1))
            if sample_id != expected_id or sample_id >= nb_samples:
                raise ProtocolError(
                    f"The device asked for sample {sample_id}, the session expected {expected_id}",
                    hint="The firmware restarted or was built for another nb_validation_iterations.",
                    line=line.raw,
                    line_number=line.number,
                    stage="execute",
                )
            attempts += 1
            if attempts > MAX_SAMPLE_ATTEMPTS:
                raise ProtocolError(
                    f"The device rejected sample {sample_id} {MAX_SAMPLE_ATTEMPTS} times "
                    "(error: parse_input)",
                    hint="The UART drops bytes (baud rate, flow control) or the sample is not in "
                    "the exported input layout and size.",
                    line=line.raw,
                    line_number=line.number,
                    stage="execute",
                )
            _log.debug("sending sample %d (attempt %d)", sample_id, attempts)
            channel.write(payloads[sample_id])
        elif text.startswith(("prediction:", "validation_metric:")):
            expected_id += 1
            attempts = 0
        elif text.startswith("error:") and text != PARSE_INPUT_ERROR:
            raise ProtocolError(
                f"The firmware reported {text!r} for sample {expected_id}",
                hint="'error: inference' means the forward returned no output.",
                line=line.raw,
                line_number=line.number,
                stage="execute",
            )
        elif text == VALIDATION_DONE:
            if expected_id != nb_samples:
                raise ProtocolError(
                    f"{VALIDATION_DONE} after {expected_id} of {nb_samples} samples",
                    hint="The firmware was built for another nb_validation_iterations; rebuild.",
                    line=line.raw,
                    line_number=line.number,
                    stage="execute",
                )
            in_benchmark = True
    _drain_until_end_banner(channel, min(request.line_timeout_s, 5.0))
    return channel.transcript()


def _drain_until_end_banner(channel: Channel, timeout: float) -> None:
    """Read the BSP's closing banner if it comes: it belongs in the transcript, but the
    protocol is complete without it (some boards print nothing after ``BENCHMARK_DONE``)."""
    for _ in range(16):
        try:
            raw = channel.read_line(timeout)
        except CaptureError:
            return
        if raw is None or "END DEMO" in raw:
            return


__all__ = [
    "BENCHMARK_DONE",
    "MAX_SAMPLE_ATTEMPTS",
    "MAX_TOKEN_CHARS",
    "PARSE_INPUT_ERROR",
    "READY_RE",
    "VALIDATION_DONE",
    "drive_validation",
    "format_sample",
]
