"""The plugin's report folder: one folder per pytest session, and an index of its runs.

Why this module exists: a CI job re-runs its tests into the same ``--aidge-report-dir``,
and a developer points ``--aidge-baseline`` at an earlier one. Each session therefore
writes its bundles into a folder of its own, ``<report dir>/<UTC time>-<id>/<test
module>/<test>/<run>/``, never over an earlier session's, and lists its runs in
``runs-<worker>.json`` there: each run's identity (what it measured, see
``history.identity``), the lab board that ran it, its bundle, test and time, whether its
regression gate accepted it, and the session's commit. The session's ``metrics.om`` is
written both there and, replacing the previous one, at the report folder's top (what a
dashboard scrapes).

``load_baselines`` reads every session index under a folder — at any depth: a report
folder, one session of it, or a folder holding several report folders — into an in-memory
results history, in the order the runs were recorded. A baseline folder is then searched
exactly as a history database is: the newest comparable accepted run of the identity.
"""

from __future__ import annotations

import calendar
import dataclasses
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
from aidge_deploy.history.vcs import VcsInfo

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
    #: the lab board that ran it (a fact of the run; in ``identity`` only per-board series)
    board: str | None = None
    #: when it was recorded (UNIX seconds): orders the runs of the sessions of a folder
    recorded_at: float | None = None

    def as_dict(self, root: Path) -> dict[str, Any]:
        return {
            "identity": self.identity.as_dict(),
            "test": self.test,
            "bundle": os.path.relpath(self.bundle, root),
            "accepted": self.accepted,
            "board": self.board,
            "recorded_at": self.recorded_at,
        }


def write_index(
    session_dir: Path, worker: str, runs: Sequence[IndexedRun], vcs: VcsInfo | None = None
) -> Path | None:
    """Write (atomically) the index of this worker's runs, with the project's commit;
    None when it has none."""
    if not runs:
        return None
    session_dir.mkdir(parents=True, exist_ok=True)
    path = session_dir / f"runs-{worker}.json"
    doc = {
        "schema": INDEX_SCHEMA,
        "schema_version": 1,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "vcs": dataclasses.asdict(vcs or VcsInfo()),
        "runs": [r.as_dict(session_dir) for r in runs],
    }
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class FoundRun:
    """An indexed run found under a baseline folder, with its session's commit."""

    session: Path
    run: IndexedRun
    vcs: VcsInfo
    #: when it was recorded (the index's time for runs indexed before runs carried theirs)
    recorded_at: float


def _written(doc: dict[str, Any], index: Path) -> float:
    try:
        return calendar.timegm(time.strptime(str(doc.get("written")), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return index.stat().st_mtime


def _vcs(doc: Any) -> VcsInfo:
    if not isinstance(doc, dict):
        return VcsInfo()
    known = {f.name for f in dataclasses.fields(VcsInfo)}
    return VcsInfo(**{k: v for k, v in doc.items() if k in known})


def read_indexes(folder: Path, *, exclude: Path | None = None) -> list[FoundRun]:
    """Every indexed run under ``folder`` (a report folder, one session's, or a folder of
    report folders: at any depth), oldest first; runs of the session folder ``exclude``
    are left out."""
    found: list[FoundRun] = []
    skip = None if exclude is None else exclude.absolute()
    for index in sorted(Path(folder).rglob(INDEX_GLOB)):
        if skip is not None and index.parent.absolute() == skip:
            continue
        try:
            doc = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or doc.get("schema") != INDEX_SCHEMA:
            continue
        written, vcs = _written(doc, index), _vcs(doc.get("vcs"))
        for run in doc.get("runs") or []:
            recorded = run.get("recorded_at")
            indexed = IndexedRun(
                RunIdentity.from_dict(run["identity"]),
                str(run.get("test") or ""),
                index.parent / str(run["bundle"]),
                bool(run.get("accepted", True)),
                run.get("board") or run["identity"].get("board") or None,
                None if recorded is None else float(recorded),
            )
            when = written if indexed.recorded_at is None else indexed.recorded_at
            found.append(FoundRun(index.parent, indexed, vcs, when))
    found.sort(key=lambda f: (f.recorded_at, f.session.name))
    return found


def load_baselines(folder: Path, *, exclude: Path | None = None) -> Any:
    """An in-memory ``HistoryStore`` of the indexed runs under ``folder``, recorded in the
    order they ran (the newest last), with their commits (see the module docstring)."""
    from aidge_deploy.history.gate import BASELINE_SOURCE
    from aidge_deploy.history.identity import bundle_facts
    from aidge_deploy.history.store import HistoryStore, bundle_figures
    from aidge_deploy.report.destination import is_bundle

    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(
            f"--aidge-baseline {folder} is not a folder",
            hint="Pass an earlier --aidge-report-dir (or one session folder of it).",
        )
    store = HistoryStore("sqlite://")
    for found in read_indexes(folder, exclude=exclude):
        run = found.run
        if not is_bundle(run.bundle):
            continue
        facts = bundle_facts(run.bundle, board=run.board)
        store.add(
            run.identity,
            bundle_figures(run.bundle),
            facts.comparability,
            source=BASELINE_SOURCE,
            vcs=found.vcs,
            accepted=run.accepted,
            bundle=run.bundle.absolute(),
            bundle_run_id=facts.run_id,
            recorded_at=found.recorded_at,
        )
    return store
