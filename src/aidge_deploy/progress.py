"""Progress events of a run: what the library reports and the CLI renders.

A leaf module (standard library only) so that results, targets, stages and the CLI can all
speak it without importing the pipeline. The library never prints; it calls a
``ProgressCallback`` with ``ProgressUpdate`` events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class ProgressKind(StrEnum):
    START = "start"
    STATUS = "status"
    DONE = "done"
    SKIP = "skip"


@dataclass(frozen=True)
class ProgressUpdate:
    """One progress event; the CLI renders these, the library never prints."""

    stage: str
    kind: ProgressKind
    message: str = ""
    completed: float | None = None
    total: float | None = None
    unit: str = ""


ProgressCallback = Callable[[ProgressUpdate], None]
