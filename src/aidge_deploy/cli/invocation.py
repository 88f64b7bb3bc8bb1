"""The global options of one ``aidge-deploy`` invocation (``-v``), for the commands to read.

The top-level callback (``main``) sets them; a command module reads them here rather than
from ``main``, which imports every command module (a cycle otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Invocation:
    #: ``-v``: debug logs, and tracebacks with the errors
    verbose: bool = False


#: this process's invocation
INVOCATION = Invocation()

__all__ = ["INVOCATION", "Invocation"]
