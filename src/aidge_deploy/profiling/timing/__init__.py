"""Per-core timing models of the emulated PMU: cycles per instruction class, each one cited.

QEMU counts instructions, never cycles; the emulated PMU plugin (``plugin/aidge_pmu.c``)
estimates cycles by decoding every instruction and pricing it with its core's published
timing (``timing_model.h`` holds the rules). The numbers live here, one JSON file per core
(``cortex-m4.json``, ``cortex-m33.json``, ``cortex-m55.json``): every entry names the table
and row of the Technical Reference Manual, the scheduling model (LLVM's) or the published
silicon measurements it comes from,
and the file lists the model's assumptions and what it leaves out, the words the report, the
terminal and ``--help`` show. The plugin reads the same numbers from a plain ``name value``
table written from the file (``plugin_table``), so the data file is their one source.

A leaf module (the standard library and ``metrics``): the CLI's ``--help`` reads the
assumptions from here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from aidge_deploy.metrics import Band

__all__ = [
    "CORES",
    "ESTIMATED_CYCLES",
    "CodeKind",
    "EstimatedCycles",
    "ModelEntry",
    "ModelUncertainty",
    "TimingModel",
    "code_kind_of",
    "help_text",
    "load_model",
    "model_for_cpu",
    "plugin_table_path",
]

#: the cores with a timing model, by the ``cpu`` of the emulated boards' descriptors
CORES = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
#: the name of the figure, its unit and quantity: a metric, a layer counter
ESTIMATED_CYCLES = "estimated_cycles"
SCHEMA = "aidge-deploy.timing-model/1"


@dataclass(frozen=True)
class ModelEntry:
    """One number of a timing model and where it comes from."""

    name: str
    value: int
    source: str


class CodeKind(StrEnum):
    """Which of a model's bands applies: the sources disagree more on float code."""

    INTEGER = "integer"  # an int8 export: integer kernels
    FLOAT = "float"  # a float32 export: FPU kernels


def code_kind_of(input_dtypes: list[str] | tuple[str, ...]) -> CodeKind:
    """An export's code by its inputs' C types (``int8_t``: integer kernels)."""
    integer = any(str(t).startswith(("int", "uint")) for t in input_dtypes)
    return CodeKind.INTEGER if integer else CodeKind.FLOAT


@dataclass(frozen=True)
class SideBand:
    """One band of a model's file: fractions below and above, and how they were sized."""

    below: float
    above: float
    derivation: str


@dataclass(frozen=True)
class ModelUncertainty:
    """A model's stated uncertainty: a band per kind of code, and (a board with wait
    states) the ratio by which the estimate may exceed the silicon's."""

    bands: Mapping[CodeKind, SideBand]
    #: estimate ÷ silicon at most, on a board whose slow memory the model charges in full
    wait_states_ratio: float | None = None
    wait_states_derivation: str = ""

    def band(self, code: CodeKind, *, wait_states: bool, label: str) -> Band:
        side = self.bands[code]
        below, basis = side.below, f"{label}, {code.value} code: {side.derivation}"
        if wait_states and self.wait_states_ratio is not None:
            # the estimate errs high by up to the ratio: the silicon's figure can be as low as
            # the estimate's lower bound divided by it
            below = 1.0 - (1.0 - below) / self.wait_states_ratio
            basis += f"; slow memory: {self.wait_states_derivation}"
        return Band(round(below, 4), side.above, basis)


@dataclass(frozen=True)
class TimingModel:
    """A core's timing model as its data file states it."""

    core: str
    #: how its figures are labelled: "M4 timing model"
    label: str
    engine: str
    entries: tuple[ModelEntry, ...]
    sources: Mapping[str, str]
    assumptions: tuple[str, ...]
    leaves_out: tuple[str, ...]
    uncertainty: ModelUncertainty = field(default_factory=lambda: ModelUncertainty({}))

    def band(self, code: CodeKind, *, wait_states: bool = False) -> Band:
        """The band of an estimate of ``code`` on a board with (or without) wait states."""
        return self.uncertainty.band(code, wait_states=wait_states, label=self.label)

    def value(self, name: str) -> int:
        for entry in self.entries:
            if entry.name == name:
                return entry.value
        raise KeyError(f"{self.core} timing model has no entry {name!r}")

    @property
    def provenance_label(self) -> str:
        """The phrase beside every figure of the model: "estimated (M4 timing model)"."""
        return f"estimated ({self.label})"

    def plugin_table(self) -> str:
        """The ``name value`` lines the plugin reads (``timing=FILE``)."""
        lines = [f"# {self.core}: from aidge_deploy/profiling/timing/{self.core}.json",
                 f"engine {self.engine}", f"core {self.core}"]  # fmt: skip
        lines += [f"{e.name} {e.value}" for e in self.entries]
        return "\n".join(lines) + "\n"


