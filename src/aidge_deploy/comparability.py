"""The one table of what makes two runs comparable, for every tool that compares runs.

``aidge-deploy compare`` (two bundles), the results history and its regression gate, the
pytest plugin's ``assert_no_regression`` and the campaigns' history records all decide
comparability here, so a difference is judged the same way whichever tool meets it.

Each **dimension** is a fact of a run (read from its result bundle, or from the history
record made from it) with one **effect** when two runs differ in it:

* ``blocking`` — *what was measured, and how*: the target, the export's kind, dtype and
  timed iterations, the figures' provenance (host, silicon, emulated). Runs that differ
  there measure different things: they are not compared, and the difference is said.
  The first four are also a run's **identity** (``series``): what the history keeps apart
  as separate series of one test.
* ``figures`` — *an instrument*: the time model of an emulated board, the power monitor,
  the aggregation of the latency samples. Only the figures that instrument produced are
  left out of the comparison (said with both values); the other figures are compared.
* ``informative`` — *what was built*: the model, the export's sources, the Aidge and
  aidge-deploy versions, the compilers' and emulator's versions, the backend and output
  protocol, the lab board. Measuring their effect is what a comparison is for: the figures
  are compared and the difference is named beside the verdict. The lab board's name (a
  board renamed, a run without ``--aidge-lab``) is informative; a user who keeps each
  board of a target apart asks for it (``--aidge-board-series``), and it is then part of
  the identity.

**Estimates inside each other's band.** An emulated board's estimated cycles (and the times
made of them) carry the band their timing model states. Two estimates of runs whose emulated
instructions are the same, each inside the other's band, are *no change*: the model cannot
tell them apart (a layout that moves unrelated code, a toolchain that reorders the same
instructions). When the instructions changed, the estimates are compared as any figure.

Version lines are compared by their version numbers (``arm-none-eabi-gcc (15:12.2.rel1-1)
12.2.1 20221205`` is ``12.2.1``); the build drivers (cmake, make) are left out: a new cmake
compiles the same code the same way. An emulated run recorded before the time models has
its times at one cycle per instruction ("CPI = 1").
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Effect(StrEnum):
    """What a difference in a dimension does to a comparison (see the module docstring)."""

    BLOCKING = "blocking"  # the runs are not compared
    FIGURES = "figures"  # the figures of one instrument are not compared; the rest are
    INFORMATIVE = "informative"  # named beside the verdict; the figures are compared


#: per-layer figures' keys start with this (``layers/<layer>/<figure>``)
LAYER_PREFIX = "layers/"
#: figures of the power run: compared only when both runs used the same power monitor
POWER_KEYS = ("power_*", "energy_*", f"{LAYER_PREFIX}*/energy")
#: an emulated board's times and modelled cycles: compared only when both runs estimated
#: them with the same model (a timing model's time against CPI = 1 is no regression)
TIME_KEYS = (
    "latency*",
    "mlperf_latency",
    "estimated_cycles",
    f"{LAYER_PREFIX}*/time",
    f"{LAYER_PREFIX}*/estimated_cycles",
)
#: the emulated instruction count: whether an estimate's program changed (``no_change``)
INSTRUCTIONS = "emulated_instructions"

#: the figure an aggregation (median, mean, ...) reduces the latency samples to
AGGREGATED_KEYS = ("latency",)

#: tools whose version only drives a build: never a difference
BUILD_DRIVERS = frozenset({"cmake", "make"})
#: what an emulated run's times were estimated with before the time models existed
CPI1 = "CPI = 1"


@dataclass(frozen=True)
class Dimension:
    name: str
    label: str
    effect: Effect
    #: part of a run's identity: its series in a history (``history.identity``)
    series: bool = False
    #: the figures it concerns (``Effect.FIGURES``), as ``fnmatch`` patterns of their keys
    figures: tuple[str, ...] = ()


#: THE table. Order: identity first, then how the figures were measured, then what was built.
DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("target", "target", Effect.BLOCKING, series=True),
    Dimension("kind", "export application", Effect.BLOCKING, series=True),
    Dimension("dtype", "dtype", Effect.BLOCKING, series=True),
    Dimension("iterations", "iterations", Effect.BLOCKING, series=True),
    Dimension("provenance", "provenance", Effect.BLOCKING),
    Dimension("time_model", "emulated time model (--timing)", Effect.FIGURES, figures=TIME_KEYS),
    Dimension("power_source", "power monitor (--power)", Effect.FIGURES, figures=POWER_KEYS),
    Dimension("aggregation", "aggregation", Effect.FIGURES, figures=AGGREGATED_KEYS),
    Dimension("board", "lab board", Effect.INFORMATIVE),
    Dimension("model_hash", "model (layers and parameters)", Effect.INFORMATIVE),
    Dimension("io_signature", "model inputs/outputs", Effect.INFORMATIVE),
    Dimension("export_hash", "export sources", Effect.INFORMATIVE),
    Dimension("aidge_core", "aidge-core version", Effect.INFORMATIVE),
    Dimension("aidge_deploy", "aidge-deploy version", Effect.INFORMATIVE),
    Dimension("toolchain", "toolchain", Effect.INFORMATIVE),
    Dimension("backend", "backend", Effect.INFORMATIVE),
    Dimension("protocol", "output protocol", Effect.INFORMATIVE),
)
BY_NAME: Mapping[str, Dimension] = {d.name: d for d in DIMENSIONS}
#: the dimensions that make up a run's identity (its series)
SERIES = tuple(d.name for d in DIMENSIONS if d.series)

_VERSION = re.compile(r"(?:^|[\s(])v?(\d+\.\d+(?:\.\d+)*)")


def version_of(line: str | None) -> str | None:
    """``arm-none-eabi-gcc (15:12.2.rel1-1) 12.2.1 20221205`` -> ``12.2.1`` (a line with no
    version number is kept whole)."""
    if not line:
        return None
    found = _VERSION.findall(str(line))
    return found[0] if found else str(line)


def toolchain_versions(toolchain: Mapping[str, Any] | None) -> dict[str, str | None]:
    """tool -> its version, the build drivers left out."""
    return {
        str(tool): version_of(line)
        for tool, line in sorted((toolchain or {}).items())
        if tool not in BUILD_DRIVERS
    }


def times_from(time_model: str | None, provenance: str | None) -> str | None:
    """What an emulated run's times come from (``CPI1`` before the models); None elsewhere."""
    if time_model is None and provenance == "emulated":
        return CPI1
    return time_model


