"""What runs inside one farm job's process (forked by the agent's ``forkserver``): its deploy.

``child_main`` starts a session of its own, takes the job's mark (``reaper``), lowers
its CPU priority to the agent's ``job_nice`` (``cpupriority``), runs our
own ``deploy()`` with the board's local implementation, sends each progress event to the
agent over its pipe (the agent streams them to the service), and writes ``result.json``
(the encoded ``DeployResult``) or ``error.json`` next to the spec; the exit status says
which. The deploy path was imported by the fork server (``preload``), so the deploy
starts at once. Importing this module stays cheap: the agent imports it to start runners.

SIGTERM and SIGHUP become ``KeyboardInterrupt`` so the deploy's own clean-up runs (QEMU
stopped, GDB servers ended) before the process exits with status 130. The pipe closing
(the agent stopped or died) stops the deploy the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.defaults import DEFAULT_JOB_NICE

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from aidge_deploy.progress import ProgressUpdate
    from aidge_deploy.runcontrol import RunControl


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def child_main(spec_path: str, conn: Connection) -> None:
    """The runner process: run the job of ``spec_path``, exit with its status."""
    os.setsid()  # its own process group: the agent can end it and what it started at once
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    from aidge_deploy.cpupriority import lower_priority
    from aidge_deploy.farm.reaper import take_job_mark
    from aidge_deploy.runcontrol import RunControl

    try:
        path = Path(spec_path)
        spec = json.loads(path.read_text(encoding="utf-8"))
        take_job_mark(str(spec["job"]))
        lower_priority(int(spec.get("nice", DEFAULT_JOB_NICE)))  # before any thread starts
        os.chdir(path.parent)
        with open(path.parent / "runner.log", "ab") as log:  # whatever gets printed
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        control = RunControl()
        _cancel_when_closed(conn, control)

        def emit(update: ProgressUpdate) -> None:
            line = {"stage": update.stage, "kind": update.kind.value, "message": update.message}
            conn.send(line)

        code = run_job(spec, path.parent, emit, control)
    except KeyboardInterrupt:
        code = 130
    # the status also goes over the pipe: multiprocessing reads a forkserver child's exit
    # status from the fork server, which a signal to the agent's process group may end
    with contextlib.suppress(OSError, ValueError):
        conn.send({"exit": code})
    sys.exit(code)


def run_job(
    spec: dict[str, Any],
    out: Path,
    emit: Callable[[ProgressUpdate], None],
    control: RunControl,
) -> int:
    """Run the job ``spec``, writing its result or error in ``out``; the exit status."""
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.errors import REPORT_HINT, DeployError, InternalError
    from aidge_deploy.farm.jobconfig import decode_config
    from aidge_deploy.farm.resultcodec import encode_result

    started_at = time.time()
    started = time.perf_counter()
    try:
        options = dict(spec["options"])
        options.update(decode_config(spec["config"]))
        options["report_dir"] = Path(spec["report_dir"])
        config = DeployConfig(**options)
        result = deploy(
            spec["export_dir"],
            config,
            progress=emit,
            work_dir=Path(spec["run_dir"]),
            control=control,
        )
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
                "deploy_started_at": started_at,
                "deploy_seconds": time.perf_counter() - started,
            },
        )
        return 1
    except Exception as exc:
        _write(
            out / "error.json",
            {
                "type": InternalError.__name__,
                "message": f"unexpected error on the board host: {type(exc).__name__}: {exc}",
                "hint": f"{REPORT_HINT} The farm log has its traceback.",
            },
        )
        raise
    data = encode_result(result)
    data["deploy_started_at"] = started_at
    data["deploy_seconds"] = time.perf_counter() - started
    _write(out / "result.json", data)
    return 0


def _cancel_when_closed(conn: Connection, control: RunControl) -> None:
    """The agent holds the other end of the pipe while the job runs: its end of file
    means the agent is gone (stopped or killed), so the run stops instead of running on."""

    def watch() -> None:
        with contextlib.suppress(OSError, ValueError):
            conn.poll(None)  # the agent never writes: readable means closed
        control.cancel("the farm agent is gone")

    threading.Thread(target=watch, daemon=True, name="agent-watch").start()


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)


__all__ = ["child_main", "run_job"]
