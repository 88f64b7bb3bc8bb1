"""The plugin's report folder: one folder per pytest session, and an index of its runs.

Why this module exists: a CI job re-runs its tests into the same ``--aidge-report-dir``,
and a developer points ``--aidge-baseline`` at an earlier one. Each session therefore
writes its bundles into a folder of its own, ``<report dir>/<UTC time>-<id>/<test
module>/<test>/<run>/``, never over an earlier session's, and lists its runs in
``runs-<worker>.json`` there: each run's identity (what it measured, see
``history.identity``), bundle, test and whether its regression gate accepted it. The
session's ``metrics.om`` is written both there and, replacing the previous one, at the
report folder's top (what a dashboard scrapes).

``load_baselines`` reads every session index under a folder into an in-memory results
history, so a baseline folder is searched by identity exactly as a history database is.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.errors import ConfigError
from aidge_deploy.history.identity import RunIdentity

INDEX_SCHEMA = "aidge-deploy/pytest-runs"
INDEX_GLOB = "runs-*.json"


def new_session_name() -> str:
    """``20250102-100000-3fa9c1``: sorts by time, unique across parallel CI jobs."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class IndexedRun:
    """One run of a session, as its index lists it."""

    identity: RunIdentity
    test: str
    bundle: Path
    accepted: bool = True

    def as_dict(self, root: Path) -> dict[str, Any]:
        return {
            "identity": self.identity.as_dict(),
            "test": self.test,
            "bundle": os.path.relpath(self.bundle, root),
            "accepted": self.accepted,
        }


def write_index(session_dir: Path, worker: str, runs: Sequence[IndexedRun]) -> Path | None:
    """Write (atomically) the index of this worker's runs; None when it has none."""
    if not runs:
        return None
    session_dir.mkdir(parents=True, exist_ok=True)
    path = session_dir / f"runs-{worker}.json"
    doc = {
        "schema": INDEX_SCHEMA,
        "schema_version": 1,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [r.as_dict(session_dir) for r in runs],
    }
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_indexes(folder: Path, *, exclude: Path | None = None) -> list[tuple[Path, IndexedRun]]:
    """Every indexed run under ``folder`` (a report folder or one session's), oldest session
    first; runs of the session folder ``exclude`` are left out."""
    found: list[tuple[Path, IndexedRun]] = []
    skip = None if exclude is None else exclude.absolute()
    for index in sorted(Path(folder).rglob(INDEX_GLOB), key=lambda p: (p.parent.name, p.name)):
        if skip is not None and index.parent.absolute() == skip:
            continue
        try:
            doc = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or doc.get("schema") != INDEX_SCHEMA:
            continue
        for run in doc.get("runs") or []:
            found.append(
                (
                    index.parent,
                    IndexedRun(
                        RunIdentity.from_dict(run["identity"]),
                        str(run.get("test") or ""),
                        index.parent / str(run["bundle"]),
                        bool(run.get("accepted", True)),
                    ),
                )
            )
    return found


def load_baselines(folder: Path, *, exclude: Path | None = None) -> Any:
    """An in-memory ``HistoryStore`` of the indexed runs under ``folder`` (see the module
    docstring)."""
    from aidge_deploy.history.store import HistoryStore

    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(
            f"--aidge-baseline {folder} is not a folder",
            hint="Pass an earlier --aidge-report-dir (or one session folder of it).",
        )
    store = HistoryStore("sqlite://")
    for _, run in read_indexes(folder, exclude=exclude):
        if (run.bundle / "manifest.json").is_file():
            store.record(
                run.bundle, run.identity, source="baseline", accepted=run.accepted,
                vcs=_no_vcs(),
            )  # fmt: skip
    return store


def _no_vcs() -> Any:
    from aidge_deploy.history.vcs import VcsInfo

    return VcsInfo()
