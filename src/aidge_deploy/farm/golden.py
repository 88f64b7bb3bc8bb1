"""The golden exports of the boards' health checks (``farm.health``): a tiny model the farm
makes itself — a 4 → 3 fully connected layer and a ReLU, fixed weights, a fixed input —
exported with Aidge for each target (an ``output`` export and a ``benchmark`` one) in a
child process (``python -m aidge_deploy.farm.golden FOLDER TARGET``), once, in the
background; stored like uploads, their content hashes kept in ``DATA/health/TARGET.json``.
Its reference outputs are computed here with NumPy.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import Database
from aidge_deploy.farm.settings import FarmSettings

log = logging.getLogger("aidge_deploy.farm")

#: a golden export that could not be made is tried again after this long (s)
EXPORT_RETRY_S = 600.0
EXPORT_TIMEOUT_S = 600.0

# the golden model: y = relu(W x + b)
GOLDEN_W = ((np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5) / 8).astype(np.float32)
GOLDEN_B = np.array([0.1, -0.2, 0.3], np.float32)
GOLDEN_X = np.array([[1.0, -0.5, 0.25, 2.0]], np.float32)


def expected_outputs() -> np.ndarray:
    """The golden model's output for its input, computed here (float32)."""
    return np.maximum(GOLDEN_X @ GOLDEN_W.T + GOLDEN_B, 0).astype(np.float32).reshape(-1)


def write_golden_model(path: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper, save

    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "W", "b"], ["g"], transB=1),
            helper.make_node("Relu", ["g"], ["y"]),
        ],
        "golden",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(GOLDEN_W, "W"), numpy_helper.from_array(GOLDEN_B, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save(model, str(path))
    return path


def export_main(folder: str, target: str) -> int:
    """``python -m aidge_deploy.farm.golden FOLDER TARGET``: the two golden exports of
    ``target`` into ``FOLDER/output`` and ``FOLDER/figure`` (run apart from the service)."""
    from aidge_deploy.modelexport import ApplicationKind, ExportRequest, export_model

    out = Path(folder)
    model = write_golden_model(out / "golden.onnx")
    for name, kind in (("output", ApplicationKind.OUTPUT), ("figure", ApplicationKind.BENCHMARK)):
        export_model(
            ExportRequest(
                model=model,
                target=target,
                out_dir=out / name,
                kind=kind,
                nb_iterations=3,
                nb_warmup=1,
                inputs=(GOLDEN_X,),
            )
        )
    return 0


class GoldenExports:
    """The golden exports of each target, made once (in a child process, in the
    background) and stored like uploads; their content hashes in ``DIR/health``."""

    def __init__(self, settings: FarmSettings, store: Any, db: Database) -> None:
        self.dir = Path(settings.data_dir) / "health"
        self.store = store
        self.db = db
        self._lock = threading.Lock()
        self._making: set[str] = set()
        self._failed: dict[str, float] = {}
        self.errors: dict[str, str] = {}

    def get(self, target: str, who: Principal) -> tuple[str, str] | None:
        """(output export, figure export) of ``target``, or None while it is being made."""
        known = self.dir / f"{target}.json"
        if known.is_file():
            data = json.loads(known.read_text(encoding="utf-8"))
            if all(self.store.path_of(h).is_file() for h in (data["output"], data["figure"])):
                return str(data["output"]), str(data["figure"])
        with self._lock:
            failed = self._failed.get(target)
            if target in self._making or (failed and time.time() - failed < EXPORT_RETRY_S):
                return None
            self._making.add(target)
        threading.Thread(
            target=self._make, args=(target, who), name=f"golden-{target}", daemon=True
        ).start()
        return None

    def _make(self, target: str, who: Principal) -> None:
        try:
            self._export(target, who)
            self.errors.pop(target, None)
        except Exception as exc:  # shown on the board's health page, tried again later
            message = exc.message if isinstance(exc, DeployError) else repr(exc)
            log.warning("golden export of %s failed: %s", target, message)
            self.errors[target] = message
            with self._lock:
                self._failed[target] = time.time()
        finally:
            with self._lock:
                self._making.discard(target)

    def _export(self, target: str, who: Principal) -> None:
        import shutil
        import tempfile

        from aidge_deploy.connections.local_process import run_process
        from aidge_deploy.farm.archive import pack_export
        from aidge_deploy.farm.jobs import record_export

        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"golden-{target}-", dir=self.dir))
        try:
            run = run_process(
                [sys.executable, "-m", "aidge_deploy.farm.golden", str(work), target],
                cwd=work,
                timeout_s=EXPORT_TIMEOUT_S,
                stdout_path=work / "export.out",
                stderr_path=work / "export.err",
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            if run.returncode != 0:
                tail = (work / "export.err").read_text(errors="replace").strip()[-500:]
                raise ConfigError(f"the golden export for {target} failed: {tail}")
            hashes = {}
            for name in ("output", "figure"):
                upload = work / f"{name}.tar.gz"
                upload.write_bytes(pack_export(work / name))
                stored = self.store.ingest(upload)
                with self.db.session() as s:
                    record_export(s, stored, who, f"golden {name} ({target})")
                hashes[name] = stored.content_hash
            (self.dir / f"{target}.json").write_text(json.dumps(hashes), encoding="utf-8")
            log.info("golden exports of %s ready: %s", target, hashes)
        finally:
            shutil.rmtree(work, ignore_errors=True)


__all__ = ["GOLDEN_X", "GoldenExports", "expected_outputs", "export_main", "write_golden_model"]


if __name__ == "__main__":
    sys.exit(export_main(sys.argv[1], sys.argv[2]))
