"""The farm agent: serves the boards of one host's lab file to a farm service.

``aidge-deploy farm agent --config lab.yaml``: registers its boards (the service makes
them labgrid places tagged with their target), heartbeats, long-polls for jobs the
coordinator allocated to its places, and runs each job: lock the place (labgrid
``AcquirePlace`` for the job's reservation), claim it, fetch and check the export, run
our own ``deploy()`` in a child process (``jobprocess``, forked from a server that
imported the deploy path once: ``forkserver``) with the board's lab options, stream its stage events,
free the board as soon as the deploy has ended — end every process of the job
(``reaper``), cancel the reservation, unlock the place, in every case (failure, cancel,
crash of the child) — so labgrid hands it to the next job while this one uploads result,
bundle and log and reports its end with the time each phase took. The long poll names
the jobs the agent runs already, so it waits for a new one. Calls to the service are
retried while it restarts, so a job survives a service restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import shutil
import signal
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from aidge_deploy.defaults import DEFAULT_JOB_NICE
from aidge_deploy.errors import ConfigError, DeployError
from aidge_deploy.farm.agentcache import prune, touch
from aidge_deploy.farm.archive import check_archive, extract_archive
from aidge_deploy.farm.coordinator import free_board
from aidge_deploy.farm.forkserver import Runner, Runners
from aidge_deploy.farm.models import (
    BoardSpec,
    ClaimAnswer,
    EventsAnswer,
    EventsRequest,
    FinishRequest,
    Heartbeat,
    HeartbeatAnswer,
    JobOffer,
    PollAnswer,
    RegisterAnswer,
    RegisterRequest,
    StageEvent,
)
from aidge_deploy.farm.reaper import become_subreaper, end_job_processes
from aidge_deploy.farm.states import JobState
from aidge_deploy.lab import LabBoard, Reach, load_lab

log = logging.getLogger("aidge_deploy.farm.agent")
T = TypeVar("T")

#: how long a report to the service is retried while it is down (a restart)
SERVICE_RETRY_S = 600.0
#: default size budget of each of the agent's caches (built exports, builds)
CACHE_BYTES = 4 * 1024**3
#: the memo files of exports' hashes the agent's jobs leave (one per job folder)
HASHES_BYTES = 16 * 1024**2
#: how often a running job's logs are sent to the service, so its page shows them growing (s)
LOG_UPLOAD_INTERVAL = 1.0
#: a job's progress events are sent together when they come within this many seconds
EVENT_BATCH_S = 0.2


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


class ServiceClient:
    """The agent's HTTP calls, retried through connection errors and 5xx (a restart)."""

    def __init__(self, url: str, token: str) -> None:
        from aidge_deploy.farm.client import http_transport

        self._http = httpx.Client(
            transport=http_transport(),
            base_url=url + "/api/agent",
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(60.0, connect=5.0),
        )
        self.stopping = threading.Event()

    def call(
        self, method: str, path: str, *, retry_s: float = SERVICE_RETRY_S, **kw: Any
    ) -> httpx.Response:
        deadline = time.monotonic() + retry_s
        delay = 0.2
        while True:
            try:
                r = self._http.request(method, path, **kw)
                if r.status_code < 500:
                    return r
                problem = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}"
            if time.monotonic() > deadline or self.stopping.is_set():
                raise DeployError(f"farm service unreachable ({problem}) for {method} {path}")
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def close(self) -> None:
        self._http.close()


class LabgridThread:
    """labgrid's asyncio client session on a loop of its own, callable from any thread."""

    def __init__(self, address: str, farm: str) -> None:
        from aidge_deploy.farm.coordinator import CoordinatorLink

        self.loop = asyncio.new_event_loop()
        self.link = CoordinatorLink(address, farm)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="labgrid")
        self._thread.start()
        self._lock = threading.Lock()

    def call(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float = 60.0) -> T:
        async def run() -> T:
            if not self.link.connected:
                await self.link.connect()
            return await make()

        with self._lock:  # one labgrid request at a time on the session
            return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.link.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


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
            raise ConfigError(f"the farm refused this agent: {_message(r)}", hint=_hint(r))
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
                    raise DeployError(f"farm poll refused: {_message(r)}", hint=_hint(r))
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


