"""The launcher that makes a child process die with the process that started it.

An emulator started for a run must not outlive it, even when the host process is SIGKILLed
and none of its cleanup runs. Linux has the parent-death signal for that, but Python's
``subprocess`` can only set it by forking the whole interpreter (a ``preexec_fn`` turns
off vfork); so the child is started through ``child_exec`` (``native/child_exec.c``, built
once into the tool cache like the QEMU plugin), which arms the signal, checks that its
parent is still there and execs the program. It can also turn off transparent huge pages
for the program (kept across exec), which a short QEMU run pays for at start-up.

Where no C compiler is found (or the build fails) ``setpriv --pdeathsig KILL`` from
util-linux does the first part; without either, the child runs without the signal and
only the run's own cleanup stops it.

The "parent" is the *thread* that started the child (Linux sends the signal when that
thread ends), so a child must be started by the thread that waits for it.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from importlib import resources
from pathlib import Path

from aidge_deploy.errors import DeployError
from aidge_deploy.toolcache import compile_cached, find_c_compiler

_log = logging.getLogger(__name__)


@functools.cache
def _source() -> Path:
    return Path(str(resources.files("aidge_deploy.connections").joinpath("native", "child_exec.c")))


def child_exec_path(compiler: str | None = None) -> Path:
    """The built launcher, compiling it first if this source version is not cached."""
    cc = find_c_compiler(compiler, purpose="the child_exec launcher")
    return compile_cached("child_exec", (_source(),), cc, ("-O2", "-Wall"))


def child_exec_prefix(*, no_thp: bool = False) -> tuple[str, ...]:
    """The argv prefix that runs a program as a child that dies with this process.

    ``no_thp``: the program runs without transparent huge pages (only through
    ``child_exec``; ``setpriv`` cannot). Empty when neither launcher is available.
    """
    try:
        launcher = child_exec_path()
    except (DeployError, OSError) as exc:
        setpriv = shutil.which("setpriv")
        _log.debug("child_exec unavailable (%s); using %s", exc, setpriv or "nothing")
        return (setpriv, "--pdeathsig", "KILL") if setpriv else ()
    return (str(launcher), str(os.getpid()), *(("--no-thp",) if no_thp else ()), "--")
