"""Views over the registries for ``aidge-deploy targets`` and ``doctor``.

Hardware facts are read from the ``aidge_core.hw_model`` objects attached to the deploy
targets; nothing is re-declared here.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Any

from aidge_deploy.modelexport import load_plugins
from aidge_deploy.registry import ToolCheck, registered_targets


@dataclass(frozen=True)
class TargetRow:
    target: str
    backend: str
    kind: str
    cpu: str
    clock: str
    memories: str
    build_system: str
    description: str


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _hardware_facts(hw: Any) -> tuple[str, str, str, str, str]:
    pe = getattr(hw, "main_pe", None)
    cpu = type(pe).__name__ if pe is not None else "-"
    arch = getattr(pe, "arch", None) or getattr(hw, "arch", None)
    if arch:
        cpu = f"{cpu} ({arch})"
    freq = getattr(pe, "frequency_hz", None)
    clock = f"{freq / 1e6:g} MHz" if freq else "-"
    try:
        mems = dict(getattr(hw, "memories", {}) or {})
    except Exception:
        mems = {}
    memories = (
        ", ".join(
            f"{name} {_fmt_bytes(getattr(m, 'capacity', 0) or 0)}" for name, m in mems.items()
        )
        or "-"
    )
    build_system = getattr(hw, "build_system", None)
    build = getattr(build_system, "name", str(build_system or "-"))
    kind = "mcu" if getattr(hw, "hal_board", None) is not None else "linux"
    return kind, cpu, clock, memories, str(build).lower()


def target_rows() -> list[TargetRow]:
    load_plugins()
    rows = []
    for (target, backend), cls in registered_targets().items():
        try:
            hw = cls.hardware_target_class()
            kind, cpu, clock, memories, build = _hardware_facts(hw)
        except Exception as exc:  # a hardware class that needs arguments
            kind, cpu, clock, memories, build = "?", f"({type(exc).__name__})", "-", "-", "-"
        if getattr(cls, "emulated", False):
            kind = "emulated mcu"
        rows.append(TargetRow(target, backend, kind, cpu, clock, memories, build, cls.description))
    return rows


@dataclass(frozen=True)
class DoctorSection:
    title: str
    checks: tuple[ToolCheck, ...]


def _package_check(name: str) -> ToolCheck:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ToolCheck(name, False, "not installed", f"pip install {name}")
    return ToolCheck(name, True, version)


def doctor_report() -> list[DoctorSection]:
    """What each registered target needs on this machine, and how to install what is missing."""
    load_plugins()
    sections = [
        DoctorSection(
            "Python packages",
            tuple(
                _package_check(p)
                for p in (
                    "aidge-core",
                    "aidge-onnx",
                    "aidge-backend-cpu",
                    "aidge-export-cpp",
                    "aidge-export-arm-cortexm",
                    "aidge-quantization",
                )
            ),
        )
    ]
    seen: dict[str, list[str]] = {}
    checks_by_key: dict[str, tuple[ToolCheck, ...]] = {}
    for (target, backend), cls in registered_targets().items():
        try:
            checks = tuple(cls(None).preflight())
        except Exception as exc:
            checks = (ToolCheck(f"{target}/{backend}", False, f"preflight failed: {exc}"),)
        key = "|".join(f"{c.name}:{c.ok}" for c in checks) + cls.__qualname__
        seen.setdefault(key, []).append(f"{target}/{backend}")
        checks_by_key[key] = checks
    for key, names in seen.items():
        if checks_by_key[key]:
            title = (
                ", ".join(names)
                if len(names) <= 4
                else f"{', '.join(names[:3])} and {len(names) - 3} more"
            )
            sections.append(DoctorSection(title, checks_by_key[key]))
    return sections
