"""Run metadata: which tools, packages, target and settings produced a result.

A figure is only reproducible when its context is known: the aidge-deploy and Aidge
package versions, the compiler and emulator that built and ran the program, the hardware
model's facts, the config (without secrets) and how long each stage took.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from aidge_deploy.hwfacts import clock_fact, memory_facts

log = logging.getLogger("aidge_deploy")

#: the packages whose versions define the Aidge side of a result
PACKAGES = (
    "aidge-deploy",
    "aidge-core",
    "aidge-export-cpp",
    "aidge-export-arm-cortexm",
    "aidge-onnx",
    "aidge-backend-cpu",
    "aidge-quantization",
)
#: seconds a ``--version`` query may take before the tool is reported as unresponsive
VERSION_TIMEOUT_S = 10.0


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


@functools.lru_cache(maxsize=32)
def tool_version(tool: str) -> str | None:
    """First non-empty line of ``tool --version``; None when the tool is absent or silent."""
    path = shutil.which(tool)
    if path is None:
        return None
    try:
        proc = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("%s --version failed: %s", tool, exc)
        return None
    for line in (proc.stdout or proc.stderr).splitlines():
        if line.strip():
            return line.strip()
    return None


def relevant_tools(
    build_system: str | None, is_mcu: bool, emulated: bool, cross_compile: bool
) -> tuple[str, ...]:
    """The tools that built or ran this kind of target."""
    tools: list[str] = []
    if build_system == "cmake":
        tools += ["cmake", "c++"]
    if build_system == "make":
        tools.append("make")
    if is_mcu:
        tools.append("arm-none-eabi-gcc")
    if cross_compile:
        tools.append("aarch64-linux-gnu-g++")
    if emulated:
        tools.append("qemu-system-arm")
    return tuple(tools)


def toolchain_versions(tools: Iterable[str]) -> dict[str, str | None]:
    return {tool: tool_version(tool) for tool in tools}


def _enum_text(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "name", value)).lower()


def hardware_facts(hardware_target: Any, *, this_machine: bool = False) -> dict[str, Any]:
    """Name, CPU, clock and memories of an ``aidge_core.hw_model`` device (best effort:
    hardware classes differ in which attributes they define), each memory and the clock in
    the unit it is declared in and with its source (``hwfacts``); ``this_machine`` (the
    local host target) reports this machine's real memory."""
    if hardware_target is None:
        return {}
    pe = getattr(hardware_target, "main_pe", None)
    clock = clock_fact(hardware_target)
    facts: dict[str, Any] = {
        "name": str(getattr(hardware_target, "name", "") or type(hardware_target).__name__),
        "class": type(hardware_target).__name__,
        "cpu": type(pe).__name__ if pe is not None else None,
        "arch": _enum_text(getattr(pe, "arch", None) or getattr(hardware_target, "arch", None)),
        "clock_hz": clock.value,
        "clock": clock.as_dict(),
        "build_system": _enum_text(getattr(hardware_target, "build_system", None)),
        "hal_board": _enum_text(getattr(hardware_target, "hal_board", None)),
        "memories": [],
    }
    for fact in memory_facts(hardware_target, this_machine=this_machine):
        facts["memories"].append(
            {
                "name": fact.name,
                "capacity_bytes": fact.value,
                "text": fact.text,
                "source": fact.source,
            }
        )
    return facts


def host_facts() -> dict[str, str]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def stage_durations(durations: Mapping[str, float]) -> dict[str, float]:
    return {str(k): round(float(v), 3) for k, v in durations.items()}
