"""The farm agent: serves the boards of one host's lab file to a farm service.

``aidge-deploy farm agent --config lab.yaml``: registers its boards (the service makes
them labgrid places tagged with their target), heartbeats, long-polls for jobs the
coordinator allocated to its places, and runs each job in a thread of its own
(``jobrun.JobRun``), at most one per board. The long poll names the jobs the agent runs
already, so it waits for a new one. Calls to the service are retried while it restarts
(``agentlink``), so a job survives a service restart. Its caches of built exports and
builds are kept within a size budget (``agentcache``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.defaults import DEFAULT_JOB_NICE
from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.farm.agentcache import prune
from aidge_deploy.farm.agentlink import (
    LabgridThread,
    ServiceClient,
    response_hint,
    response_message,
)
from aidge_deploy.farm.forkserver import Runners
from aidge_deploy.farm.jobrun import JobRun
from aidge_deploy.farm.models import (
    BoardSpec,
    Heartbeat,
    HeartbeatAnswer,
    JobOffer,
    PollAnswer,
    RegisterAnswer,
    RegisterRequest,
)
from aidge_deploy.farm.reaper import become_subreaper
from aidge_deploy.lab import LabBoard, Reach, load_lab

log = logging.getLogger("aidge_deploy.farm.agent")

#: default size budget of each of the agent's caches (built exports, builds)
CACHE_BYTES = 4 * 1024**3
#: the memo files of exports' hashes the agent's jobs leave (one per job folder)
HASHES_BYTES = 16 * 1024**2


@dataclass(frozen=True)
class AgentSettings:
    url: str
    token: str
    work_dir: Path
    boards: tuple[LabBoard, ...]
    coordinator: str | None = None
    poll_wait: float = 20.0
    #: CPU priority (nice value) of each job's runner and what it starts (``jobprocess``)
    job_nice: int = DEFAULT_JOB_NICE
    #: size budget of each cache (built exports, builds), bytes
    cache_bytes: int = CACHE_BYTES
    #: on SIGTERM, how long running jobs may take to finish before they are stopped
    stop_grace: float = 30.0

    @classmethod
    def from_lab(
        cls,
        lab_file: Path,
        *,
        url: str | None,
        token: str,
        work_dir: Path,
        coordinator: str | None = None,
        job_nice: int = DEFAULT_JOB_NICE,
        cache_bytes: int = CACHE_BYTES,
        stop_grace: float = 30.0,
    ) -> AgentSettings:
        lab = load_lab(lab_file)
        boards = tuple(b for b in lab.boards if b.reach is not Reach.FARM)
        if not boards:
            raise ConfigError(
                f"{lab_file}: no board this host can serve (farm_board entries are remote)",
                hint="List the host's boards: emulated: true, probe (+ serial), or ssh.",
            )
        farm_url = url or (lab.farm.url if lab.farm else None)
        if not farm_url:
            raise ConfigError(
                "no farm URL: pass --url or put farm: {url: ...} in the lab file",
                hint="e.g. --url http://farm-host:8000",
            )
        from aidge_deploy.farm.client import service_root

        return cls(
            url=service_root(farm_url),
            token=token,
            work_dir=work_dir,
            boards=boards,
            coordinator=coordinator,
            job_nice=job_nice,
            cache_bytes=cache_bytes,
            stop_grace=stop_grace,
        )


class Agent:
    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.service = ServiceClient(settings.url, settings.token)
        self.boards = {b.name: b for b in settings.boards}
        self.running: dict[int, JobRun] = {}
        self._lock = threading.Lock()
        self.labgrid: LabgridThread | None = None
        self.heartbeat_interval = 2.0
        #: set to stop taking jobs (the running ones may finish)
        self.stop = threading.Event()
        #: set once the running jobs have ended: the heartbeats stop too (until then the
        #: service must not declare the agent lost)
        self._halted = threading.Event()
        self.built_exports = settings.work_dir / "exports"
        #: carried by every process the agent starts (``reaper``): its jobs, not another's
        self.mark = str(os.getpid())
        self.runners = Runners(self.mark)
        #: set when a job ends: its board may take the job already offered for it
        self._freed = threading.Event()
        self._cache_lock = threading.Lock()

    @property
    def work_dir(self) -> Path:
        return self.settings.work_dir

    @property
    def job_nice(self) -> int:
        return self.settings.job_nice

    # --- life cycle ----------------------------------------------------------------------

    def register(self) -> None:
        from aidge_deploy import __version__ as version

        body = RegisterRequest(
            hostname=socket.gethostname(),
            version=str(version),
            boards=[
                BoardSpec(
                    name=b.name,
                    target=b.target,
                    kind="emu" if b.reach is Reach.EMULATED else "hw",
                    description=b.description,
                )
                for b in self.settings.boards
            ],
        )
        r = self.service.call("POST", "/register", json=body.model_dump(mode="json"))
        if r.status_code != 200:
            raise ConfigError(
                f"the farm refused this agent: {response_message(r)}", hint=response_hint(r)
            )
        info = RegisterAnswer.model_validate(r.json())
        self.heartbeat_interval = info.heartbeat_interval
        address = self.settings.coordinator or info.coordinator
        if self.labgrid is None:
            self.labgrid = LabgridThread(address, info.farm)
        log.info("registered %d board(s); coordinator %s", len(self.boards), address)

    def run(self) -> None:
        become_subreaper()
        self.settings.work_dir.mkdir(parents=True, exist_ok=True)
        # the jobs' build cache is the agent's own, kept within its budget
        os.environ.setdefault("AIDGE_DEPLOY_CACHE_DIR", str(self.settings.work_dir / "cache"))
        self.runners.start_server()  # imports while the agent registers and waits
        self.register()
        beat = threading.Thread(target=self._heartbeats, daemon=True, name="heartbeat")
        beat.start()
        try:
            while not self.stop.is_set():
                with self._lock:
                    have = sorted(self.running)
                    stopping = sorted(
                        j for j, run in self.running.items() if run.cancelled.is_set()
                    )
                # the jobs it already runs are not offered again: the poll waits for a new
                # one, or for a cancel of one of them
                params = {"wait": self.settings.poll_wait, "skip": have, "stopping": stopping}
                r = self.service.call("POST", "/poll", params=params)
                if r.status_code == 409:  # the service forgot us (new database): register again
                    self.register()
                    continue
                if r.status_code != 200:
                    raise DeployError(
                        f"farm poll refused: {response_message(r)}", hint=response_hint(r)
                    )
                answer = PollAnswer.model_validate(r.json())
                for job_id in answer.cancel:
                    with self._lock:
                        run = self.running.get(job_id)
                    if run is not None:
                        run.cancel("cancelled by its owner")
                offers = answer.jobs
                self._freed.clear()
                started = [self._start(offer) for offer in offers]
                if offers and not any(started):
                    # offered for a board its last job has not freed yet: wait until it is
                    self._freed.wait(1.0)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop taking jobs; let the running ones finish for ``stop_grace`` seconds, then
        stop them (they fail "the farm agent stopped"): each ends its processes and frees
        its board either way."""
        self.stop.set()
        deadline = time.monotonic() + self.settings.stop_grace
        while time.monotonic() < deadline:
            with self._lock:
                if not self.running:
                    break
            self._freed.wait(0.2)
            self._freed.clear()
        with self._lock:
            runs = list(self.running.values())
        for run in runs:
            run.interrupt("the farm agent stopped during the job")
        for run in runs:
            run.thread.join(30)
        self._halted.set()
        self.service.stopping.set()
        if self.labgrid is not None:
            self.labgrid.close()
        self.service.close()

    def _heartbeats(self) -> None:
        while not self._halted.wait(self.heartbeat_interval):
            with self._lock:
                running = list(self.running)
            try:
                beat = Heartbeat(running=running).model_dump(mode="json")
                r = self.service.call("POST", "/heartbeat", json=beat, retry_s=5)
            except DeployError:
                continue
            if r.status_code == 409:
                with contextlib.suppress(DeployError):
                    self.register()
                continue
            if r.status_code != 200:
                continue
            try:
                answer = HeartbeatAnswer.model_validate(r.json())
                for job_id in {*answer.cancel, *answer.stop}:
                    with self._lock:
                        run = self.running.get(job_id)
                    if run is not None:
                        run.cancel("cancel requested")
            except Exception:  # a lost heartbeat thread would make the whole agent "lost"
                log.exception("heartbeat: acting on the service's answer failed")

    def _start(self, offer: JobOffer) -> bool:
        job_id = offer.id
        with self._lock:
            busy = any(r.board == offer.board and r.on_board for r in self.running.values())
            board = self.boards.get(offer.board)
            if job_id in self.running or busy or board is None:
                return False
            run = JobRun(self, offer, board)
            self.running[job_id] = run
        run.thread.start()
        return True

    def finished(self, job_id: int) -> None:
        with self._lock:
            self.running.pop(job_id, None)
            exports = frozenset(r.offer.export for r in self.running.values())
        self.prune_caches(exports)
        self._freed.set()

    def prune_caches(self, in_use: frozenset[str] = frozenset()) -> None:
        """Bring every cache back within its budget (least recently used entries first)."""
        budget = self.settings.cache_bytes
        cache_root = Path(
            os.environ.get("AIDGE_DEPLOY_CACHE_DIR", self.settings.work_dir / "cache")
        )
        with self._cache_lock:
            for folder, limit, keep in (
                (self.built_exports, budget, in_use),
                (cache_root / "builds", budget, frozenset()),
                (cache_root / "hashes", HASHES_BYTES, frozenset()),
            ):
                pruned = prune(folder, limit, keep=keep)
                if pruned.removed:
                    log.info(
                        "cache %s: %d entries removed, %d MiB kept",
                        folder,
                        len(pruned.removed),
                        pruned.size // 2**20,
                    )

    def board_freed(self) -> None:
        """A job has freed its board (its results may still be uploading)."""
        self._freed.set()


def run_agent(settings: AgentSettings) -> None:
    """Run until SIGTERM/SIGINT; running jobs are cancelled and their boards released."""
    # the CLI configured warnings only: an agent's own log says what it does
    logging.basicConfig(format="%(asctime)s agent %(levelname)s %(message)s", force=True)
    logging.getLogger("aidge_deploy.farm").setLevel(logging.INFO)
    agent = Agent(settings)

    def _stop(signum: int, _frame: Any) -> None:
        agent.stop.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    with contextlib.suppress(KeyboardInterrupt):
        agent.run()


__all__ = ["Agent", "AgentSettings", "run_agent"]
