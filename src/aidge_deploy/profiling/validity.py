"""Is a run's result trustworthy? Typed issue codes and the ``valid|degraded|invalid`` verdict.

A number can be printed and still be wrong: a counter wrapped, the timer ticks slower than
the layers it times, the layers do not add up to the inference. Each such finding is an
``Issue`` with a code from one registry (``IssueCode``), so reports, bundles and
comparisons speak the same vocabulary. Severity ``error`` makes a run invalid, ``warning``
degraded; ``info`` only informs (an emulated timing is exactly what was asked for). The
judgement of a whole result is ``report.assess``; the power analysis raises its own issues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from aidge_deploy.metrics import COARSE_STEPS

#: the per-layer sum may differ from the end-to-end figure by this fraction before it is "far"
LAYER_SUM_TOLERANCE = 0.5
#: flash or RAM use above this fraction of the capacity is reported
NEAR_CAPACITY = 0.9
#: fewer samples than this make a latency figure statistically weak
MIN_SAMPLES = 3
#: the power window may differ from N x clean latency by this fraction
POWER_WINDOW_TOLERANCE = 0.10
#: a power window holds at least this many monitor samples, or it has no energy figure
MIN_POWER_WINDOW_SAMPLES = 50


class Severity(StrEnum):
    ERROR = "error"  # the run is invalid: a figure is wrong, not just imprecise
    WARNING = "warning"  # the run is degraded: figures are usable with care
    INFO = "info"  # worth knowing, changes nothing about trust


class ValidityStatus(StrEnum):
    VALID = "valid"
    DEGRADED = "degraded"
    INVALID = "invalid"


class IssueCode(StrEnum):
    """Every validity finding aidge-deploy can report (see ``ISSUE_SPECS``)."""

    COUNTER_OVERFLOW = "counter.overflow"
    COUNTER_UNAVAILABLE = "counter.unavailable"
    PROFILE_LAYER_SUM_MISMATCH = "profile.layer_sum_mismatch"
    SAMPLES_TOO_FEW = "samples.too_few"
    SAMPLES_REJECTED = "samples.rejected"
    TIMER_RESOLUTION_COARSE = "timer.resolution_coarse"
    TIMING_EMULATED = "timing.emulated"
    MEMORY_NEAR_CAPACITY = "memory.near_capacity"
    POWER_CAPTURE_NOT_JLS = "power.capture_not_jls"
    POWER_CAPTURE_TRUNCATED = "power.capture_truncated"
    POWER_CAPTURE_FAILED = "power.capture_failed"
    POWER_GATE_MISSING = "power.gate_missing"
    POWER_GATE_UNCLOSED = "power.gate_unclosed"
    POWER_GATE_AMBIGUOUS = "power.gate_ambiguous"
    POWER_WINDOW_SHORT = "power.window_short"
    POWER_WINDOW_MISMATCH = "power.window_mismatch"
    POWER_SAMPLES_TOO_FEW = "power.samples_too_few"
    POWER_SATURATED = "power.saturated"
    POWER_TERMINAL_MISMATCH = "power.terminal_mismatch"
    POWER_IDLE_ABOVE_WINDOW = "power.idle_above_window"

    @property
    def severity(self) -> Severity:
        return ISSUE_SPECS[self].severity

    @property
    def description(self) -> str:
        return ISSUE_SPECS[self].description


@dataclass(frozen=True)
class IssueSpec:
    severity: Severity
    description: str


#: the registry: severity and meaning of each code (a test checks every code has one)
ISSUE_SPECS: Mapping[IssueCode, IssueSpec] = MappingProxyType(
    {
        IssueCode.COUNTER_OVERFLOW: IssueSpec(
            Severity.ERROR,
            "A hardware counter wrapped (in its own width: a value of at least 2^31 for a "
            "32-bit counter, or a negative delta) and no usable reading is left for the figure.",
        ),
        IssueCode.COUNTER_UNAVAILABLE: IssueSpec(
            Severity.WARNING,
            "A requested counter was not reported, or is missing for some layers.",
        ),
        IssueCode.PROFILE_LAYER_SUM_MISMATCH: IssueSpec(
            Severity.WARNING,
            "The per-layer figures do not add up to the end-to-end figure (off by more than "
            f"{LAYER_SUM_TOLERANCE:.0%}): layers are missing, double-counted or mis-timed.",
        ),
        IssueCode.SAMPLES_TOO_FEW: IssueSpec(
            Severity.WARNING,
            f"Fewer than {MIN_SAMPLES} usable samples: the aggregate is not robust to outliers.",
        ),
        IssueCode.SAMPLES_REJECTED: IssueSpec(
            Severity.WARNING,
            "Some samples were rejected (wrapped counter, negative delta or frozen counter) "
            "before aggregation.",
        ),
        IssueCode.TIMER_RESOLUTION_COARSE: IssueSpec(
            Severity.WARNING,
            f"A time spans fewer than {COARSE_STEPS} steps of the timer that measured it, so "
            "its quantisation alone moves it by more than 10 %; below one step it is noise. "
            "Prefer its cycle count.",
        ),
        IssueCode.TIMING_EMULATED: IssueSpec(
            Severity.INFO,
            "The run is emulated: counts are emulated instructions (not cycles) and times are "
            "estimated from them at the core clock with CPI = 1.",
        ),
        IssueCode.MEMORY_NEAR_CAPACITY: IssueSpec(
            Severity.WARNING,
            f"Flash or RAM use is above {NEAR_CAPACITY:.0%} of the target's capacity.",
        ),
        IssueCode.POWER_CAPTURE_NOT_JLS: IssueSpec(
            Severity.ERROR,
            "The power capture file is not a JLS v2 file (its first bytes are not the JLS "
            "identification): no energy figure exists for the run.",
        ),
        IssueCode.POWER_CAPTURE_TRUNCATED: IssueSpec(
            Severity.ERROR,
            "The JLS capture was not closed properly or was cut short (the length in its header "
            "is 0 or differs from the file's size, or its signals stop at different samples).",
        ),
        IssueCode.POWER_CAPTURE_FAILED: IssueSpec(
            Severity.ERROR,
            "The power monitor failed during the run (a sensor read failed, samples are "
            "missing inside the window): no energy figure exists for the run.",
        ),
        IssueCode.POWER_GATE_MISSING: IssueSpec(
            Severity.ERROR,
            "The capture has no gate input, or the gate never opened inside it: no window, no "
            "energy figure.",
        ),
        IssueCode.POWER_GATE_UNCLOSED: IssueSpec(
            Severity.ERROR,
            "The gate opened but never closed inside the capture (it ends inside the window).",
        ),
        IssueCode.POWER_GATE_AMBIGUOUS: IssueSpec(
            Severity.ERROR,
            "More than one gate pulse is consistent with N x the clean latency (or there is no "
            "clean latency to choose with): the tool does not guess which holds the inferences.",
        ),
        IssueCode.POWER_WINDOW_SHORT: IssueSpec(
            Severity.WARNING,
            "The measured power window is shorter than the planned minimum: edge errors weigh "
            "more than the plan allowed.",
        ),
        IssueCode.POWER_WINDOW_MISMATCH: IssueSpec(
            Severity.ERROR,
            f"The window differs from N x the clean latency by more than "
            f"{POWER_WINDOW_TOLERANCE:.0%} (for a host-timed window of whole program runs: is "
            f"shorter than it): the window is not the N inferences it should be.",
        ),
        IssueCode.POWER_SAMPLES_TOO_FEW: IssueSpec(
            Severity.ERROR,
            f"The window holds fewer than {MIN_POWER_WINDOW_SAMPLES} monitor samples, the "
            "minimum for an energy figure.",
        ),
        IssueCode.POWER_SATURATED: IssueSpec(
            Severity.ERROR,
            "The monitor's current range saturated inside the window: the energy is too low.",
        ),
        IssueCode.POWER_TERMINAL_MISMATCH: IssueSpec(
            Severity.ERROR,
            "The target's terminal record after the window is missing, or its inference "
            "count differs from N: energy per inference cannot be trusted.",
        ),
        IssueCode.POWER_IDLE_ABOVE_WINDOW: IssueSpec(
            Severity.WARNING,
            "The idle baseline is above the window's mean power (noise): the energy above "
            "idle is not published.",
        ),
    }
)


@dataclass(frozen=True)
class Issue:
    code: IssueCode
    message: str
    #: what the issue is about (a layer, a counter, a metric), when narrower than the run
    subject: str | None = None

    @property
    def severity(self) -> Severity:
        return self.code.severity

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "severity": self.severity.value,
            "message": self.message,
            "subject": self.subject,
        }


@dataclass(frozen=True)
class Validity:
    status: ValidityStatus
    issues: tuple[Issue, ...] = ()

    @classmethod
    def of(cls, issues: Sequence[Issue]) -> Validity:
        severities = {i.severity for i in issues}
        if Severity.ERROR in severities:
            status = ValidityStatus.INVALID
        elif Severity.WARNING in severities:
            status = ValidityStatus.DEGRADED
        else:
            status = ValidityStatus.VALID
        return cls(status, tuple(issues))

    @property
    def codes(self) -> tuple[IssueCode, ...]:
        return tuple(i.code for i in self.issues)

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "issues": [i.as_dict() for i in self.issues]}


__all__ = [
    "ISSUE_SPECS",
    "POWER_WINDOW_TOLERANCE",
    "Issue",
    "IssueCode",
    "IssueSpec",
    "Severity",
    "Validity",
    "ValidityStatus",
]
