"""What the pytest plugin does for a test: pick and lock a board, export, deploy, record.

Kept free of pytest so it reads (and is tested) as plain code: ``AidgeSession`` holds the
session's options, the lab and the export cache; ``TestRuns`` is one test's runs and the
boards it holds until the test ends.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.lab import LabBoard, LabError, LabMap, load_lab
from aidge_deploy.results import DeployResult
from aidge_deploy.testing.figures import Figure, headline_figures
from aidge_deploy.testing.locks import BoardLease, lease

#: ``aidge_run`` options that shape the export of an ONNX model (the ``profile`` options)
EXPORT_OPTIONS: Mapping[str, Any] = {
    "dtype": "float32",
    "iterations": 10,
    "warmup": 2,
    "kind": "benchmark",
    "profiling": True,
    "inputs": None,
}


def _emulated_targets() -> frozenset[str]:
    try:
        from aidge_qemu_descriptors import list_boards
    except ImportError:  # pragma: no cover - shipped with this package
        return frozenset()
    return frozenset(b.name for b in list_boards())


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


class AidgeSession:
    """The plugin's state for one pytest session (one per xdist worker)."""

    def __init__(
        self,
        *,
        targets: Sequence[str] = (),
        lab_path: Path | None = None,
        report_dir: Path | None = None,
        baseline_dir: Path | None = None,
        lock_timeout_s: float = 600.0,
        work_root: Path,
    ) -> None:
        self.targets = tuple(targets)
        self.lab_path = lab_path
        self.report_dir = report_dir
        self.baseline_dir = baseline_dir
        self.lock_timeout_s = lock_timeout_s
        self.work_root = work_root
        self._lab: LabMap | None = None
        self._exports: dict[tuple[Any, ...], object] = {}

    @property
    def lab(self) -> LabMap | None:
        if self.lab_path is None:
            return None
        if self._lab is None:
            self._lab = load_lab(self.lab_path)
        return self._lab

    @property
    def bundle_root(self) -> Path:
        return self.report_dir if self.report_dir is not None else self.work_root / "bundles"

    def candidates(self, name: str) -> tuple[str, tuple[LabBoard, ...]]:
        """The target ``name`` stands for, and the lab boards that can run it.

        ``name`` is a lab board's name or a target name. No board is needed for the host and
        the emulated boards; any other target needs a board of the lab.
        """
        lab = self.lab
        if lab is not None:
            if any(b.name == name for b in lab.boards):
                board = lab.board(name)
                return board.target, (board,)
            boards = lab.boards_for(name)
            if boards:
                return name, boards
        if name == "host" or name in _emulated_targets():
            return name, ()
        if lab is not None:
            raise LabError(
                f"no board of target {name!r} in the lab ({lab.source})",
                hint=f"Boards: {', '.join(f'{b.name} ({b.target})' for b in lab.boards)}.",
            )
        return name, ()

    def export(self, model: Path, target: str, options: Mapping[str, Any]) -> object:
        """Export ``model`` for ``target`` (once per session for the same model and options)."""
        from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model

        try:
            dtype = Dtype(str(options["dtype"]))
            kind = ApplicationKind(str(options["kind"]))
        except ValueError as exc:
            raise ConfigError(
                f"aidge_run: {exc}",
                hint="dtype: float32 or int8; kind: benchmark, output, standalone or validation.",
            ) from None
        inputs = tuple(np.asarray(a, dtype=np.float32) for a in options["inputs"] or ())
        digest = hashlib.sha256(model.read_bytes())
        for array in inputs:
            digest.update(repr(array.shape).encode() + array.tobytes())
        key = (
            digest.hexdigest(),
            target,
            dtype,
            kind,
            int(options["iterations"]),
            int(options["warmup"]),
            bool(options["profiling"]),
        )
        if key not in self._exports:
            out = (
                self.work_root
                / "exports"
                / (
                    f"{model.stem}-{target}-{dtype.value}-{kind.value}-{digest.hexdigest()[:10]}"
                    f"-{len(self._exports)}"
                )
            )
            self._exports[key] = export_model(
                ExportRequest(
                    model=model,
                    target=target,
                    out_dir=out,
                    dtype=dtype,
                    kind=kind,
                    nb_iterations=int(options["iterations"]),
                    nb_warmup=int(options["warmup"]),
                    profiling=bool(options["profiling"]),
                    inputs=inputs,
                )
            )
        return self._exports[key]


def safe_name(text: str) -> str:
    """A folder name from a test id (``test_x[host-int8]`` -> ``test_x-host-int8``)."""
    text = re.sub(r"[\[\]]", "-", text).strip("-")
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:120] or "test"


class TestRuns:
    """The runs of one test and the boards it holds until it ends."""

    __test__ = False  # not a test class, whatever pytest's collection thinks of the name

    def __init__(self, session: AidgeSession, test_dir: Path, default_target: str | None) -> None:
        self.session = session
        self.test_dir = test_dir
        self.default_target = default_target
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

    def run(self, model_or_export: Any, target: str | None = None, **options: Any) -> DeployResult:
        """Export (an ONNX path), deploy on ``target`` and record the run."""
        from aidge_deploy.api import deploy
        from aidge_deploy.config import DeployConfig

        name = target or self.default_target or (self.session.targets or ("host",))[0]
        export_options = {k: options.pop(k, v) for k, v in EXPORT_OPTIONS.items()}
        fields = {f.name for f in dataclasses.fields(DeployConfig)} - {"target"}
        unknown = sorted(set(options) - fields)
        if unknown:
            raise TypeError(
                f"aidge_run got unknown options {unknown}: use {sorted(EXPORT_OPTIONS)} or "
                "DeployConfig fields"
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
        record.bundle = Path(values["report_dir"])
        try:
            artifact = model_or_export
            if (
                isinstance(model_or_export, str | os.PathLike)
                and Path(model_or_export).suffix.lower() == ".onnx"
            ):
                artifact = self.session.export(Path(model_or_export), target_name, export_options)
            result = deploy(artifact, DeployConfig(**values))
        except DeployError as exc:
            record.error = str(exc)
            record.log = exc.log_path
            record.bundle = None
            raise
        record.bundle = result.report_dir
        record.log = result.log_path
        record.provenance = str(result.metrics.get("provenance") or "")
        record.figures = headline_figures(result)
        return result

    def close(self) -> None:
        for held in self._leases.values():
            held.release()
        self._leases.clear()
