"""What a recorded result is *of*, and the facts that decide what it may be compared with.

A result's **identity** is what its user measures: a test (its path in the project and its
name, without the target parameter) or a name the user gives, the target, and the kind of
run — the export's application (benchmark, output, ...), its dtype and its timed
iterations. Results of one identity form a series; a changed model (a wider layer,
retrained weights) keeps its identity, which is the point: it is compared with what came
before. The lab board that ran it is a fact of the run, not of its identity, unless the
user keeps each board of a target apart (``board`` set).

**Comparability** holds the other facts of a result (provenance, versions, toolchain, time
model, ...). What a difference in any of them does — refuse the comparison, leave out one
instrument's figures, or only be named — is the one table of ``aidge_deploy.comparability``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aidge_deploy import comparability as table
from aidge_deploy.comparability import Difference, Effect, dtype_of
from aidge_deploy.errors import ConfigError

__all__ = ["BundleFacts", "Comparability", "RunIdentity", "bundle_facts", "dtype_of"]


@dataclass(frozen=True, order=True)
class RunIdentity:
    """What a result measures (see the module docstring)."""

    name: str
    target: str
    board: str | None = None
    kind: str = "benchmark"
    dtype: str = "float32"
    #: timed inferences of a benchmark export (None for an output run)
    iterations: int | None = None

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ConfigError("a run identity needs a name", hint="Name the test or the run.")
        if not self.target.strip():
            raise ConfigError("a run identity needs a target")

    @property
    def key(self) -> str:
        """One string per identity (a database column, a chart's id)."""
        return "|".join(
            (
                self.name,
                self.target,
                self.board or "",
                self.kind,
                self.dtype,
                "" if self.iterations is None else str(self.iterations),
            )
        )

    @property
    def where(self) -> str:
        """``mps2-an386`` or ``stm32h7a3 (board nucleo-1)``."""
        return self.target + (f" (board {self.board})" if self.board else "")

    def describe(self) -> str:
        runs = f" × {self.iterations}" if self.iterations is not None else ""
        return f"{self.name} on {self.where}, {self.kind} {self.dtype}{runs}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "board": self.board,
            "kind": self.kind,
            "dtype": self.dtype,
            "iterations": self.iterations,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RunIdentity:
        iterations = doc.get("iterations")
        return cls(
            str(doc["name"]),
            str(doc["target"]),
            doc.get("board") or None,
            str(doc.get("kind") or "benchmark"),
            str(doc.get("dtype") or "float32"),
            None if iterations is None else int(iterations),
        )

    def facts(self) -> dict[str, Any]:
        """The identity's dimensions of the comparability table."""
        return {
            "target": self.target,
            "kind": self.kind,
            "dtype": self.dtype,
            "iterations": self.iterations,
        }

    def differences(self, other: RunIdentity) -> list[str]:
        """How ``other`` (a later run of the same test) differs in its identity (with the
        board when either keeps its boards apart)."""
        diffs = table.differences(self.facts(), other.facts())
        out = [d.describe() for d in diffs]
        if (self.board or other.board) and self.board != other.board:
            out.append(f"lab board {self.board or 'none'} → {other.board or 'none'}")
        return out


#: facts recorded only since the table knew them: a record without one does not differ in it
_LATER_FACTS = ("aggregation", "io_signature")


@dataclass(frozen=True)
class Comparability:
    """The facts of a result, besides its identity, that the comparability table judges."""

    provenance: str
    aidge_version: str | None = None
    #: tool -> its ``--version`` line, for the tools that built and ran the program
    toolchain: Mapping[str, str | None] = field(default_factory=dict)
    aidge_deploy_version: str | None = None
    backend: str | None = None
    protocol: str | None = None
    model_hash: str | None = None
    export_hash: str | None = None
    power_source: str | None = None
    #: what an emulated board's times are estimated with: its core's timing model, or
    #: "CPI = 1" (``--timing cpi1``, and every run from before the models)
    time_model: str | None = None
    #: the lab (or farm) board that ran it, by its name; None: no board of a lab
    board: str | None = None
    aggregation: str | None = None
    io_signature: str | None = None

    @property
    def times_from(self) -> str | None:
        return table.times_from(self.time_model, self.provenance)

    def facts(self) -> dict[str, Any]:
        """These facts under the table's dimension names."""
        out: dict[str, Any] = {
            "provenance": self.provenance,
            "aidge_core": self.aidge_version,
            "toolchain": dict(self.toolchain),
            "aidge_deploy": self.aidge_deploy_version,
            "backend": self.backend,
            "protocol": self.protocol,
            "model_hash": self.model_hash,
            "export_hash": self.export_hash,
            "power_source": self.power_source,
            "time_model": self.time_model,
            "board": self.board,
        }
        for name in _LATER_FACTS:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    def differences(self, later: Comparability) -> tuple[Difference, ...]:
        """Every fact in which ``later`` differs from this result (the table's order)."""
        mine, theirs = self.facts(), later.facts()
        diffs = table.differences(mine, theirs)
        return tuple(
            d for d in diffs if d.name not in _LATER_FACTS or (d.name in mine and d.name in theirs)
        )

    def blocking_differences(self, later: Comparability) -> list[str]:
        """Why ``later`` cannot be compared with this result at all (empty: it can)."""
        return [d.describe() for d in self.differences(later) if d.effect is Effect.BLOCKING]

    def as_dict(self) -> dict[str, Any]:
        return {
            "provenance": self.provenance,
            "aidge_version": self.aidge_version,
            "toolchain": dict(self.toolchain),
            "aidge_deploy_version": self.aidge_deploy_version,
            "backend": self.backend,
            "protocol": self.protocol,
            "model_hash": self.model_hash,
            "export_hash": self.export_hash,
            "power_source": self.power_source,
            "time_model": self.time_model,
            "board": self.board,
            "aggregation": self.aggregation,
            "io_signature": self.io_signature,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Comparability:
        return cls(
            provenance=str(doc.get("provenance") or ""),
            aidge_version=doc.get("aidge_version"),
            toolchain=dict(doc.get("toolchain") or {}),
            aidge_deploy_version=doc.get("aidge_deploy_version"),
            backend=doc.get("backend"),
            protocol=doc.get("protocol"),
            model_hash=doc.get("model_hash"),
            export_hash=doc.get("export_hash"),
            power_source=doc.get("power_source"),
            time_model=doc.get("time_model"),
            board=doc.get("board") or None,
            aggregation=doc.get("aggregation"),
            io_signature=doc.get("io_signature"),
        )


@dataclass(frozen=True)
class BundleFacts:
    """What a result bundle says about the run it holds (read without verifying it)."""

    path: Path
    run_id: str
    timestamp: str
    target: str
    kind: str
    dtype: str
    iterations: int | None
    comparability: Comparability

    def identity(self, name: str, board: str | None = None) -> RunIdentity:
        return RunIdentity(name, self.target, board, self.kind, self.dtype, self.iterations)


def bundle_facts(bundle: Path, *, board: str | None = None) -> BundleFacts:
    """Identity and comparability facts of a result bundle, of any version this tool reads
    (``report.reader``; the files are not checked against the manifest). ``board``: the lab
    board that ran it, which the bundle does not know by that name."""
    from aidge_deploy.report.reader import read_bundle

    read = read_bundle(Path(bundle), verify=False)
    comp = read.comparability
    facts = read.table_facts()
    return BundleFacts(
        path=Path(bundle),
        run_id=read.summary.run_id,
        timestamp=read.summary.timestamp,
        target=facts["target"],
        kind=facts["kind"],
        dtype=facts["dtype"],
        iterations=facts["iterations"],
        comparability=Comparability.from_dict(
            {
                **comp,
                "provenance": facts["provenance"],
                # the bundle manifest's names for two of the facts
                "aidge_version": comp.get("aidge_core"),
                "aidge_deploy_version": comp.get("aidge_deploy"),
                "board": board,
            }
        ),
    )