def _strings(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise ValueError(f"{key} is not a list")
    return tuple(str(v) for v in value)


def _parse(core: str, data: Mapping[str, Any]) -> TimingModel:
    if data.get("schema") != SCHEMA or data.get("core") != core:
        raise ValueError(f"{core}.json is not a {SCHEMA} file for {core}")
    raw_entries = data.get("costs")
    if not isinstance(raw_entries, list):
        raise ValueError(f"{core}.json has no costs list")
    entries = []
    for raw in raw_entries:
        value = raw["value"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{core}.json: {raw['name']} is not a cycle count: {value!r}")
        if not str(raw.get("source", "")).strip():
            raise ValueError(f"{core}.json: {raw['name']} cites no source")
        entries.append(ModelEntry(str(raw["name"]), value, str(raw["source"])))
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"{core}.json names an entry twice")
    sources = data.get("sources")
    uncertainty = _uncertainty(core, data.get("uncertainty"))
    return TimingModel(
        core=core,
        label=str(data["label"]),
        engine=str(data["engine"]),
        entries=tuple(entries),
        sources=dict(sources) if isinstance(sources, dict) else {},
        assumptions=_strings(data, "assumptions"),
        leaves_out=_strings(data, "leaves_out"),
        uncertainty=uncertainty,
    )


def _fraction(core: str, where: str, value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < 1:
        raise ValueError(f"{core}.json: uncertainty {where} is not a fraction in [0, 1): {value!r}")
    return float(value)


def _uncertainty(core: str, raw: Any) -> ModelUncertainty:
    """The file's ``uncertainty``: a band for each kind of code, each with its derivation."""
    if not isinstance(raw, dict):
        raise ValueError(f"{core}.json states no uncertainty (a band per kind of code)")
    bands = {}
    for kind in CodeKind:
        side = raw.get(kind.value)
        if not isinstance(side, dict):
            raise ValueError(f"{core}.json: uncertainty has no {kind.value} band")
        derivation = str(side.get("derivation") or "").strip()
        if not derivation:
            raise ValueError(f"{core}.json: the {kind.value} band has no derivation")
        bands[kind] = SideBand(
            _fraction(core, f"{kind.value}.below", side.get("below")),
            _fraction(core, f"{kind.value}.above", side.get("above")),
            derivation,
        )
    slow = raw.get("wait_states")
    if slow is None:
        return ModelUncertainty(bands)
    ratio = slow.get("ratio") if isinstance(slow, dict) else None
    if not isinstance(ratio, int | float) or ratio < 1:
        raise ValueError(f"{core}.json: uncertainty.wait_states.ratio is not a ratio >= 1")
    derivation = str(slow.get("derivation") or "").strip()
    if not derivation:
        raise ValueError(f"{core}.json: uncertainty.wait_states has no derivation")
    return ModelUncertainty(bands, float(ratio), derivation)


@cache
def load_model(core: str) -> TimingModel:
    """The timing model of ``core`` (``cortex-m4``, ``cortex-m55``); ``KeyError`` if none."""
    if core not in CORES:
        raise KeyError(f"no timing model for {core!r}; models exist for {', '.join(CORES)}")
    text = resources.files(__name__).joinpath(f"{core}.json").read_text(encoding="utf-8")
    return _parse(core, json.loads(text))


def model_for_cpu(cpu: str) -> TimingModel | None:
    """The model of a board's core (its descriptor's ``cpu``), None for a core without one."""
    return load_model(cpu) if cpu in CORES else None


def plugin_table_path(model: TimingModel, cache_root: Path) -> Path:
    """The model's plugin table as a file under ``cache_root/tools``, content-keyed (written
    once, atomically: parallel runs share it)."""
    text = model.plugin_table()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = cache_root / "tools" / f"timing-{model.core}-{digest}.txt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{digest}.tmp")
        tmp.write_text(text, encoding="ascii")
        tmp.replace(path)
    return path


@dataclass(frozen=True)
class EstimatedCycles:
    """A timing model's cycles for one run, beside the instructions the program counted."""

    #: the model's label ("M4 timing model") and core
    model: str
    core: str
    #: estimated cycles of each timed inference, in order
    samples: tuple[float, ...]
    #: estimated cycles per call of each layer (the mean over the timed inferences)
    layers: Mapping[str, float]
    #: the model's assumptions and what it leaves out, as its data file states them
    assumptions: tuple[str, ...] = ()
    leaves_out: tuple[str, ...] = ()
    #: why there is no estimate for this run (samples and layers then empty)
    unavailable: str | None = None
    #: the model's uncertainty for this run's code and board (None: an older caller)
    band: Band | None = None

    @property
    def provenance_label(self) -> str:
        return f"estimated ({self.model})"


def help_text() -> str:
    """What ``--timing`` says in ``--help``: the two modes and each model's assumptions."""
    parts = [
        "Emulated boards: 'model' (default) estimates cycles with the core's timing model "
        "(the time is estimated cycles / core clock); 'cpi1' counts one cycle per "
        "instruction (the figure of older bundles)."
    ]
    for core in CORES:
        model = load_model(core)
        parts.append(f"{model.label} assumes: " + "; ".join(model.assumptions) + ".")
    return " ".join(parts)
