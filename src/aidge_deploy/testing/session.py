"""What the pytest plugin does for a test: pick and lock a board, export, deploy, record.

Kept free of pytest so it reads (and is tested) as plain code: ``AidgeSession`` holds the
session's options, the lab, its report folder (``reportdir``), the results history and the
baselines; ``TestRuns`` is one test's runs and the boards it holds until the test ends.
Each run is recorded under its identity (``history.identity``): the test's node id relative
to the project's root without the target parameter (or the name the test gives), the target
(and the lab board only with ``--aidge-board-series``), and the kind, dtype and iterations of
its export; the lab board that ran it is recorded as a fact of the run either way.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.history.identity import RunIdentity
from aidge_deploy.lab import LabBoard, LabError, LabMap, load_lab
from aidge_deploy.results import DeployResult
from aidge_deploy.testing.figures import Figure, headline_figures
from aidge_deploy.testing.locks import BoardLease, lease
from aidge_deploy.testing.reportdir import IndexedRun, load_baselines, write_index

#: ``aidge_run`` options that shape the export of an ONNX model (the ``profile`` options)
EXPORT_OPTIONS: Mapping[str, Any] = {
    "dtype": "float32",
    "iterations": 10,
    "warmup": 2,
    "kind": "benchmark",
    "profiling": True,
    "inputs": None,
}
#: the ``aidge_run`` option naming a run's identity (default: the test's node id)
NAME_OPTION = "name"

_ACTIVE: AidgeSession | None = None


def active_session() -> AidgeSession | None:
    """The plugin's session of this process (None outside a pytest session using it)."""
    return _ACTIVE


def _emulated_targets() -> frozenset[str]:
    try:
        from aidge_qemu_descriptors import list_boards
    except ImportError:  # pragma: no cover - shipped with this package
        return frozenset()
    return frozenset(b.name for b in list_boards())


def _runs_here(target: str) -> bool:
    """Whether ``target`` runs on this machine (its caps: the host process, QEMU)."""
    from aidge_deploy.errors import DeployError
    from aidge_deploy.targetcaps import pair_caps

    try:
        return pair_caps(target, "local").runs_here
    except DeployError:  # no local implementation: a board of its own, or unknown
        return False


def known_targets() -> list[str]:
    """Every target name a run may ask for (the registry's, the emulated boards', host)."""
    from aidge_deploy.registry import registered_targets

    return sorted({t for t, _ in registered_targets()} | _emulated_targets() | {"host"})