class JobRun:
    """One job on one board, in its own thread and folder."""

    def __init__(self, agent: Agent, offer: JobOffer, board: LabBoard) -> None:
        self.agent = agent
        self.offer = offer
        self.id = offer.id
        self.board = board.name
        self.lab_board = board
        self.token = offer.token
        self.dir = agent.settings.work_dir / "jobs" / str(self.id)
        self.lease = 0
        self.proc: Runner | None = None
        self.cancelled = threading.Event()
        self.cancel_reason = ""
        #: stopped by the agent itself (stopping), not by the job's owner
        self.interrupted = False
        #: the board was unlocked and the reservation cancelled here
        self.released = False
        self.thread = threading.Thread(target=self._main, daemon=True, name=f"job-{self.id}")
        self._pending: list[StageEvent] = []
        self._run_ended = threading.Event()
        #: the job holds its board (from before the lock until ``_free_board``)
        self.on_board = True
        self._locked = False
        #: seconds each phase of the job took on this host, reported with its end
        self.phases: dict[str, float] = {}
        self._clock = time.monotonic()

    def _phase(self, name: str) -> None:
        """Record that phase ``name`` ends now (it began where the previous one ended)."""
        t = time.monotonic()
        self.phases[name] = round(t - self._clock, 4)
        self._clock = t

    def interrupt(self, reason: str) -> None:
        """Stop the job because the agent stops: it fails with ``reason``."""
        self.interrupted = True
        self.cancel(reason)

    def cancel(self, reason: str) -> None:
        if self.cancelled.is_set():
            return
        self.cancel_reason = reason
        self.cancelled.set()
        proc = self.proc
        if proc is not None and proc.alive():
            proc.terminate()  # the runner turns SIGTERM into a clean interrupt

    def _main(self) -> None:
        labgrid = self.agent.labgrid
        try:
            if labgrid is None:
                return
            try:
                labgrid.call(lambda: labgrid.link.acquire(self.board, self.token))
                self._locked = True
            except Exception as exc:
                log.warning("job %s: cannot lock %s: %s", self.id, self.board, exc)
                return
            self._phase("lock")
            r = self.agent.service.call("POST", f"/jobs/{self.id}/claim")
            if r.status_code != 200:  # cancelled meanwhile: the board is freed at once
                log.warning("job %s: claim refused: %s", self.id, _message(r))
                return
            self.lease = ClaimAnswer.model_validate(r.json()).lease
            self._phase("claim")
            self._run()
        except Exception:
            log.exception("job %s", self.id)
            with contextlib.suppress(Exception):
                self._finish(
                    "failed",
                    error="the farm agent failed while running the job",
                    error_type="AgentError",
                )
        finally:
            self._free_board()
            shutil.rmtree(self.dir, ignore_errors=True)
            self.agent.finished(self.id)

    def _free_board(self) -> None:
        """End every process of the job, then unlock the board and cancel the job's
        reservation: labgrid allocates the board to the next job at once, while this one
        still uploads its results (which need no board). Once only."""
        if not self.on_board:
            return
        self._end_processes()
        labgrid = self.agent.labgrid
        if labgrid is not None and self._locked:
            try:  # the reservation, then the lock: the next job gets the board at once
                labgrid.call(lambda: free_board(labgrid.link, self.token, self.board))
                self.released = True
            except Exception as exc:  # the service frees it when the job ends
                log.warning("job %s: freeing %s: %s", self.id, self.board, exc)
        self.on_board = False
        self._phase("release")
        self.agent.board_freed()

    def _run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        export_dir = self._fetch_export()
        self._phase("fetch")
        spec = {
            "job": self.id,
            "export_dir": str(export_dir),
            "run_dir": str(self.dir / "run"),
            "report_dir": str(self.dir / "bundle"),
            "options": _jsonable(self.lab_board.deploy_options()),
            "config": self.offer.config,
            "nice": self.agent.settings.job_nice,
        }
        spec_path = self.dir / "spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        if self.cancelled.is_set():
            if self.interrupted:
                self._finish("failed", error=self.cancel_reason, error_type="AgentStopped")
            else:
                self._finish("cancelled", error=self.cancel_reason)
            return
        handed_at = time.time()
        self.proc = proc = self.agent.runners.start(self.id, spec_path)
        if self.cancelled.is_set():
            proc.terminate()
        streamer = threading.Thread(target=self._stream_logs, daemon=True, name=f"log-{self.id}")
        streamer.start()
        last_post = 0.0
        try:
            # events go to the service at most every EVENT_BATCH_S, and at the latest
            # EVENT_BATCH_S after they came (a stage that starts now is shown now)
            for event in proc.events(tick=EVENT_BATCH_S):
                if event is not None:
                    self._pending.append(StageEvent(**event))
                if self._pending and time.monotonic() - last_post >= EVENT_BATCH_S:
                    self._post_events()
                    last_post = time.monotonic()
            proc.wait()
        finally:
            self._run_ended.set()
        returncode = proc.returncode
        self._runner_phases(handed_at)
        self._free_board()
        streamer.join(30)  # its last upload lands before the final one below
        self._post_events()
        self._report(returncode)

    def _runner_phases(self, handed_at: float) -> None:
        """Split the runner's time: from its start (a fork) to the deploy's start, the
        deploy, and from the deploy's end to the runner's exit (its last events)."""
        ended = time.time()
        for name in ("result.json", "error.json"):
            path = self.dir / name
            if path.is_file():
                with contextlib.suppress(ValueError, OSError):
                    data = json.loads(path.read_text(encoding="utf-8"))
                    start, seconds = data.get("deploy_started_at"), data.get("deploy_seconds")
                    if isinstance(start, float) and isinstance(seconds, float):
                        self.phases["start"] = round(max(0.0, start - handed_at), 4)
                        self.phases["deploy"] = round(seconds, 4)
                        self.phases["exit"] = round(max(0.0, ended - start - seconds), 4)
                break
        self._clock = time.monotonic()

    def _end_processes(self) -> None:
        """The runner's process group, then every process left with the job's mark."""
        proc = self.proc
        if proc is not None:
            if proc.alive():
                proc.terminate()
                if proc.wait(10) is None:
                    proc.kill_group()
                    proc.wait(5)
            proc.close()
        end_job_processes(str(self.id), agent=self.agent.mark)

    def _fetch_export(self) -> Path:
        """The job's private copy of the export: from the agent's cache of built exports
        (an export built here before is not rebuilt), else downloaded and checked."""
        dest = self.dir / "export"
        cached = self.agent.built_exports / self.offer.export
        if cached.is_dir():
            with contextlib.suppress(OSError):
                shutil.copytree(cached, dest)  # copy2 keeps mtimes: make sees it built
                touch(cached)  # most recently used
                return dest
            shutil.rmtree(dest, ignore_errors=True)
        archive = self.dir / "export.tar.gz"
        r = self.agent.service.call("GET", f"/exports/{self.offer.export}")
        if r.status_code != 200:
            raise DeployError(f"cannot fetch the export: {_message(r)}")
        archive.write_bytes(r.content)
        check_archive(archive)
        return extract_archive(archive, dest)

    def _keep_built_export(self) -> None:
        """After a successful job: keep its built export for the next job of the same one
        (moved, not copied: the job's folder is removed next)."""
        cache = self.agent.built_exports
        final = cache / self.offer.export
        _touch_build_entry(self.dir / "export")
        if final.exists():
            return
        try:
            cache.mkdir(parents=True, exist_ok=True)
            os.rename(self.dir / "export", final)  # atomic; a concurrent job may have won
            touch(final)
        except OSError:
            return

    def _stream_logs(self) -> None:
        """While the deploy runs, send its logs to the service whenever they changed."""
        sent = b""
        while not self._run_ended.wait(LOG_UPLOAD_INTERVAL):
            data = _collect_logs(self.dir / "run")
            if data == sent:
                continue
            try:
                self.agent.service.call(
                    "PUT",
                    f"/jobs/{self.id}/files/log.txt",
                    params={"lease": self.lease},
                    content=data,
                    retry_s=5,
                )
                sent = data
            except DeployError:  # the service is restarting: the next round sends it
                continue

    def _post_events(self) -> None:
        if not self._pending:
            return
        events, self._pending = self._pending, []
        r = self.agent.service.call(
            "POST",
            f"/jobs/{self.id}/events",
            json=EventsRequest(lease=self.lease, events=events).model_dump(mode="json"),
        )
        if r.status_code == 200 and EventsAnswer.model_validate(r.json()).cancel:
            self.cancel("cancelled by its owner")
        elif r.status_code == 409:  # the job is no longer ours (declared lost meanwhile)
            self.cancel("the job was taken away from this agent")

    def _report(self, returncode: int | None) -> None:
        self._upload("log.txt", _collect_logs(self.dir / "run"))
        bundle = self.dir / "bundle"
        if bundle.is_dir() and any(bundle.iterdir()):
            self._upload("bundle.tar.gz", _tar_dir(bundle))
        result = self.dir / "result.json"
        error = self.dir / "error.json"
        if returncode == 0 and result.is_file():
            data = json.loads(result.read_text(encoding="utf-8"))
            self._upload("result.json", result.read_bytes())
            self._phase("upload")
            self._finish("done", deploy_seconds=data.get("deploy_seconds"))
            self._keep_built_export()
            return
        self._phase("upload")
        info = json.loads(error.read_text(encoding="utf-8")) if error.is_file() else {}
        if self.interrupted:
            self._finish("failed", error=self.cancel_reason, error_type="AgentStopped")
            return
        if self.cancelled.is_set():
            self._finish("cancelled", error=f"cancelled: {self.cancel_reason}")
            return
        message = info.get("message") or f"the deploy process ended with status {returncode}"
        if info.get("stage"):
            message += f" (stage {info['stage']})"
        self._finish(
            "failed",
            error=message,
            error_hint=info.get("hint") or "",
            error_type=info.get("type") or "DeployError",
            deploy_seconds=info.get("deploy_seconds"),
        )

    def _upload(self, name: str, data: bytes) -> None:
        self.agent.service.call(
            "PUT", f"/jobs/{self.id}/files/{name}", params={"lease": self.lease}, content=data
        )

    def _finish(self, state: str, **fields: Any) -> None:
        body = FinishRequest(
            lease=self.lease,
            state=JobState(state),
            phases=self.phases,
            released=self.released,
            **fields,
        )
        r = self.agent.service.call(
            "POST", f"/jobs/{self.id}/finish", json=body.model_dump(mode="json")
        )
        if r.status_code != 200:
            log.warning("job %s: finish refused: %s", self.id, _message(r))


def _touch_build_entry(export_dir: Path) -> None:
    """Mark the build-cache entry of the export in ``export_dir`` as used now (its LRU)."""
    from aidge_deploy.artifact import load_export_artifact
    from aidge_deploy.buildsys import plan_build

    with contextlib.suppress(DeployError, OSError, ValueError):
        touch(plan_build(load_export_artifact(export_dir), None).build_dir)


def _collect_logs(run_dir: Path) -> bytes:
    """Every log of the run (build, UART, stdout...) in one text, each under its name."""
    out = io.StringIO()
    if run_dir.is_dir():
        for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
            if path.suffix not in (".log", ".txt", ".out", ".err"):
                continue
            out.write(f"==> {path.relative_to(run_dir)} <==\n")
            out.write(path.read_text(encoding="utf-8", errors="replace"))
            out.write("\n")
    return out.getvalue().encode()


def _tar_dir(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return buf.getvalue()


def _jsonable(options: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in options.items()}


def _message(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {r.status_code}"


def _hint(r: httpx.Response) -> str | None:
    try:
        return str(r.json()["error"].get("hint") or "") or None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


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
