"""Captured lines: splitting, the error that names a line, side channels, banners, sessions.

Every protocol reads the same raw material: text captured from a process or a UART, with mixed
line endings (``\\n``, ``\\r\\n``, ``\\n\\r``), banners, echo and diagnostics of the export's own
helpers (aidge_cmp, SAVE_OUTPUTS, board self-tests). Splitting lines and classifying those side
channels in one place makes every parser treat them alike and report the offending line the
same way.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aidge_deploy.errors import CaptureError, ProtocolError

if TYPE_CHECKING:
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
