"""What an extension needs on this machine, checked one way for ``doctor`` and for Preflight.

Every registered thing (a target and its variants, a flasher, a power monitor, a counter
source) says what it needs as ``ToolCheck``s: a program on PATH, a Python module, a file. The
same checks fill ``doctor``'s readiness table and stop a run in Preflight, and both say it
with ``missing_text``: a run fails with the words ``doctor`` printed. What only a run can
provide (a board's address, a probe plugged in) is listed beside, as what the run needs.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass

from aidge_deploy.pathsearch import which


@dataclass(frozen=True)
class ToolCheck:
    """One thing needed on this machine, whether it is here, and how to get it if not."""

    name: str
    ok: bool
    detail: str
    hint: str | None = None


def apt_hint(packages: str) -> str:
    return f"apt-get install --no-install-recommends {packages}"


def program_check(program: str, how: str) -> ToolCheck:
    """``program`` on PATH (its path), else "not found" and ``how`` to get it."""
    path = which(program)
    return ToolCheck(program, path is not None, path or "not found", None if path else how)


def apt_program_check(program: str, packages: str) -> ToolCheck:
    """``program_check`` for a program a Debian package provides."""
    return program_check(program, apt_hint(packages))


def module_check(module: str, how: str) -> ToolCheck:
    """The Python module ``module`` importable here (not imported), else ``how``."""
    found = importlib.util.find_spec(module) is not None
    return ToolCheck(
        module, found, "installed" if found else "not installed", None if found else how
    )


def missing(checks: Sequence[ToolCheck]) -> list[ToolCheck]:
    return [c for c in checks if not c.ok]


def missing_text(checks: Sequence[ToolCheck]) -> tuple[str, str]:
    """What is missing and how to get it, in the words ``doctor`` and Preflight share:
    ``("riscv64-linux-gnu-g++ (not found)", "apt-get install ...")``."""
    absent = missing(checks)
    what = ", ".join(f"{c.name} ({c.detail})" for c in absent)
    how = "; ".join(dict.fromkeys(c.hint for c in absent if c.hint)) or "Run `aidge-deploy doctor`."
    return what, how


__all__ = [
    "ToolCheck",
    "apt_hint",
    "apt_program_check",
    "missing",
    "missing_text",
    "module_check",
    "program_check",
]
