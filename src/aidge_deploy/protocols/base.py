"""The contract every output-protocol parser follows.

The manifest's ``protocol`` field names how the exported program reports its results. A
parser turns the captured text into a ``ProtocolResult``; it is a pure function of the text
(plus the manifest, which says how many outputs and iterations to expect). Interactive
protocols (validation, MLPerf Tiny) also have a session driver that talks to the running
program over a ``Channel`` and returns the transcript, which the same parser then reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from aidge_deploy.exportspec import Manifest
    from aidge_deploy.profiling.timing import EstimatedCycles
    from aidge_deploy.timing import ProtocolTimer


@dataclass(frozen=True)
class MlperfResult:
    """What an EEMBC / MLPerf Tiny session reports."""

    dut_name: str
    model: str
    nb_inferences: int
    nb_warmup: int
    lap_us: tuple[int, ...]  # the two timestamps around the timed loop, as printed
    latency_us: float  # (t1 - t0) / nb_inferences, device clock
    results: tuple[float, ...]


@dataclass(frozen=True)
class ProtocolResult:
    """Everything a protocol can report; fields a protocol does not carry stay ``None``.

    Units: ``timings_ms`` and ``layer_times_ms`` are milliseconds per inference (per call
    for layers). ``cycles`` / ``layer_cycles`` are the raw per-inference counter values the
    program printed; what they mean (silicon cycles or emulated instructions) is decided by
    the target, not by the parser.
    """

    protocol: str
    outputs: tuple[np.ndarray, ...] | None = None
    output_names: tuple[str, ...] | None = None
    timings_ms: tuple[float, ...] | None = None
    cycles: tuple[int, ...] | None = None
    layer_times_ms: Mapping[str, float] | None = None
    layer_cycles: Mapping[str, int] | None = None
    predictions: tuple[int, ...] | None = None
    #: labels the program printed itself (``aidge-stdout/v1`` built with ``labels``)
    labels: tuple[int, ...] | None = None
    validation_metrics: tuple[float, ...] | None = None
    mlperf: MlperfResult | None = None
    #: side-channel notices (aidge_cmp, SAVE_OUTPUTS, board diagnostics), in order
    notices: tuple[str, ...] = field(default_factory=tuple)
    #: cycles a timing model estimated for the same run (an emulated board's PMU plugin),
    #: beside what the program printed; set by the target, not by the parser
    estimated: EstimatedCycles | None = None
    #: a heterogeneous run's figures per core (set by the target), core 0 first
    cores: tuple[Mapping[str, Any], ...] = ()


@runtime_checkable
class Channel(Protocol):
    """A bidirectional line channel to a running program (UART, process stdio, socket)."""

    def write(self, data: bytes) -> None:
        """Send raw bytes to the program."""

    def read_line(self, timeout: float) -> str | None:
        """Return the next line without its terminator (``\\r`` stripped).

        Returns ``None`` at end of stream; raises ``CaptureError`` when ``timeout`` seconds
        pass without a complete line.
        """

    def transcript(self) -> str:
        """Everything received so far, as text (what is kept on disk as the raw log)."""


@dataclass(frozen=True)
class SessionRequest:
    """What an interactive session needs besides the manifest."""

    samples: tuple[np.ndarray, ...] = ()  # already in the exported input layout
    labels: tuple[int, ...] = ()
    nb_iterations: int | None = None  # MLPerf: infer N
    nb_warmup: int | None = None  # MLPerf: warm-up W
    line_timeout_s: float = 30.0
    #: silence allowed while the firmware runs its timed loop (validation phase 2, MLPerf
    #: ``infer``), which prints nothing for nb_iterations x max(10, nb_iterations) forwards;
    #: ``None`` means ``line_timeout_s``
    benchmark_timeout_s: float | None = None


@runtime_checkable
class OutputProtocol(Protocol):
    """A registered parser (and, for interactive protocols, a session driver)."""

    name: str
    interactive: bool
    #: the line that means "the program is done" when it does not exit by itself
    end_markers: tuple[str, ...]
    #: the clock behind the times the program prints (None: it prints no times)
    timer: ProtocolTimer | None

    def parse(self, text: str, manifest: Manifest) -> ProtocolResult:
        """Parse a complete capture. Raises ``ProtocolError`` on malformed input."""

    def drive(self, channel: Channel, manifest: Manifest, request: SessionRequest) -> str:
        """Run the interactive session and return its transcript (interactive only)."""
