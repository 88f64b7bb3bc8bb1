"""Strict parsing of the numbers C ``printf`` prints, naming the offending line on failure.

A capture with a glued, cut or garbled number is corrupted, not data: these parsers accept
exactly what C prints (no ``1_0``, no padding) so every protocol refuses the same inputs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aidge_deploy.protocols.lines import Line, protocol_error

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
