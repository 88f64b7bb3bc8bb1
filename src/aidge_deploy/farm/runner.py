"""One farm job's deploy, in a child process of the agent (``python -m
aidge_deploy.farm.runner SPEC.json``).

It runs our own ``deploy()`` with the board's local implementation, prints each progress
event as one JSON line on stdout (the agent streams them to the service), and writes
``result.json`` (the encoded ``DeployResult``) or ``error.json`` next to the spec. SIGTERM
and SIGHUP become ``KeyboardInterrupt`` so the deploy's own clean-up runs (QEMU stopped,
GDB servers ended) before the process exits with status 130.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from aidge_deploy.progress import ProgressUpdate


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _emit(update: ProgressUpdate) -> None:
    line = {"stage": update.stage, "kind": update.kind.value, "message": update.message}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def main(spec_path: str) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    out = Path(spec_path).parent
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.errors import DeployError
    from aidge_deploy.farm.jobconfig import decode_config
    from aidge_deploy.farm.resultcodec import encode_result

    started = time.perf_counter()
    try:
        options = dict(spec["options"])
        options.update(decode_config(spec["config"]))
        options["report_dir"] = Path(spec["report_dir"])
        config = DeployConfig(**options)
        result = deploy(spec["export_dir"], config, progress=_emit, work_dir=Path(spec["run_dir"]))
    except KeyboardInterrupt:
        _write(out / "error.json", {"type": "Interrupted", "message": "the run was stopped"})
        return 130
    except DeployError as exc:
        _write(
            out / "error.json",
            {
                "type": type(exc).__name__,
                "message": exc.message,
                "hint": exc.hint or "",
                "stage": exc.stage,
                "deploy_seconds": time.perf_counter() - started,
            },
        )
        return 1
    except Exception as exc:
        _write(
            out / "error.json",
            {
                "type": type(exc).__name__,
                "message": f"unexpected error on the board host: {type(exc).__name__}: {exc}",
                "hint": "This is likely a bug in aidge-deploy; the farm log has the details.",
            },
        )
        raise
    data = encode_result(result)
    data["deploy_seconds"] = time.perf_counter() - started
    _write(out / "result.json", data)
    return 0


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