def check_target_names(names: Sequence[str], lab: LabMap | None) -> None:
    """``ConfigError`` (with a did-you-mean) for a name that is neither a target nor a board
    of the lab."""
    boards = [b.name for b in lab.boards] if lab is not None else []
    targets = known_targets()
    for name in names:
        if name in boards or name.lower() in targets:
            continue
        close = difflib.get_close_matches(name, [*targets, *boards], n=2, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ConfigError(
            f"--aidge-target {name!r} is neither a target nor a board of the lab",
            hint=f"{hint}Targets: {', '.join(targets)}"
            + (f"; lab boards: {', '.join(boards)}" if boards else "")
            + ".",
        )


@dataclass
class RunRecord:
    """One ``aidge_run`` call of a test, for its report, JUnit properties and metrics file."""

    label: str
    target: str
    board: str | None
    bundle: Path | None = None
    log: Path | None = None
    provenance: str | None = None
    figures: dict[str, Figure] = field(default_factory=dict)
    error: str | None = None
    identity: RunIdentity | None = None
    #: the run's record in the results history (``--aidge-history``)
    history_id: int | None = None
    indexed: IndexedRun | None = None
    result: weakref.ref[DeployResult] | None = None
    #: what its regression gate said, in one line (None: the test asked for none)
    gate: str | None = None


class AidgeSession:
    """The plugin's state for one pytest session (one per xdist worker)."""

    def __init__(
        self,
        *,
        targets: Sequence[str] = (),
        lab_path: Path | None = None,
        report_dir: Path | None = None,
        baseline_dir: Path | None = None,
        history_path: str | Path | None = None,
        thresholds_path: Path | None = None,
        update_baseline: bool = False,
        lock_timeout_s: float = 600.0,
        work_root: Path,
        session_name: str = "session",
        worker: str = "main",
        project_dir: Path | None = None,
        board_series: bool = False,
    ) -> None:
        global _ACTIVE
        self.targets = tuple(targets)
        self.lab_path = lab_path
        self.report_dir = report_dir
        self.baseline_dir = baseline_dir
        self.history_path = history_path
        self.thresholds_path = thresholds_path
        self.update_baseline = update_baseline
        self.lock_timeout_s = lock_timeout_s
        self.work_root = work_root
        self.session_name = session_name
        self.worker = worker
        self.project_dir = project_dir
        #: each lab board of a target is a series of its own (``--aidge-board-series``)
        self.board_series = board_series
        self._lab: LabMap | None = None
        self._exports: dict[tuple[Any, ...], object] = {}
        self._history: Any = None
        self._baselines: Any = None
        self._vcs: Any = None
        self.records: dict[int, RunRecord] = {}
        self.indexed: list[IndexedRun] = []
        _ACTIVE = self

    @property
    def lab(self) -> LabMap | None:
        if self.lab_path is None:
            return None
        if self._lab is None:
            self._lab = load_lab(self.lab_path)
        return self._lab

    @property
    def session_dir(self) -> Path | None:
        """This session's folder of the report folder (None without one)."""
        return None if self.report_dir is None else self.report_dir / self.session_name

    @property
    def bundle_root(self) -> Path:
        return self.session_dir or self.work_root / "bundles"

    @property
    def history(self) -> Any:
        """The results history (``--aidge-history``), opened on first use; None without."""
        if self.history_path is None:
            return None
        if self._history is None:
            from aidge_deploy.history.store import HistoryStore

            self._history = HistoryStore(self.history_path)
        return self._history

    @property
    def vcs(self) -> Any:
        """The project's commit and branch (asked once per session)."""
        if self._vcs is None:
            from aidge_deploy.history.vcs import detect_vcs

            self._vcs = detect_vcs(self.project_dir)
        return self._vcs

    def baselines(self) -> Any:
        """The runs under ``--aidge-baseline`` (this session's own left out), as a history."""
        if self._baselines is None and self.baseline_dir is not None:
            self._baselines = load_baselines(self.baseline_dir, exclude=self.session_dir)
        return self._baselines

    def candidates(self, name: str) -> tuple[str, tuple[LabBoard, ...]]:
        """The target ``name`` stands for, and the lab boards that can run it.

        ``name`` is a lab board's name or a target name. No board is needed for the host and
        the emulated boards; any other target needs a board of the lab. Boards selected by
        name with ``--aidge-target`` are the only ones used for their target.
        """
        lab = self.lab
        if lab is not None:
            if any(b.name == name for b in lab.boards):
                board = lab.board(name)
                return board.target, (board,)
            chosen = tuple(b for b in lab.boards if b.name in self.targets and b.target == name)
            boards = chosen or lab.boards_for(name)
            if boards:
                return name, tuple(boards)
        if _runs_here(name):  # the host, an emulated board: no board to hold
            return name, ()
        if lab is not None:
            raise LabError(
                f"no board of target {name!r} in the lab ({lab.source})",
                hint=f"Boards: {', '.join(f'{b.name} ({b.target})' for b in lab.boards)}.",
            )
        return name, ()

    def export(
        self, model: Path, target: str, options: Mapping[str, Any], config: DeployConfig
    ) -> object:
        """The export of ``model`` for ``target`` (from the export cache, as ``profile``'s),
        after the run's one check (``configcheck.check_run``: counts, model file, inputs,
        config, memory): a refused run exports nothing."""
        from aidge_deploy.configcheck import check_run
        from aidge_deploy.exportcache import export_key, is_cached, prepare_export
        from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest

        try:
            dtype = Dtype(str(options["dtype"]))
            kind = ApplicationKind(str(options["kind"]))
        except ValueError as exc:
            raise ConfigError(
                f"aidge_run: {exc}",
                hint="dtype: float32 or int8; kind: benchmark, output, standalone or validation.",
            ) from None
        counts = {}
        for name in ("iterations", "warmup"):
            value = options[name]
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ConfigError(
                    f"aidge_run: {name} must be a whole number, got {value!r}",
                    hint=f"e.g. {name}={EXPORT_OPTIONS[name]}",
                )
            counts[name] = int(value)
        request = ExportRequest(
            model=model.absolute(),
            target=target,
            out_dir=Path("."),  # decided by the export cache
            dtype=dtype,
            kind=kind,
            nb_iterations=counts["iterations"],
            nb_warmup=counts["warmup"],
            profiling=bool(options["profiling"]),
            inputs=tuple(np.asarray(a) for a in options["inputs"] or ()),
        )
        cached = model.is_file() and is_cached(request)
        _, inputs = check_run(
            config,
            target,
            request=request,
            iterations=request.nb_iterations if kind is ApplicationKind.BENCHMARK else None,
            parse_model=not cached,
        )
        request = dataclasses.replace(request, inputs=inputs)
        key = (export_key(request), target)
        if key not in self._exports:
            self._exports[key] = prepare_export(request).artifact
        return self._exports[key]

    def remember(self, record: RunRecord, result: DeployResult) -> None:
        """Keep ``record`` findable from its result (``assert_no_regression``)."""
        record.result = weakref.ref(result)
        self.records[id(result)] = record

    def record_of(self, result: DeployResult) -> RunRecord | None:
        record = self.records.get(id(result))
        if record is None or record.result is None or record.result() is not result:
            return None
        return record

    def reject(self, record: RunRecord) -> None:
        """``record``'s run failed its regression gate: it is no baseline for later runs."""
        if record.history_id is not None and self.history is not None:
            self.history.set_accepted(record.history_id, False)
        if record.indexed is not None:
            i = self.indexed.index(record.indexed)
            record.indexed = dataclasses.replace(record.indexed, accepted=False)
            self.indexed[i] = record.indexed

    def finish(self) -> None:
        """Write this worker's index of the session's runs; close the history."""
        global _ACTIVE
        session_dir = self.session_dir
        if session_dir is not None:
            write_index(session_dir, self.worker, self.indexed, self.vcs if self.indexed else None)
        for store in (self._history, self._baselines):
            if store is not None:
                store.close()
        if _ACTIVE is self:
            _ACTIVE = None


def safe_name(text: str) -> str:
    """A folder name from a test id (``test_x[host-int8]`` -> ``test_x-host-int8``)."""
    text = re.sub(r"[\[\]]", "-", text).strip("-")
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:120] or "test"