def instructions_key(key: str) -> str:
    """The instruction count behind the estimate ``key``: the layer's for a layer figure."""
    if key.startswith(LAYER_PREFIX):
        return f"{key.rsplit('/', 1)[0]}/{INSTRUCTIONS}"
    return INSTRUCTIONS


def no_change(
    base: float,
    base_band: tuple[float, float],
    cand: float,
    cand_band: tuple[float, float],
    base_instructions: float | None,
    cand_instructions: float | None,
) -> bool:
    """Whether two banded estimates are no change: each inside the other's band (``(low,
    high)``), their instructions known and the same."""
    if base_instructions is None or cand_instructions is None:
        return False
    if base_instructions != cand_instructions:
        return False
    return base_band[0] <= cand <= base_band[1] and cand_band[0] <= base <= cand_band[1]


def normalised(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts as the table compares them (every dimension present; versions as numbers)."""
    out = {d.name: facts.get(d.name) for d in DIMENSIONS}
    out["toolchain"] = toolchain_versions(facts.get("toolchain"))
    out["time_model"] = times_from(facts.get("time_model"), facts.get("provenance"))
    if out["iterations"] is not None:
        out["iterations"] = int(out["iterations"])
    return out


@dataclass(frozen=True)
class Difference:
    """Two runs differ in one dimension."""

    name: str
    effect: Effect
    label: str
    base: Any
    cand: Any

    @property
    def kind(self) -> Effect:
        """(the name ``compare --json`` has always used for the effect)"""
        return self.effect

    @property
    def figures(self) -> tuple[str, ...]:
        return BY_NAME[self.name].figures if self.name in BY_NAME else ()

    def concerns(self, key: str) -> bool:
        """Whether the figure ``key`` is one this difference keeps from being compared."""
        return any(fnmatch.fnmatchcase(key, p) for p in self.figures)

    def describe(self) -> str:
        """``iterations 3 → 5``, ``toolchain arm-none-eabi-gcc 12.2.1 → 13.3.0``."""
        if self.name == "toolchain" and isinstance(self.base, Mapping):
            cand = self.cand if isinstance(self.cand, Mapping) else {}
            tools = sorted(set(self.base) | set(cand))
            changed = [
                f"{t} {self.base.get(t) or 'none'} → {cand.get(t) or 'none'}"
                for t in tools
                if self.base.get(t) != cand.get(t)
            ]
            return "toolchain " + ", ".join(changed)
        return f"{self.label} {_shown(self.base)} → {_shown(self.cand)}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.effect.value,
            "label": self.label,
            "base": self.base,
            "cand": self.cand,
        }


_DIGEST = re.compile(r"[0-9a-f]{32,}")


def _shown(value: Any) -> str:
    """A value for people: ``none`` for nothing, a SHA-256 by its first 12 digits."""
    if value is None or value == "":
        return "none"
    text = str(value)
    return text[:12] if _DIGEST.fullmatch(text) else text


def differences(
    base: Mapping[str, Any], cand: Mapping[str, Any], *, known: bool = False
) -> tuple[Difference, ...]:
    """Every dimension in which ``cand`` differs from ``base``, in the table's order.

    ``known=True`` compares only the dimensions both runs recorded (a history record from
    before a dimension existed does not differ from a new run in it).
    """
    b, c = normalised(base), normalised(cand)
    out = []
    for dim in DIMENSIONS:
        if known and (dim.name not in base or dim.name not in cand):
            continue
        if b[dim.name] != c[dim.name]:
            out.append(Difference(dim.name, dim.effect, dim.label, b[dim.name], c[dim.name]))
    return tuple(out)


def of_effect(diffs: Sequence[Difference], effect: Effect) -> tuple[Difference, ...]:
    return tuple(d for d in diffs if d.effect is effect)


def describe(diffs: Sequence[Difference]) -> str:
    """``iterations 3 → 5; lab board bench-a → none``."""
    return "; ".join(d.describe() for d in diffs)


def facts_from_bundle(
    comparability: Mapping[str, Any],
    *,
    target: str | None,
    provenance: str | None,
    kind: str,
    input_dtype: str | None,
    iterations: int | None,
) -> dict[str, Any]:
    """A bundle's facts for the table: its manifest's ``comparability`` section, with the
    kind, input dtype (the export's C type) and iterations of the export it ran and its
    summary's target and provenance where the manifest lacks them (``report.reader``'s
    ``ResultBundle.table_facts`` reads them from any bundle version)."""
    facts = dict(comparability)
    facts.update(
        target=str(comparability.get("target") or target or ""),
        provenance=comparability.get("provenance") or provenance,
        kind=kind,
        dtype=dtype_of(input_dtype),
        iterations=iterations,
    )
    facts.setdefault("board", None)
    return facts


#: the export's C type of a tensor -> the dtype a user asks for
_DTYPES = {
    "float": "float32",
    "float32": "float32",
    "float32_t": "float32",
    "double": "float64",
    "int8_t": "int8",
    "int8": "int8",
    "uint8_t": "uint8",
    "int16_t": "int16",
    "int32_t": "int32",
}


def dtype_of(c_type: str | None) -> str:
    """``int8_t`` -> ``int8``, ``float`` -> ``float32`` (unknown types kept as they are)."""
    text = str(c_type or "").strip()
    return _DTYPES.get(text, text or "unknown")


__all__ = [
    "BY_NAME",
    "DIMENSIONS",
    "INSTRUCTIONS",
    "POWER_KEYS",
    "SERIES",
    "TIME_KEYS",
    "Difference",
    "Dimension",
    "Effect",
    "describe",
    "differences",
    "dtype_of",
    "facts_from_bundle",
    "instructions_key",
    "no_change",
    "normalised",
    "of_effect",
    "times_from",
    "toolchain_versions",
    "version_of",
]
