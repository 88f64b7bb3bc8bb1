"""The per-board energy models of the emulated boards (``data/energy_models.json``).

Each board's coefficients are energies per event class of the emulated PMU, with the
sources they come from and an uncertainty factor that every estimate carries into the
result. Nothing here is a measurement: the provenance of what it produces is estimated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType

from aidge_deploy.errors import ConfigError

#: model class -> the emulated PMU plugin counter it multiplies
CLASS_COUNTERS = MappingProxyType(
    {
        "instruction": "instructions",
        "load": "loads",
        "store": "stores",
        "branch_taken": "branches_taken",
    }
)


@dataclass(frozen=True)
class EnergyModel:
    """nJ per event class of one board's core, with its sources and uncertainty."""

    board: str
    core: str
    supply_v: float
    nj: Mapping[str, float]
    uncertainty_factor: float
    scope: str
    sources: tuple[str, ...]

    def energy_j(self, counts: Mapping[str, float]) -> float:
        """Energy of the plugin ``counts`` (instructions, loads, stores, branches_taken)."""
        return (
            sum(
                self.nj[cls] * float(counts.get(counter, 0))
                for cls, counter in CLASS_COUNTERS.items()
            )
            * 1e-9
        )

    @property
    def basis(self) -> str:
        terms = " + ".join(f"{self.nj[c]:g} nJ x {CLASS_COUNTERS[c]}" for c in CLASS_COUNTERS)
        return (
            f"energy model of {self.board} ({self.core}): {terms}; "
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
            nj=MappingProxyType({k: float(v) for k, v in spec["nj"].items()}),
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


__all__ = ["CLASS_COUNTERS", "EnergyModel", "boards_with_models", "energy_model_for"]
