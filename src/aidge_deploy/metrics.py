"""What a figure *is*: its unit, its provenance, and for times the resolution of its timer.

A profiler is only worth its numbers. A latency measured on the host, a cycle count read on
silicon, an instruction count from an emulator, a time estimated from that count at the
core clock and a size read from the ELF are five different kinds of figure; ``Provenance``
names them and every ``Metric`` must say which one it is (there is no default: a figure
that forgot to say where it comes from fails here, loudly, instead of passing for silicon).

Times also carry the resolution of the timer that produced them, in the metric's unit.
The printing rules live here so the terminal, the bundle and the HTML agree: a time is
printed to its resolution, never finer; a count is printed as an integer; a figure that
spans only a few timer steps is flagged (``coarse``), one below a single step is flagged
``below_resolution`` and must never be turned into a ratio (ns/MAC, a share of the total)
— nor into 0. A figure that does not exist is "unavailable (reason)".

An estimate (a timing model's cycles, the time derived from them) carries the uncertainty
its model states (``Band``): the true figure is expected within ``value × (1 − below)`` and
``value × (1 + above)``. A banded figure is printed to 3 significant digits with its band
(``1.19 M cycles (−10 %/+15 %)``): more digits would claim a precision the model has not.

This module is a leaf: it imports nothing from the package, so every layer can use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "COARSE_STEPS",
    "COUNT_UNITS",
    "TIME_UNITS",
    "Band",
    "Metric",
    "Provenance",
    "decimals_for",
    "figure",
    "format_banded",
    "format_figure",
    "is_count_unit",
    "is_time_unit",
    "series",
    "steps_of",
    "three_digits",
]


class Provenance(StrEnum):
    """What a figure is (DESIGN §6): the one vocabulary of every target and metric."""

    SILICON = "silicon"  # measured on the physical target (UART timings, board PMU)
    HOST = "host"  # measured on this machine (host latency, peak RSS, a Linux board's OS view)
    EMULATED = "emulated"  # counted by an emulator, exact for the emulator (QEMU instructions)
    ESTIMATED = "estimated"  # the output of a model (time at N MHz with CPI = 1, energy model)
    STATIC = "static"  # a fact of the build or the model, not of a run (ELF sizes, MACs)

    @property
    def label(self) -> str:
        """A short phrase for people (legends, terminal headers)."""
        return _PROVENANCE_LABELS[self]


_PROVENANCE_LABELS = {
    Provenance.SILICON: "measured on the target",
    Provenance.HOST: "measured on the host",
    Provenance.EMULATED: "counted by an emulator (exact for the emulator, not real cycles)",
    Provenance.ESTIMATED: "estimated by a model",
    Provenance.STATIC: "a fact of the build or the model",
}

#: time units and their length in seconds
TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

#: units of things that are counted: shown as integers (a fraction of an instruction is
#: an artefact of a conversion or an average, not information)
COUNT_UNITS = frozenset(
    {"instructions", "cycles", "events", "count", "MAC", "MACs", "B", "bytes", "samples"}
)

#: a time spanning fewer timer steps than this is *coarse*: the quantisation alone can move
#: it by more than 1/COARSE_STEPS (10 %) — e.g. a 1.5 ms layer read from a 1 ms tick
COARSE_STEPS = 10


def is_time_unit(unit: str) -> bool:
    return unit in TIME_UNITS


def is_count_unit(unit: str) -> bool:
    return unit in COUNT_UNITS


def decimals_for(resolution: float) -> int:
    """Decimals needed to print a value to ``resolution`` and no finer.

    1 -> 0, 0.1 -> 1, 0.04 -> 2, 0.25 -> 1 (the resolution's leading digit is the last
    digit printed); a resolution of 10 or more still prints whole units.
    """
    if not (resolution > 0 and math.isfinite(resolution)):
        raise ValueError(f"a resolution must be a positive number, got {resolution!r}")
    return max(0, math.ceil(-math.log10(resolution) - 1e-9))


def steps_of(value: float, resolution: float) -> float:
    """How many timer steps ``value`` spans."""
    return abs(float(value)) / resolution


def format_figure(
    value: float | int | None,
    unit: str,
    resolution: float | None = None,
    *,
    unavailable_reason: str | None = None,
    with_unit: bool = True,
) -> str:
    """One figure as people read it, by the rules of this module.

    ``None`` -> ``unavailable (reason)``; a value with a resolution -> to that resolution,
    and below one step ``<step`` (never 0); a count -> an integer with thousands separators
    (below 100, 3 significant digits: a mean of 0.25 events per inference is not 0);
    anything else -> 4 significant digits.
    """
    if value is None:
        return f"unavailable ({unavailable_reason or 'not measured'})"
    number = float(value)
    if resolution is not None and abs(number) < resolution:
        # below one step: a reading, not a measurement of the value — never printed as 0
        text = f"<{resolution:,.{decimals_for(resolution)}f}"
    elif resolution is not None:
        text = f"{number:,.{decimals_for(resolution)}f}"
    elif is_count_unit(unit) and abs(number) >= 100:
        text = f"{round(number):,}"  # a fraction of an instruction is an artefact, not data
    elif is_count_unit(unit):
        text = f"{number:.3g}"  # a small mean count (0.25 page faults per inference) stays
    elif number != 0 and (abs(number) >= 1e6 or abs(number) < 1e-3):
        text = f"{number:.4g}"
    else:
        text = f"{number:,.4g}" if abs(number) < 1000 else f"{number:,.0f}"
    # "count" says nothing a bare integer does not (762 parameters, not "762 count")
    return f"{text} {unit}" if with_unit and unit and unit != "count" else text


@dataclass(frozen=True)
class Band:
    """The uncertainty a model states for its estimate, as fractions of the estimate.

    The true figure is expected between ``value × (1 − below)`` and ``value × (1 + above)``
    (a model that errs high on some code has a larger ``below``). ``basis`` says where the
    fractions come from (the model's derivation, in one line).
    """

    below: float
    above: float
    basis: str = ""

    def __post_init__(self) -> None:
        for side in (self.below, self.above):
            if not (0.0 <= side < 10.0 and math.isfinite(side)):
                raise ValueError(f"a band's fractions are in [0, 10), got {side!r}")
        if self.below >= 1.0:
            raise ValueError(f"a band cannot reach below zero (below = {self.below!r})")

    def low(self, value: float) -> float:
        return float(value) * (1.0 - self.below)

    def high(self, value: float) -> float:
        return float(value) * (1.0 + self.above)

    def contains(self, value: float, of: float) -> bool:
        """Whether ``value`` lies inside this band around the estimate ``of``."""
        lo, hi = sorted((self.low(of), self.high(of)))
        return lo <= float(value) <= hi

    def describe(self) -> str:
        """``−10 %/+15 %`` (``±10 %`` when both sides are equal)."""
        below, above = _pct(self.below), _pct(self.above)
        return f"±{above} %" if below == above else f"−{below} %/+{above} %"

    def as_dict(self, value: float | None) -> dict[str, Any]:
        """What files carry: the fractions, the basis and, with a value, the bounds."""
        entry: dict[str, Any] = {"below": self.below, "above": self.above, "basis": self.basis}
        if value is not None:
            entry["low"] = self.low(value)
            entry["high"] = self.high(value)
        return entry

    @classmethod
    def from_dict(cls, data: Any) -> Band | None:
        if not isinstance(data, dict):
            return None
        return cls(float(data["below"]), float(data["above"]), str(data.get("basis") or ""))


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.3g}"


def three_digits(number: float, unit: str) -> str:
    """3 significant digits: a count with an SI prefix (1,189,461 -> ``1.19 M``), anything
    else in its own unit (47.673 ms -> ``47.7``; 1,234.5 ms -> ``1,235``)."""
    size = abs(number)
    if is_count_unit(unit):
        for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if size >= scale:
                return f"{number / scale:.3g} {prefix}"
    if size == 0 or not math.isfinite(size):
        return f"{number:g}"
    decimals = max(0, 2 - math.floor(math.log10(size)))
    return f"{number:,.{decimals}f}"


def format_banded(value: float, unit: str, band: Band, *, with_unit: bool = True) -> str:
    """An estimate with its model's band: 3 significant digits, then the band.

    1,189,461 cycles at −10 %/+15 % -> ``1.19 M cycles (−10 %/+15 %)``; 47.673 ms ->
    ``47.7 ms (−10 %/+15 %)``; without the unit, ``1.19 M (−10 %/+15 %)``.
    """
    text = three_digits(float(value), unit)
    if with_unit and unit and unit != "count":
        text = f"{text} {unit}"
    return f"{text} ({band.describe()})"


@dataclass(frozen=True)
class Metric:
    """One figure with its unit, its provenance and, for a time, its timer's resolution.

    * ``provenance`` is required (a ``Provenance`` or one of its values); anything else
      raises ``TypeError``/``ValueError`` at construction.
    * ``value`` None means the figure does not exist here; ``unavailable_reason`` then
      says why (required), and the figure prints as ``unavailable (reason)``.
    * ``resolution`` is the smallest step the producing timer/counter can resolve, in
      ``unit`` (e.g. 0.1 for a 1 ms tick averaged over 10 forwards, in ms). Required for a
      measured time (``unit`` in ``TIME_UNITS``), optional elsewhere.
    """

    name: str
    value: float | int | None
    unit: str
    provenance: Provenance
    description: str = ""
    #: why ``value`` is None (counter unavailable, not measurable on this target, ...)
    unavailable_reason: str | None = None
    #: the timer's (or counter's) step, in ``unit``
    resolution: float | None = None
    #: the uncertainty the model behind an estimate states (None: a measurement, a count)
    band: Band | None = None

    def __post_init__(self) -> None:
        if isinstance(self.provenance, str) and not isinstance(self.provenance, Provenance):
            object.__setattr__(self, "provenance", Provenance(self.provenance))
        if not isinstance(self.provenance, Provenance):
            raise TypeError(
                f"Metric {self.name!r}: provenance must be a Provenance "
                f"({', '.join(p.value for p in Provenance)}), got {self.provenance!r}"
            )
        if not self.unit:
            raise ValueError(f"Metric {self.name!r} has no unit")
        if self.value is None and not self.unavailable_reason:
            raise ValueError(f"Metric {self.name!r} has no value and no unavailable_reason")
        if self.value is not None and self.unavailable_reason:
            raise ValueError(
                f"Metric {self.name!r} has a value and an unavailable_reason "
                f"({self.unavailable_reason!r})"
            )
        if self.resolution is not None:
            decimals_for(self.resolution)  # validates it
        if self.value is not None and self.is_time and self.resolution is None:
            raise ValueError(
                f"Metric {self.name!r} is a time ({self.unit}) without the resolution of "
                "the timer that produced it"
            )

    @classmethod
    def unavailable(
        cls, name: str, unit: str, provenance: Provenance, reason: str, description: str = ""
    ) -> Metric:
        """A figure that does not exist here, and why."""
        return cls(name, None, unit, provenance, description, unavailable_reason=reason)

    @property
    def is_time(self) -> bool:
        return is_time_unit(self.unit)

    @property
    def steps(self) -> float | None:
        """How many resolution steps the value spans (None without both)."""
        if self.value is None or self.resolution is None:
            return None
        return steps_of(self.value, self.resolution)

    @property
    def below_resolution(self) -> bool:
        """Smaller than one step of its timer: a reading, not a measurement of the value."""
        steps = self.steps
        return steps is not None and steps < 1.0

    @property
    def coarse(self) -> bool:
        """Spans fewer than ``COARSE_STEPS`` steps: quantisation alone moves it by > 10 %."""
        steps = self.steps
        return steps is not None and steps < COARSE_STEPS

    def formatted(self, *, with_unit: bool = True) -> str:
        """The value printed by the module's rules (to its resolution, counts as integers;
        an estimate with a band to 3 significant digits and its band)."""
        if self.band is not None and self.value is not None:
            return format_banded(self.value, self.unit, self.band, with_unit=with_unit)
        return format_figure(
            self.value,
            self.unit,
            self.resolution,
            unavailable_reason=self.unavailable_reason,
            with_unit=with_unit,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "provenance": self.provenance.value,
            "description": self.description,
            "unavailable_reason": self.unavailable_reason,
            "resolution": self.resolution,
            # optional (bundles of version 2 before bands have none)
            **({} if self.band is None else {"band": self.band.as_dict(self.value)}),
        }

    def as_flagged_dict(self) -> dict[str, Any]:
        """``as_dict`` plus, for a value with a resolution, its ``coarse`` and
        ``below_resolution`` flags (what files and ``--json`` carry)."""
        entry = self.as_dict()
        if self.resolution is not None and self.value is not None:
            entry["coarse"] = self.coarse
            entry["below_resolution"] = self.below_resolution
        return entry

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Metric:
        """The inverse of ``as_dict`` (bundles read back by ``compare``)."""
        return cls(
            name=str(data["name"]),
            value=data.get("value"),
            unit=str(data["unit"]),
            provenance=Provenance(data["provenance"]),
            description=str(data.get("description") or ""),
            unavailable_reason=data.get("unavailable_reason"),
            resolution=data.get("resolution"),
            band=Band.from_dict(data.get("band")),
        )


def figure(
    value: float | int | None,
    unit: str,
    provenance: Provenance,
    resolution: float | None = None,
    *,
    unavailable_reason: str | None = None,
) -> dict[str, Any]:
    """A figure that is not a headline ``Metric`` as files carry it: value, unit,
    provenance (and the step of its timer or counter, when it has one)."""
    entry: dict[str, Any] = {"value": value, "unit": unit, "provenance": provenance.value}
    if resolution is not None:
        entry["resolution"] = resolution
    if value is None:
        entry["unavailable_reason"] = unavailable_reason or "not measured"
    return entry


def series(
    values: Any, unit: str, provenance: Provenance, resolution: float | None = None
) -> dict[str, Any]:
    """Values of one kind (samples, a trace's axis, durations by name) with the unit and
    provenance they share; ``values`` is a list or a mapping of names to values."""
    entry: dict[str, Any] = {"unit": unit, "provenance": provenance.value, "values": values}
    if resolution is not None:
        entry["resolution"] = resolution
    return entry
