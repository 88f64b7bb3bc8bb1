"""What a recorded result is *of*, and what makes two results comparable.

A result's **identity** is what its user measures: a test (its node id without the target
parameter) or a name the user gives, the target (a lab board also by its name), and the
kind of run — the export's application (benchmark, output, ...), its dtype and its timed
iterations. Results of one identity form a series; a changed model (a wider layer,
retrained weights) keeps its identity, which is the point: it is compared with what came
before.

**Comparability** is what decides whether two results of an identity may be compared at
all: the provenance of their figures (host-measured vs emulated), the Aidge version that
exported them and the versions of the compilers and emulator that built and ran them. A
difference there is said ("not comparable: toolchain arm-none-eabi-gcc 12.2.1 → 13.3.0"),
never compared through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aidge_deploy.errors import ConfigError

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
#: tools whose version only drives a build (a new cmake compiles the same code the same
#: way): reported, never a reason to refuse a comparison
_BUILD_DRIVERS = frozenset({"cmake", "make"})
_VERSION = re.compile(r"(?:^|[\s(])v?(\d+\.\d+(?:\.\d+)*)")


def dtype_of(c_type: str | None) -> str:
    """``int8_t`` -> ``int8``, ``float`` -> ``float32`` (unknown types kept as they are)."""
    text = str(c_type or "").strip()
    return _DTYPES.get(text, text or "unknown")


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

    def differences(self, other: RunIdentity) -> list[str]:
        """How ``other`` (a later run of the same test and target) differs in its kind."""
        out = []
        for label, mine, theirs in (
            ("kind", self.kind, other.kind),
            ("dtype", self.dtype, other.dtype),
            ("iterations", self.iterations, other.iterations),
        ):
            if mine != theirs:
                out.append(f"{label} {mine} → {theirs}")
        return out


def _version(line: str | None) -> str | None:
    """``arm-none-eabi-gcc (15:12.2.rel1-1) 12.2.1 20221205`` -> ``12.2.1``."""
    if not line:
        return None
    found = _VERSION.findall(line)
    return found[0] if found else line


@dataclass(frozen=True)
class Comparability:
    """The facts of a result that decide whether it may be compared with another."""

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

    @property
    def times_from(self) -> str | None:
        if self.time_model is None and self.provenance == "emulated":
            return "CPI = 1"
        return self.time_model

    def blocking_differences(self, later: Comparability) -> list[str]:
        """Why ``later`` cannot be compared with this result (empty: it can).

        Provenance, the Aidge version and the compilers' and emulator's versions block;
        the model (that is what changed), the build drivers and our own version do not.
        """
        out = []
        if self.provenance != later.provenance:
            out.append(f"provenance {self.provenance} → {later.provenance}")
        if self.aidge_version != later.aidge_version:
            out.append(f"Aidge {self.aidge_version} → {later.aidge_version}")
        if self.times_from != later.times_from:  # a timing model's time against CPI = 1
            out.append(f"time model {self.times_from} → {later.times_from}")
        for tool in sorted(set(self.toolchain) | set(later.toolchain)):
            if tool in _BUILD_DRIVERS:
                continue
            before, after = _version(self.toolchain.get(tool)), _version(later.toolchain.get(tool))
            if before != after:
                out.append(f"toolchain {tool} {before} → {after}")
        return out

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


def bundle_facts(bundle: Path) -> BundleFacts:
    """Read identity and comparability facts from a result bundle's JSON files."""
    from aidge_deploy.report.bundle import METADATA_NAME, SUMMARY_NAME
    from aidge_deploy.report.manifest import MANIFEST_NAME

    try:
        manifest = json.loads((bundle / MANIFEST_NAME).read_text(encoding="utf-8"))
        metadata = json.loads((bundle / METADATA_NAME).read_text(encoding="utf-8"))
        summary = json.loads((bundle / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{bundle} is not a readable result bundle: {exc}",
            hint="Pass the folder of a result bundle (it holds manifest.json).",
        ) from None
    comp = manifest.get("comparability") or {}
    export = metadata.get("export", {}).get("manifest", {})
    app = export.get("application_config") or {}
    kind = str(export.get("application") or app.get("kind") or "benchmark")
    inputs = export.get("inputs") or []
    iterations = app.get("nb_iterations") if kind == "benchmark" else None
    return BundleFacts(
        path=bundle,
        run_id=str(manifest.get("run_id") or ""),
        timestamp=str(summary.get("timestamp") or manifest.get("created") or ""),
        target=str(comp.get("target") or summary.get("target") or ""),
        kind=kind,
        dtype=dtype_of(inputs[0].get("dtype") if inputs else None),
        iterations=None if iterations is None else int(iterations),
        comparability=Comparability.from_dict(
            {
                **comp,
                "provenance": comp.get("provenance") or summary.get("provenance"),
                # the bundle manifest's names for two of the facts
                "aidge_version": comp.get("aidge_core"),
                "aidge_deploy_version": comp.get("aidge_deploy"),
            }
        ),
    )
