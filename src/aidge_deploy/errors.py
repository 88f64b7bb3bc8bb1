"""Typed errors of aidge-deploy.

Every failure a user can cause or meet is a ``DeployError`` carrying a message and an
actionable ``hint``; the CLI prints both and never a traceback (unless ``-v``). Errors that
happen after something was captured carry ``log_path`` so the evidence is never lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class DeployError(Exception):
    """Base class: ``message`` says what went wrong, ``hint`` what to do about it."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        log_path: Path | None = None,
        stage: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.log_path = log_path
        self.stage = stage

    def __str__(self) -> str:
        text = self.message
        if self.log_path is not None and str(self.log_path) not in text:
            text += f"\n  Log: {self.log_path}"
        if self.hint:
            text += f"\n  Hint: {self.hint}"
        return text


class ManifestError(DeployError):
    """The export's ``.aidge-export.json`` is missing, malformed or of another schema."""


class ConfigError(DeployError):
    """The ``DeployConfig`` is inconsistent with itself, the manifest or the registry."""


class PreflightError(DeployError):
    """A tool or resource the target needs is missing (compiler, QEMU, sshd, ...)."""


class BuildError(DeployError):
    """Configuring or compiling the export failed."""


class MemoryFitError(BuildError):
    """The built binary does not fit the memories of the hardware target."""


class QuantisationError(DeployError):
    """An int8 export's quantisation could not be made: ``step`` names the step that failed
    (the model check before it, calibration, input quantisation), ``operator`` the model's
    operator it failed on when it is known."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        step: str,
        operator: str | None = None,
        log_path: Path | None = None,
    ) -> None:
        super().__init__(message, hint, log_path=log_path, stage="export")
        self.step = step
        self.operator = operator


class ProgramPatchError(BuildError):
    """A built program's input array cannot be rewritten (missing symbol, other size)."""


class TransferError(DeployError):
    """Uploading or downloading files to/from a remote board failed."""


class FlashError(DeployError):
    """Programming or verifying the firmware image failed."""


class ExecutionError(DeployError):
    """The program crashed, hung past its timeout or exited non-zero."""


class BoardFault(ExecutionError):
    """The board or its emulator failed, not the program: QEMU did not start or died by a
    signal the host did not send, or nothing at all came from the board before the
    capture timed out. A farm retries it on another board (``FailureClass``)."""


class CoreError(ExecutionError):
    """One core of a heterogeneous (multi-core) run failed: ``core`` names it, ``log_path``
    is its own UART log."""

    def __init__(
        self,
        core: str,
        message: str,
        hint: str | None = None,
        *,
        log_path: Path | None = None,
        stage: str | None = None,
    ) -> None:
        super().__init__(message, hint, log_path=log_path, stage=stage)
        self.core = core


class CaptureError(DeployError):
    """Reading the program's output (stdout, UART) failed or ended too early."""


class ProtocolError(DeployError):
    """The captured output does not follow the declared output protocol."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        line: str | None = None,
        line_number: int | None = None,
        log_path: Path | None = None,
        stage: str | None = None,
    ) -> None:
        if line is not None and line_number is not None:
            message = f"{message} (line {line_number}: {line!r})"
        elif line is not None:
            message = f"{message} (line: {line!r})"
        super().__init__(message, hint, log_path=log_path, stage=stage)
        self.line = line
        self.line_number = line_number


class ConnectError(DeployError):
    """A peer (SSH host, board farm, GDB server) could not be reached or dropped."""


class AuthenticationError(ConnectError):
    """The peer refused our credentials."""


class HostKeyError(ConnectError):
    """The SSH host key is unknown or changed."""


class FarmError(DeployError):
    """A board-farm job did not give a result; ``job_id`` and ``log_url`` say where to look."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        job_id: int | None = None,
        log_url: str | None = None,
        remote_type: str | None = None,
        log_path: Path | None = None,
        stage: str | None = None,
        failure_class: str | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message, hint, log_path=log_path, stage=stage)
        self.job_id = job_id
        self.log_url = log_url
        self.remote_type = remote_type
        #: whose failure a failed job was: "infrastructure" (the lab's, retried by the
        #: farm) or "user"; None when the farm did not say (an older farm)
        self.failure_class = failure_class
        #: how many runs on boards the job had
        self.attempts = attempts


class FarmJobFailed(FarmError):
    """The deploy failed on the farm's board (``remote_type`` names the error raised there)."""


class FarmJobCancelled(FarmError):
    """The farm job was cancelled (by its owner, an admin, or because its agent was lost)."""


class FarmTimeout(FarmError):
    """The farm job did not finish in ``FarmOptions.job_timeout`` (it was cancelled on the farm)."""


class UnknownBoardError(ConfigError):
    """The farm has no board of that name (or none of that target)."""


#: what an internal error tells the user to do
REPORT_HINT = "This is a bug in aidge-deploy, not in your input: please report it with the log."


class InternalError(DeployError):
    """A bug in aidge-deploy (or in a plug-in), never the user's doing.

    The command line exits with status 3 (a user error exits 2), says to report it, and keeps
    the traceback in a log file (``bugreport.keep_traceback``) whose path it prints.
    """

    def __init__(self, message: str, hint: str | None = None, **where: Any) -> None:
        super().__init__(message, hint or REPORT_HINT, **where)


class PipelineError(InternalError):
    """A stage read a context field that its producing stage has not set (a bug)."""


class FarmJobBug(FarmJobFailed, InternalError):
    """The deploy failed on the farm's board with a bug of aidge-deploy there (an
    ``InternalError`` on the board's host): exit 3 here too, "report it"."""


class ReportError(DeployError):
    """Writing, verifying or comparing a result bundle failed.

    When the bundle of a finished run could not be written, ``result`` holds that run's
    ``DeployResult`` (its figures are not lost with the bundle).
    """

    #: a ``DeployResult`` (typed Any: errors is a leaf module and imports nothing of ours)
    result: Any = None


__all__ = [
    "AuthenticationError",
    "BoardFault",
    "BuildError",
    "CaptureError",
    "ConfigError",
    "ConnectError",
    "CoreError",
    "DeployError",
    "ExecutionError",
    "FarmError",
    "FarmJobBug",
    "FarmJobCancelled",
    "FarmJobFailed",
    "FarmTimeout",
    "FlashError",
    "HostKeyError",
    "InternalError",
    "ManifestError",
    "MemoryFitError",
    "PipelineError",
    "PreflightError",
    "ProgramPatchError",
    "ProtocolError",
    "QuantisationError",
    "ReportError",
    "TransferError",
    "UnknownBoardError",
]
