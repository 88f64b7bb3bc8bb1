"""Where the traceback of a bug goes: a log file that outlives the terminal.

A user error is explained by its message and hint; a bug (``InternalError``, or any
exception a stage did not expect) is only useful to whoever fixes it with its traceback. The
command line prints no traceback without ``-v``, so it is written here, one file per bug under
``<cache>/internal-errors/``, and the error's ``log_path`` names the file to attach to the
report.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

from aidge_deploy.cachedir import default_cache_root

#: the folder of the kept tracebacks, under the cache root
FOLDER = "internal-errors"

#: every traceback this process kept, in order: a supervisor (the test suite) checks from it
#: that a user's mistake never ended as a bug
KEPT: list[Path] = []


def internal_errors_dir() -> Path:
    return default_cache_root() / FOLDER


def keep_traceback(exc: BaseException, context: str = "") -> Path | None:
    """Write ``exc``'s traceback (its causes included) to a new file; its path, or None when
    the file could not be written (a full disk must not hide the error itself)."""
    folder = internal_errors_dir()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = folder / f"{stamp}-{os.getpid()}-{id(exc):x}.log"
    text = "".join(traceback.format_exception(exc))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{context}\n\n{text}" if context else text, encoding="utf-8")
    except OSError:
        return None
    KEPT.append(path)
    return path


__all__ = ["FOLDER", "KEPT", "internal_errors_dir", "keep_traceback"]
