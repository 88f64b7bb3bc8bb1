"""The project's own root folder, which names a test's runs the same way on every runner.

A run's identity starts with its test's path relative to the project, so it must not
depend on where the project is checked out (``builds/r1/...``, ``builds/r2/...``), nor
on the options of a run. pytest decides its rootdir before it loads plugins: an option of
this plugin given in space form (``--aidge-history /tmp/h.db``, ``--aidge-baseline base``)
is then taken for a test path, and the rootdir (so every node id, and the folder whose
commit is recorded) moves with it (pytest-dev/pytest#8846). The project root is therefore
decided again here, as pytest decides it (its own ``determine_setup``: ini file, ``--rootdir``,
``-c``) but from the test paths of the command line alone — the values of this plugin's
options taken out. The controller decides it once and hands it to xdist workers.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest


def project_root(config: pytest.Config) -> Path:
    """The rootdir pytest chooses for this project from its test paths (see the module
    docstring); pytest's own rootdir when its rules cannot be asked again."""
    from _pytest.config.findpaths import determine_setup

    wanted: dict[str, Any] = {
        "inifile": config.option.inifilename,
        "override_ini": config.option.override_ini,
        # the test paths as parsed with every option known (an option's value is no path)
        "args": [str(a) for a in config.option.file_or_dir or []],
        "rootdir_cmd_arg": config.option.rootdir or None,
        "invocation_dir": config.invocation_params.dir,
    }
    try:
        accepted = inspect.signature(determine_setup).parameters
        found = determine_setup(**{k: v for k, v in wanted.items() if k in accepted})
    except (TypeError, ValueError, OSError):  # another pytest's signature, an odd path
        return Path(config.rootpath)
    return Path(found[0])


def relative_nodeid(item: pytest.Item, root: Path) -> str:
    """``item``'s node id with its file named relative to ``root`` (pytest's node id when
    the file is outside it)."""
    path = getattr(item, "path", None)
    nodeid = item.nodeid
    if path is None:
        return nodeid
    try:
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return nodeid
    _, sep, rest = nodeid.partition("::")
    return f"{rel}{sep}{rest}"
