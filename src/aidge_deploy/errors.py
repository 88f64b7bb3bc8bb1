"""Typed errors of aidge-deploy.

Every failure a user can cause or meet is a ``DeployError`` carrying a message and an
actionable ``hint``; the CLI prints both and never a traceback (unless ``-v``). Errors that
happen after something was captured carry ``log_path`` so the evidence is never lost.
"""

from __future__ import annotations

from pathlib import Path


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


class TransferError(DeployError):
    """Uploading or downloading files to/from a remote board failed."""


class FlashError(DeployError):
    """Programming or verifying the firmware image failed."""


class ExecutionError(DeployError):
    """The program crashed, hung past its timeout or exited non-zero."""


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


class PipelineError(DeployError):
    """A stage read a context field that its producing stage has not set (a bug)."""


class ReportError(DeployError):
    """Writing, verifying or comparing a result bundle failed."""


__all__ = [
    "AuthenticationError",
    "BuildError",
    "CaptureError",
    "ConfigError",
    "ConnectError",
    "DeployError",
    "ExecutionError",
    "FlashError",
    "HostKeyError",
    "ManifestError",
    "MemoryFitError",
    "PipelineError",
    "PreflightError",
    "ProtocolError",
    "ReportError",
    "TransferError",
]
