"""Starting a child process that dies with this one (and runs without huge pages).

An emulator started for a run must not outlive it, even when the host process is SIGKILLed
and none of its cleanup runs. Linux has the parent-death signal for that, but Python's
``subprocess`` can only set it by forking the whole interpreter (a ``preexec_fn`` turns off
vfork), and a launcher exec'd in between (``setpriv``) costs a whole extra exec, ~1 ms of a
~30 ms QEMU start. So a dynamically linked child gets ``native/child_guard.c`` (built once
into the tool cache, like the QEMU plugin) through ``LD_PRELOAD``: its constructor arms
the signal before the child's ``main()``, checks that its parent is still there, turns
transparent huge pages off for it (a short QEMU run pays the kernel for zeroing 2 MB per
region it touches) and takes itself out of ``LD_PRELOAD`` again.

A statically linked program, or a machine with no C compiler, gets
``setpriv --pdeathsig KILL`` (util-linux) instead; without either, only the run's own
cleanup stops the child.

The "parent" is the *thread* that started the child (Linux sends the signal when that
thread ends), so a child must be started by the thread that waits for it.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from aidge_deploy.connections.toolcache import compile_cached, find_c_compiler
from aidge_deploy.errors import DeployError
from aidge_deploy.filememo import Signature, signature
from aidge_deploy.pathsearch import which

_log = logging.getLogger(__name__)

_PT_INTERP = 3


@dataclass(frozen=True)
class GuardedLaunch:
    """How to start a program as a guarded child: an argv prefix and environment changes."""

    prefix: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)

    def argv(self, command: list[str] | tuple[str, ...]) -> list[str]:
        return [*self.prefix, *command]

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the guard's variables."""
        return {**(os.environ if base is None else base), **self.environment}


@functools.cache
def _source() -> Path:
    return Path(
        str(resources.files("aidge_deploy.connections").joinpath("native", "child_guard.c"))
    )


def child_guard_path(compiler: str | None = None) -> Path:
    """The built guard library, compiling it first if this source version is not cached."""
    cc = find_c_compiler(compiler, purpose="the child_guard library")
    return compile_cached(
        "libaidge_child_guard", (_source(),), cc, ("-O2", "-shared", "-fPIC", "-Wall"), suffix=".so"
    )


def guarded_launch(program: str | Path) -> GuardedLaunch:
    """How to start ``program`` so that it dies with this process (and, where the guard
    library is loaded, without transparent huge pages)."""
    path = Path(program) if os.sep in str(program) else Path(which(str(program)) or program)
    if _dynamically_linked(str(path), signature(str(path))):
        try:
            guard = child_guard_path()
        except (DeployError, OSError) as exc:
            _log.debug("child_guard unavailable (%s)", exc)
        else:
            environment = {
                "LD_PRELOAD": f"{guard}:{os.environ['LD_PRELOAD']}"
                if os.environ.get("LD_PRELOAD")
                else str(guard),
                "AIDGE_DEPLOY_LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
                "AIDGE_DEPLOY_PARENT_PID": str(os.getpid()),
            }
            return GuardedLaunch((), environment)
    setpriv = which("setpriv")
    return GuardedLaunch((setpriv, "--pdeathsig", "KILL") if setpriv else ())


@functools.lru_cache(maxsize=16)
def _dynamically_linked(path: str, identity: Signature) -> bool:
    """Whether the ELF at ``path`` names a dynamic loader (a PT_INTERP program header), so
    ``LD_PRELOAD`` reaches it; ``identity`` keys the answer to this version of the file."""
    del identity
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
                return False  # only 64-bit little-endian hosts are looked into
            (phoff,) = struct.unpack_from("<Q", header, 32)
            phentsize, phnum = struct.unpack_from("<HH", header, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    return any(
        struct.unpack_from("<I", table, i * phentsize)[0] == _PT_INTERP
        for i in range(len(table) // phentsize if phentsize else 0)
    )
