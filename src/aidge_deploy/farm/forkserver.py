"""The agent's fork server, and the handle of each job's process forked from it (``Runner``).

Importing Aidge and the deploy path takes seconds of CPU; paying it for every job would
cost more than many jobs' deploys. The agent starts one fork server
(``multiprocessing``'s ``forkserver``, preloading ``preload``) when it starts, and each job
runs in a child forked from it: still one process per job, in a session of its own
(``jobprocess.child_main`` calls ``setsid``), carrying the agent's mark and, once it has read
its spec, the job's (``reaper``) — so cancelling a job stays a clean kill of its process
group and marked processes. Progress events come back over a pipe; when the agent goes
away, its end of the pipe closes and the runner stops its deploy.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from aidge_deploy.farm.reaper import AGENT_ENV, JOB_ENV, SPARE_MARK

#: modules the fork server imports before forking runners ("__main__": the agent's own
#: entry script, which each child would otherwise run again)
PRELOAD = ("__main__", "aidge_deploy.farm.preload")

#: A forkserver child's exit status is read once, from a pipe. Two threads polling the same
#: child at once (a job's own wait, and ``Process.start()`` of another job, which polls
#: every live child) can both find it readable: one reads the status, the other the end of
#: the pipe, which ``multiprocessing`` reports as status 255 — a finished job seen failed.
#: Every poll of a runner (start, exit status, liveness, close) holds this lock.
_POLL_LOCK = threading.Lock()


class Runners:
    def __init__(self, agent_mark: str) -> None:
        self.agent_mark = agent_mark
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(list(PRELOAD))

    def start_server(self) -> None:
        """Start the fork server now: it imports the deploy path while the agent registers
        and waits for jobs. Its children inherit the agent's mark and the placeholder job
        mark they overwrite with their job's."""
        from multiprocessing import forkserver

        os.environ[AGENT_ENV] = self.agent_mark
        os.environ[JOB_ENV] = SPARE_MARK
        forkserver.ensure_running()

    def start(self, job_id: int, spec_path: Path) -> Runner:
        from aidge_deploy.farm.jobprocess import child_main

        ours, theirs = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=child_main, args=(str(spec_path), theirs), name=f"job-{job_id}", daemon=True
        )
        with _POLL_LOCK:
            proc.start()
        theirs.close()
        return Runner(proc, ours)


class Runner:
    """One job's runner process, seen from the agent."""

    def __init__(self, proc: Any, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        #: the status the runner sent before exiting (``jobprocess.child_main``)
        self.reported_exit: int | None = None

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    @property
    def returncode(self) -> int | None:
        """Its exit status: the one it reported over its pipe when it did (the fork
        server, which multiprocessing reads it from, may be gone: 255), else the OS's."""
        with _POLL_LOCK:
            try:
                code = self.proc.exitcode
            except ValueError:  # closed: its status was read before
                code = None
        if self.reported_exit is not None and (code is None or code == 255):
            return self.reported_exit
        return None if code is None else int(code)

    def events(self, tick: float) -> Iterator[dict[str, Any] | None]:
        """The runner's progress events until it exits, and None after each ``tick``
        seconds without one (so the caller can send what it holds back)."""
        while True:
            try:
                if not self.conn.poll(tick):
                    yield None
                    continue
                event = self.conn.recv()
            except (EOFError, OSError):
                return
            if isinstance(event, dict) and "exit" in event:
                self.reported_exit = int(event["exit"])
            elif isinstance(event, dict):
                yield event

    def alive(self) -> bool:
        with _POLL_LOCK:
            try:
                return bool(self.proc.is_alive())
            except ValueError:  # closed: it ended
                return False

    def terminate(self) -> None:
        """SIGTERM: the runner stops its deploy cleanly (``KeyboardInterrupt``)."""
        with contextlib.suppress(ProcessLookupError, OSError, ValueError):
            self.proc.terminate()

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit status once it has ended (None if ``timeout`` passed first)."""
        from multiprocessing.connection import wait

        try:
            sentinel = self.proc.sentinel
        except ValueError:  # closed
            return None
        wait([sentinel], timeout)  # readable once it ended; the status is read under the lock
        return self.returncode

    def kill_group(self) -> None:
        """SIGKILL to the runner's process group (it is the leader of its session)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        with _POLL_LOCK, contextlib.suppress(ValueError):
            self.proc.close()


__all__ = ["PRELOAD", "Runner", "Runners"]
