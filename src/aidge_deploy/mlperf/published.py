"""The published MLPerf Tiny closed-division Cortex-M results, and an estimate beside them.

Why this module exists: an estimated cycle count means little alone; beside what shipping
engines do on silicon for the same model and core it says how far an export is from the
state of the art. ``data/published.json`` holds every closed-division row of the
``mlcommons/tiny_results_v1.0`` ... ``v1.3`` repositories whose processor is an Arm Cortex-M
core without an accelerator: board, core, clock, inference engine and version, and the
median throughput of its performance run, each with the repository, commit and paths it
was read from (``scripts/extract_mlperf_tiny_results.py`` writes it; no row is made up).
Cycles are latency x core clock; cycles/MAC divide by the reference model's MACs.

A comparison is information, never a verdict: ``beside_published`` gives the ratio of the
estimate to each published row, with the engine named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from aidge_deploy.mlperf.models import MODELS, TinyModel

DATA = "published.json"


@dataclass(frozen=True)
class PublishedRow:
    """One published result: a system running one benchmark."""

    round: str
    submitter: str
    system: str
    board: str
    processor: str
    core: str
    clock_hz: float
    engine: str
    engine_version: str | None
    benchmark: TinyModel
    #: int8 / float32 as the submission says it; None when it says neither
    dtype: str | None
    latency_s: float
    repository: str
    commit: str
    result_path: str
    system_path: str

    @property
    def cycles(self) -> float:
        return self.latency_s * self.clock_hz

    @property
    def cycles_per_mac(self) -> float:
        return self.cycles / MODELS[self.benchmark].macs

    @property
    def engine_text(self) -> str:
        return f"{self.engine} {self.engine_version}" if self.engine_version else self.engine

    @property
    def source(self) -> str:
        """Where the row was read from: repository@commit:path (its system description
        beside it)."""
        return f"{self.repository}@{self.commit[:12]}:{self.result_path}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "submitter": self.submitter,
            "board": self.board,
            "core": self.core,
            "clock_mhz": self.clock_hz / 1e6,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "benchmark": self.benchmark.value,
            "dtype": self.dtype,
            "latency_ms": self.latency_s * 1e3,
            "cycles": self.cycles,
            "cycles_per_mac": self.cycles_per_mac,
            "source": self.source,
            "system_description": f"{self.repository}@{self.commit[:12]}:{self.system_path}",
        }


@cache
def published_rows() -> tuple[PublishedRow, ...]:
    """Every published row, by core, benchmark, round and board."""
    text = resources.files("aidge_deploy.mlperf").joinpath("data", DATA).read_text("utf-8")
    doc = json.loads(text)
    return tuple(
        PublishedRow(
            round=r["round"],
            submitter=r["submitter"],
            system=r["system"],
            board=r["board"],
            processor=r["processor"],
            core=r["core"],
            clock_hz=float(r["clock_hz"]),
            engine=r["engine"],
            engine_version=r["engine_version"],
            benchmark=TinyModel(r["benchmark"]),
            dtype=r["dtype"],
            latency_s=float(r["latency_s"]),
            repository=r["source"]["repository"],
            commit=r["source"]["commit"],
            result_path=r["source"]["result"],
            system_path=r["source"]["system"],
        )
        for r in doc["rows"]
    )


def select_rows(core: str | None = None, model: str | None = None) -> list[PublishedRow]:
    """The rows of ``core`` (cortex-m4, or m4) and ``model`` (kws, ic, vww, ad)."""
    want_core = None if core is None else _core_name(core)
    want_model = None if model is None else TinyModel(model.lower())
    return [
        r
        for r in published_rows()
        if (want_core is None or r.core == want_core)
        and (want_model is None or r.benchmark is want_model)
    ]


def _core_name(core: str) -> str:
    core = core.lower().strip()
    return core if core.startswith("cortex-") else f"cortex-{core}"


def cores() -> list[str]:
    return sorted({r.core for r in published_rows()}, key=lambda c: (len(c), c))


def fastest_per_engine(rows: list[PublishedRow]) -> list[PublishedRow]:
    """The fastest row of each engine (by cycles, so boards at other clocks compare), fastest
    first."""
    best: dict[str, PublishedRow] = {}
    for row in rows:
        if row.engine not in best or row.cycles < best[row.engine].cycles:
            best[row.engine] = row
    return sorted(best.values(), key=lambda r: r.cycles)


@dataclass(frozen=True)
class BesidePublished:
    """An estimate of one model on one core, beside a published row of the same core."""

    row: PublishedRow
    cycles: float
    macs: int

    @property
    def cycles_per_mac(self) -> float:
        return self.cycles / self.macs

    @property
    def ratio(self) -> float:
        """The estimate's cycles / the published row's (2.0: twice as many cycles)."""
        return self.cycles / self.row.cycles


def beside_published(
    model: TinyModel, core: str, cycles: float, dtype: str
) -> list[BesidePublished]:
    """``cycles`` of ``model`` on ``core`` beside the fastest published row of each engine
    for the same core and model (rows of the other dtype left out; rows that do not state
    theirs kept, and shown as such)."""
    rows = [r for r in select_rows(core, model.value) if r.dtype in (dtype, None)]
    macs = MODELS[model].macs
    return [BesidePublished(r, cycles, macs) for r in fastest_per_engine(rows)]


def identify_model(macs: int | None, params: int | None = None) -> TinyModel | None:
    """The reference model with these counts (within 1 %), if any: a model of the
    published shape, trained or random."""
    if not macs:
        return None
    for spec in MODELS.values():
        if abs(macs - spec.macs) <= 0.01 * spec.macs and (
            params is None or abs(params - spec.params) <= 0.01 * spec.params
        ):
            return spec.name
    return None


__all__ = [
    "BesidePublished",
    "PublishedRow",
    "beside_published",
    "cores",
    "fastest_per_engine",
    "identify_model",
    "published_rows",
    "select_rows",
]
