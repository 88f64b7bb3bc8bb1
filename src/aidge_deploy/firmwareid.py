"""Firmware identity: every program we build says at boot which export it was built from.

A run must measure the program of *its* export. A stale image (an old ELF in a build or
flash cache, a firmware left on a board by another job) or a wrong board would otherwise
be measured and recorded under the export's name. So each build is given the export's
content hash (``artifact.export_hash``, the key of its build cache entry) and the program
prints it once, at boot, before anything else::

    AIDGE_EXPORT_HASH 3f2a9c1d...64 hex digits

How it gets there:

* **make exports** (the emulated boards' own projects, ``aidge_qemu_boards``): ``make build
  AIDGE_EXPORT_HASH=<hash>``; the Makefile writes ``build/aidge_export_hash.h`` (rewritten
  only when the hash changes, so ``main.o`` is rebuilt exactly then) and the generated
  ``main()`` prints it before its banner. Other Makefiles ignore the variable.
* **CMake exports** (the host and Linux-board exports of ``aidge_export_cpp``, whose sources
  are Aidge's): ``-DAIDGE_DEPLOY_EXPORT_HASH=<hash> -DCMAKE_PROJECT_INCLUDE=<firmware_id.cmake>``
  adds one C++ source to every executable of the project, whose static initialiser prints
  the line before ``main()`` runs. The export's own files are untouched. A build on an SSH
  board or in a container writes the script into its build folder there (``remote_build``).

``check_identity`` reads the line from a run's captured output (and takes it out, so
protocol parsers never see it): a different hash fails the run with both hashes
(``FirmwareMismatch``). Firmware that prints no hash — a third-party export, a board whose
firmware is flashed by other means, a build from before this check — keeps working: the run
is measured, and its result carries the notice ``UNVERIFIED`` (said in the CLI's output and
in ``summary.json``'s notices).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from aidge_deploy.errors import ExecutionError

#: what the firmware prints at boot, followed by the hash
PREFIX = "AIDGE_EXPORT_HASH"
#: the make variable and CMake cache variable that carry the hash into the build
MAKE_VARIABLE = PREFIX
CMAKE_VARIABLE = "AIDGE_DEPLOY_EXPORT_HASH"
_LINE = re.compile(rf"^[^\S\n]*{PREFIX} ([0-9a-f]{{64}})[^\S\n]*\r?\n?", re.MULTILINE)
#: the notice of a run whose firmware printed no export hash
UNVERIFIED = (
    "firmware identity unverified: the program printed no export hash at boot (firmware not "
    "built by aidge-deploy, or built before it printed one)"
)


class FirmwareMismatch(ExecutionError):
    """The board ran a program of another export: a stale image or a wrong board."""


@dataclass(frozen=True)
class Identity:
    """What a run's captured output says about the program that produced it."""

    #: the hash the program printed (None: it printed none)
    printed: str | None
    #: the captured output without the identity line
    output: str

    @property
    def verified(self) -> bool:
        return self.printed is not None


def cmake_script() -> Path:
    """The CMake script a build includes after the export's ``project()``."""
    return Path(str(resources.files("aidge_deploy").joinpath("boards/data/firmware_id.cmake")))


def build_arguments(build_system: str, digest: str) -> tuple[str, ...]:
    """What to add to a build's configure (cmake) or make command for ``digest``."""
    if build_system == "cmake":
        return (f"-D{CMAKE_VARIABLE}={digest}", f"-DCMAKE_PROJECT_INCLUDE={cmake_script()}")
    return (f"{MAKE_VARIABLE}={digest}",)


def check_identity(
    output: str, expected: str, *, log_path: Path | None = None, where: str = "the board"
) -> Identity:
    """The program's identity in ``output``; ``FirmwareMismatch`` when it printed the hash
    of another export than ``expected``'s (both hashes in the message)."""
    found = _LINE.findall(output)
    if not found:
        return Identity(None, output)
    printed = found[0]
    if printed != expected or any(h != printed for h in found):
        other = next(h for h in found if h != expected)
        raise FirmwareMismatch(
            f"{where} ran the program of another export: it printed export hash "
            f"{other}, this run's export has {expected}",
            hint="A stale image (an old build or a firmware left on the board) or a wrong "
            "board: rebuild (delete the build folder) or check which board runs the job.",
            log_path=log_path,
        )
    return Identity(printed, _LINE.sub("", output))
