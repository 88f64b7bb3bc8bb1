"""Run metadata: which tools, packages, target and settings produced a result.

A figure is only reproducible when its context is known: the aidge-deploy and Aidge
package versions, the compiler and emulator that built and ran the program, the hardware
model's facts, the config (without secrets) and how long each stage took.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.hwfacts import clock_fact, memory_facts
from aidge_deploy.ownsources import own_sources_digest

if TYPE_CHECKING:
    from aidge_deploy.registry import DeployTarget
    from aidge_deploy.results import Toolchain

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


#: the emulator that runs an emulated board's firmware (a tool of the run, not of the build)
EMULATOR = "qemu-system-arm"


def toolchain_versions(
    toolchain: Toolchain | None, *, emulated: bool, emulator: str = EMULATOR
) -> dict[str, str | None]:
    """What built the program (and the emulator that ran it: ``emulator``, the run's
    ``QemuOptions.binary``): each program's version, probed here when it ran on this
    machine, else where it ran (its version is not known here)."""
    versions: dict[str, str | None] = {}
    if toolchain is not None:
        for program in toolchain.programs:
            if toolchain.elsewhere is None:
                versions[program] = tool_version(program)
            else:
                versions[program] = f"ran {toolchain.elsewhere} (version not recorded)"
    if emulated:
        version = tool_version(emulator)
        if version is not None and emulator != EMULATOR:
            version = f"{version} ({emulator})"  # a QEMU of the user's, said so
        versions[EMULATOR] = version
    return versions


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
        "memories": [_memory_entry(f) for f in memory_facts(hardware_target)],
    }
    return _on_this_machine(facts) if this_machine else facts


def _memory_entry(fact: Any) -> dict[str, Any]:
    return {
        "name": fact.name,
        "capacity_bytes": fact.value,
        "text": fact.text,
        "source": fact.source,
    }


def _on_this_machine(facts: dict[str, Any]) -> dict[str, Any]:
    """The local host target's facts: its memory is this machine's, not the model's (when
    the operating system says how much)."""
    mine = memory_facts(None, this_machine=True)
    return {**facts, "memories": [_memory_entry(f) for f in mine]} if mine else facts


#: bumped when ``hardware_facts`` changes what it writes: older kept facts are not read
HARDWARE_FACTS_FORMAT = 1


def target_hardware_facts(target: DeployTarget, *, this_machine: bool = False) -> dict[str, Any]:
    """``hardware_facts`` of a target's hardware model, kept on disk once computed.

    They are facts of the installed packages (Aidge's hardware model, or the plug-in that
    registers the target's), yet computing them imports Aidge: more than half of a report
    of a run whose export and build were reused. Kept per target, Aidge and aidge-deploy
    versions and the digest of our own plug-in's sources; read back only while Aidge is not
    imported in this process (once it is, asking the model costs nothing and also sees a
    target registered at run time)."""
    path = _kept_facts_path(target)
    facts: dict[str, Any] | None = None
    if "aidge_core" not in sys.modules:
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(path.read_text(encoding="utf-8"))
            facts = loaded if isinstance(loaded, dict) and loaded.get("class") else None
    if facts is None:
        facts = hardware_facts(target.hardware_target)
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(facts), encoding="utf-8")
            tmp.replace(path)  # whole or absent: parallel runs may write it at once
    return _on_this_machine(facts) if this_machine else facts


def _kept_facts_path(target: DeployTarget) -> Path:
    key = json.dumps(
        [
            HARDWARE_FACTS_FORMAT,
            target.target_name,
            target.hardware_model_module,
            package_versions(("aidge-core", "aidge-deploy")),
            # a plug-in of ours, or the descriptors its hardware model is built from, edited
            # in a source checkout without a version bump
            own_sources_digest(),
        ]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return default_cache_root() / "hardware" / f"{target.target_name}-{digest}.json"


def host_facts() -> dict[str, str]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def stage_durations(durations: Mapping[str, float]) -> dict[str, float]:
    return {str(k): round(float(v), 3) for k, v in durations.items()}
