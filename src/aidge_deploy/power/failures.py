"""Why a capture gave no valid window, as a typed error that names its validity code.

Each way a capture can fail (not a JLS file, a truncated one, no gate, a gate that never
closes, two candidate windows...) has its own ``power.*`` code in the one registry
(``profiling.validity.IssueCode``), so the bundle, the terminal and the exit status say
which it was; ``CollectPowerTerminal`` and ``power analyse`` turn the error into that issue.
"""

from __future__ import annotations

from pathlib import Path

from aidge_deploy.errors import CaptureError
from aidge_deploy.power.protocol import GateReport
from aidge_deploy.profiling.validity import IssueCode


class PowerCaptureError(CaptureError):
    """A capture that yields no valid window; ``code`` says why (a ``power.*`` issue)."""

    def __init__(
        self,
        code: IssueCode,
        message: str,
        hint: str | None = None,
        *,
        log_path: Path | None = None,
        gate: GateReport | None = None,
    ) -> None:
        super().__init__(message, hint, log_path=log_path)
        self.code = code
        #: what the gate detector found, when the failure is about the gate
        self.gate = gate


def issue_code_of(exc: CaptureError) -> IssueCode:
    """The validity code of a failed capture (a monitor's plain ``CaptureError`` is a
    failed capture: a sensor read, missing samples)."""
    if isinstance(exc, PowerCaptureError):
        return exc.code
    return IssueCode.POWER_CAPTURE_FAILED


__all__ = ["PowerCaptureError", "issue_code_of"]
