"""The data one run's lifecycle passes along: what a target's lifecycle methods receive
(``DeployContext``) and what its build and execution produce (``BuildResult``,
``ExecutionResult``), and the per-layer rows of its profile (``LayerFigure``).

Targets, counter sources and power runs take and give these, so they sit below all of
them; the run's outcome (``results.DeployResult``), which gathers what they measured,
sits above (and re-exports these, their documented home).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from aidge_deploy.exportspec import Export

if TYPE_CHECKING:
    from aidge_deploy.progress import ProgressCallback


class BuildStatus(StrEnum):
    BUILT = "built"
    CACHED = "cached"  # an identical export was already built: nothing was recompiled
    PREBUILT = "prebuilt"  # the caller's export already held the artifact


@dataclass(frozen=True)
class LayerFigure:
    """Per-layer profile row: time per call and the counters read around the layer."""

    name: str
    time_ms: float | None = None
    counters: Mapping[str, float] = field(default_factory=dict)
    #: static figures of the layer from the export (``profiling.model_analysis``)
    macs: int | None = None
    params: int | None = None
    #: energy of one call of the layer (µJ), when the power monitor attributes it to layers
    energy_uj: float | None = None


@dataclass(frozen=True)
class DeployContext:
    """What a target's lifecycle methods receive: the export and the session facts."""

    artifact: Export
    export_dir: Path
    target: str
    backend: str
    build_dir: Path
    log_dir: Path
    keep_build_dir: bool = False
    #: the pipeline's progress callback (PrepareStage sets it): a target reports its
    #: upload, build and run progress through it; None when nobody listens
    progress: ProgressCallback | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Toolchain:
    """The programs that built an artifact, and where they ran.

    The run's metadata names the compiler that really built the program (a K230 cross build
    is ``riscv64-linux-gnu-g++``, not the Raspberry Pi's ``aarch64-linux-gnu-g++``) and
    probes versions only of programs that ran on this machine.
    """

    programs: tuple[str, ...] = ()
    #: where they ran when not on this machine ("on the board", "in container IMAGE");
    #: their versions are then not known here
    elsewhere: str | None = None


@dataclass(frozen=True)
class BuildResult:
    """Produced by ``build()``: where the artifact is and how it was made."""

    artifact_path: Path
    mem_peaks: tuple[int, ...]
    status: BuildStatus
    log: str
    log_path: Path | None = None
    build_dir: Path | None = None
    duration_s: float = 0.0
    toolchain: Toolchain = field(default_factory=Toolchain)


@dataclass(frozen=True)
class ExecutionResult:
    """Produced by ``execute()``: the raw captured output and how the run ended."""

    raw_output: str
    exit_status: int | None
    duration_s: float
    log_path: Path | None = None
    stderr: str = ""
    signal: int | None = None
    peak_rss_bytes: int | None = None
    #: interactive sessions: what the host sent, interleaved in the transcript
    interactive: bool = False


__all__ = [
    "BuildResult",
    "BuildStatus",
    "DeployContext",
    "ExecutionResult",
    "LayerFigure",
    "Toolchain",
]
