"""Export an uploaded ONNX model with Aidge for the submit page, in a child process.

``profile``'s export step (``modelexport.export_model``) run as ``python -m
aidge_deploy.farm.web.onnxexport SPEC.json``: a model from a user is parsed by native
code, so it runs apart from the service, under a timeout that ends its whole process
group (``connections.local_process``). The child writes ``error.json`` (message, hint) on
a refused model; the service packs the export folder and stores it like an uploaded one.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.errors import ConfigError, DeployError

#: longest an export may take on the service host (s)
EXPORT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class OnnxOptions:
    """The export options ``aidge-deploy profile`` takes."""

    dtype: str = "float32"
    iterations: int = 10
    warmup: int = 2

    def checked(self) -> OnnxOptions:
        from aidge_deploy.modelexport import Dtype

        if self.dtype not in {d.value for d in Dtype}:
            raise ConfigError(f"unknown dtype {self.dtype!r}", hint="Use float32 or int8.")
        if not 1 <= self.iterations <= 100_000:
            raise ConfigError("iterations must be between 1 and 100000")
        if not 0 <= self.warmup <= 10_000:
            raise ConfigError("warm-up must be between 0 and 10000")
        return self


def export_onnx(model: Path, target: str, options: OnnxOptions, work: Path) -> Path:
    """Export ``model`` for ``target`` into ``work/export`` in a child process; the folder."""
    from aidge_deploy.connections.local_process import run_process

    spec = {
        "model": str(model),
        "target": target,
        "out_dir": str(work / "export"),
        "dtype": options.dtype,
        "iterations": options.iterations,
        "warmup": options.warmup,
    }
    (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    run = run_process(
        [sys.executable, "-m", "aidge_deploy.farm.web.onnxexport", str(work / "spec.json")],
        cwd=work,
        timeout_s=EXPORT_TIMEOUT_S,
        stdout_path=work / "export.out",
        stderr_path=work / "export.err",
    )
    error = work / "error.json"
    if error.is_file():
        info = json.loads(error.read_text(encoding="utf-8"))
        raise ConfigError(f"the model cannot be exported: {info['message']}", hint=info["hint"])
    if run.timed_out:
        raise ConfigError(
            f"exporting the model took more than {EXPORT_TIMEOUT_S:.0f} s",
            hint="Export it yourself (aidge-deploy profile --work-dir) and upload the archive.",
        )
    if run.returncode != 0 or not (work / "export" / ".aidge-export.json").is_file():
        raise ConfigError(
            "the model cannot be exported: the Aidge exporter failed"
            + (f" ({run.stderr.strip().splitlines()[-1][:300]})" if run.stderr.strip() else ""),
            hint="Check that the file is an ONNX model Aidge supports.",
        )
    return work / "export"


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    out = Path(spec_path).parent
    from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model

    try:
        export_model(
            ExportRequest(
                model=Path(spec["model"]),
                target=spec["target"],
                out_dir=Path(spec["out_dir"]),
                dtype=Dtype(spec["dtype"]),
                kind=ApplicationKind.BENCHMARK,
                nb_iterations=int(spec["iterations"]),
                nb_warmup=int(spec["warmup"]),
                profiling=True,
            )
        )
    except DeployError as exc:
        info = {"message": exc.message, "hint": exc.hint or ""}
        (out / "error.json").write_text(json.dumps(info), encoding="utf-8")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
