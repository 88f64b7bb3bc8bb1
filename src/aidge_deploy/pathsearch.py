"""Where a program is on PATH, kept for the process while PATH and the program stay.

A warm deploy asked ``shutil.which`` about eight times (the preflight's tools, QEMU, the C
compiler, the build tool); each stats every PATH folder up to the program, ~0.5 ms a run
on a machine where a system call costs microseconds. A program found is kept for its name
and the PATH it was found on, re-checked with one ``access()`` per use; a program not
found is looked up again each time (so installing it mid-process is seen at once), as is
any program once PATH changes. A program installed *earlier* on the same PATH is seen
once the one found goes away, or by a new process.
"""

from __future__ import annotations

import os
import shutil
import threading

_found: dict[tuple[str, str], str] = {}
_lock = threading.Lock()


def which(name: str) -> str | None:
    """``shutil.which(name)``, kept while PATH is the same and the program is executable."""
    path = os.environ.get("PATH", os.defpath)
    key = (name, path)
    with _lock:
        known = _found.get(key)
    if known is not None and os.access(known, os.X_OK):
        return known
    found = shutil.which(name, path=path)
    with _lock:
        if found is None:
            _found.pop(key, None)
        else:
            _found[key] = found
    return found