class TestRuns:
    """The runs of one test and the boards it holds until it ends."""

    __test__ = False  # not a test class, whatever pytest's collection thinks of the name

    def __init__(
        self,
        session: AidgeSession,
        test_dir: Path,
        default_target: str | None,
        *,
        test_name: str = "",
        nodeid: str = "",
    ) -> None:
        self.session = session
        self.test_dir = test_dir
        self.default_target = default_target
        self.test_name = test_name or str(test_dir)
        self.nodeid = nodeid or self.test_name
        self.records: list[RunRecord] = []
        self._leases: dict[str, BoardLease] = {}

    def board_for(self, name: str) -> tuple[str, LabBoard | None]:
        """The target and the board (held until ``close``) that a run on ``name`` uses."""
        target, boards = self.session.candidates(name)
        if not boards:
            return target, None
        for held in self._leases.values():
            if held.board in boards:
                return target, held.board
        lease_ = lease(boards, self.session.lock_timeout_s)
        self._leases[lease_.board.name] = lease_
        return target, lease_.board

    def _label(self, name: str) -> str:
        used = {r.label for r in self.records}
        label, n = safe_name(name), 2
        while label in used:
            label, n = f"{safe_name(name)}-{n}", n + 1
        return label

    def _identity_name(self, given: str | None, target: str) -> str:
        """The test's name; a second unnamed run on the same target is ``<test>#2``."""
        if given:
            return str(given)
        same = [r for r in self.records[:-1] if r.target == target and r.identity is not None]
        unnamed = [r for r in same if r.identity and r.identity.name.startswith(self.test_name)]
        return self.test_name if not unnamed else f"{self.test_name}#{len(unnamed) + 1}"

    def run(self, model_or_export: Any, target: str | None = None, **options: Any) -> DeployResult:
        """Export (an ONNX path), deploy on ``target`` and record the run."""
        from aidge_deploy.api import deploy

        name = target or self.default_target or (self.session.targets or ("host",))[0]
        given_name = options.pop(NAME_OPTION, None)
        export_options = {k: options.pop(k, v) for k, v in EXPORT_OPTIONS.items()}
        fields = {f.name for f in dataclasses.fields(DeployConfig)} - {"target"}
        unknown = sorted(set(options) - fields)
        if unknown:
            raise TypeError(
                f"aidge_run got unknown options {unknown}: use {sorted(EXPORT_OPTIONS)}, "
                f"{NAME_OPTION!r} or DeployConfig fields"
            )
        target_name, board = self.board_for(name)
        label = self._label(name)
        record = RunRecord(label, target_name, board.name if board else None)
        self.records.append(record)
        values: dict[str, Any] = {}
        if board is not None:
            # a farm board: the api backend reads the password from the environment
            # (AIDGE_DEPLOY_API_PASSWORD); the farm reserves the board for the job
            values.update(board.deploy_options(self.session.lab.farm if self.session.lab else None))
        values.update(options)
        values["target"] = target_name
        values.setdefault("report_dir", self.session.bundle_root / self.test_dir / label)
        # the same test re-run in this session (a rerun plugin) replaces its own bundle
        values.setdefault("report_overwrite", True)
        record.bundle = Path(values["report_dir"])
        try:
            config = DeployConfig(**values)
            artifact = model_or_export
            if (
                isinstance(model_or_export, str | os.PathLike)
                and Path(model_or_export).suffix.lower() == ".onnx"
            ):
                artifact = self.session.export(
                    Path(model_or_export), target_name, export_options, config
                )
            result = deploy(artifact, config)
        except DeployError as exc:
            record.error = str(exc)
            record.log = exc.log_path
            record.bundle = None
            raise
        record.bundle = result.report_dir
        record.log = result.log_path
        record.provenance = str(result.metrics.get("provenance") or "")
        record.figures = headline_figures(result)
        self._record_identity(record, result, given_name)
        return result

    def _record_identity(self, record: RunRecord, result: DeployResult, given: str | None) -> None:
        from aidge_deploy.history.identity import bundle_facts

        self.session.remember(record, result)
        if record.bundle is None:
            return
        facts = bundle_facts(record.bundle, board=record.board)
        record.identity = facts.identity(
            self._identity_name(given, record.target),
            record.board if self.session.board_series else None,
        )
        record.indexed = IndexedRun(
            record.identity,
            self.nodeid,
            record.bundle,
            board=record.board,
            recorded_at=time.time(),
        )
        self.session.indexed.append(record.indexed)
        history = self.session.history
        if history is not None:
            record.history_id = history.record(
                record.bundle,
                record.identity,
                board=record.board,
                source="pytest",
                vcs=self.session.vcs,
            ).id

    def close(self) -> None:
        for held in self._leases.values():
            held.release()
        self._leases.clear()
