"""The per-board energy models of the emulated boards (``data/energy_models.json``).

Each board's model prices one time base and the events on it: energy per **cycle** from
the vendor's run current per MHz at the supply voltage, plus energy per event (load,
store, taken branch) on top. The cycles are the ones the emulated duration counts too —
the plugin's estimated cycles when it reports them, else instructions at CPI = 1 — so
energy ÷ duration is the source's average power, never a mix of two clocks. Nothing here
is a measurement: what it produces is estimated, with the model's uncertainty factor.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType

from aidge_deploy.errors import ConfigError

#: event class -> the emulated PMU plugin counter it multiplies
EVENT_COUNTERS = MappingProxyType(
    {"load": "loads", "store": "stores", "branch_taken": "branches_taken"}
)
#: plugin counters that are a time base in cycles, preferred in this order; without one,
#: instructions at CPI = 1
CYCLE_COUNTERS = ("estimated_cycles",)


@dataclass(frozen=True)
class TimeBase:
    """The cycles a window spans and what they are."""

    cycles: float
    counter: str  # the plugin counter they come from
    label: str  # "estimated cycles" / "instructions at CPI = 1"


@dataclass(frozen=True)
class EnergyModel:
    """Energy per cycle and per event of one board's core, with sources and uncertainty."""

    board: str
    core: str
    supply_v: float
    run_current_ua_per_mhz: float
    nj_per_event: Mapping[str, float]
    uncertainty_factor: float
    scope: str
    sources: tuple[str, ...]

    @property
    def nj_per_cycle(self) -> float:
        """µA/MHz x V = pJ per cycle; / 1000 = nJ per cycle."""
        return self.run_current_ua_per_mhz * self.supply_v / 1000.0

    def power_w(self, cpu_hz: float) -> float:
        """The source's average power at ``cpu_hz`` (no event priced above the cycle)."""
        return self.nj_per_cycle * 1e-9 * cpu_hz

    @staticmethod
    def time_base(counts: Mapping[str, float]) -> TimeBase:
        for counter in CYCLE_COUNTERS:
            if counter in counts:
                return TimeBase(float(counts[counter]), counter, "estimated cycles")
        return TimeBase(float(counts["instructions"]), "instructions", "instructions at CPI = 1")

    def energy_j(self, counts: Mapping[str, float]) -> float:
        """Energy of the plugin ``counts``: cycles of the time base, plus events."""
        cycles = self.time_base(counts).cycles
        events = sum(
            self.nj_per_event.get(cls, 0.0) * float(counts.get(counter, 0))
            for cls, counter in EVENT_COUNTERS.items()
        )
        return (self.nj_per_cycle * cycles + events) * 1e-9

    @property
    def basis(self) -> str:
        events = " + ".join(
            f"{self.nj_per_event.get(c, 0.0):g} nJ x {EVENT_COUNTERS[c]}" for c in EVENT_COUNTERS
        )
        return (
            f"energy model of {self.board} ({self.core}): {self.run_current_ua_per_mhz:g} uA/MHz "
            f"x {self.supply_v:g} V = {self.nj_per_cycle:.5g} nJ x cycles + {events}; "
            f"uncertainty x/÷{self.uncertainty_factor:g}"
        )


@cache
def _models() -> Mapping[str, EnergyModel]:
    raw = json.loads(
        resources.files("aidge_deploy.power").joinpath("data/energy_models.json").read_text()
    )
    out: dict[str, EnergyModel] = {}
    for board, spec in raw["boards"].items():
        out[board] = EnergyModel(
            board=board,
            core=spec["core"],
            supply_v=float(spec["supply_v"]),
            run_current_ua_per_mhz=float(spec["run_current_ua_per_mhz"]),
            nj_per_event=MappingProxyType({k: float(v) for k, v in spec["nj_per_event"].items()}),
            uncertainty_factor=float(spec["uncertainty_factor"]),
            scope=spec["scope"],
            sources=tuple(spec["sources"]),
        )
    return MappingProxyType(out)


def energy_model_for(board: str) -> EnergyModel:
    """The board's model; ``ConfigError`` naming the boards that have one."""
    models = _models()
    if board not in models:
        raise ConfigError(
            f"No energy model for board {board!r}",
            hint=f"The emulated monitor has models for: {', '.join(sorted(models))}.",
        )
    return models[board]


def boards_with_models() -> tuple[str, ...]:
    return tuple(sorted(_models()))


__all__ = [
    "CYCLE_COUNTERS",
    "EVENT_COUNTERS",
    "EnergyModel",
    "TimeBase",
    "boards_with_models",
    "energy_model_for",
]
