"""One farm job on one board, in a thread of the agent and a folder of its own.

Lock the place (labgrid ``AcquirePlace`` for the job's reservation), claim the job, fetch
and check the export, run our own ``deploy()`` in a child process (``jobprocess``, forked
by ``forkserver``) with the board's lab options, stream its stage events and logs, free the
board as soon as the deploy has ended — end every process of the job (``reaper``), cancel
the reservation, unlock the place, in every case — then upload result, bundle and log and
report the job's end with the time each phase took.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from aidge_deploy.errors import DeployError
from aidge_deploy.farm.agentcache import touch
from aidge_deploy.farm.agentlink import LabgridThread, ServiceClient, response_message
from aidge_deploy.farm.archive import check_archive, extract_archive
from aidge_deploy.farm.coordinator import free_board
from aidge_deploy.farm.forkserver import Runner, Runners
from aidge_deploy.farm.models import (
    ClaimAnswer,
    EventsAnswer,
    EventsRequest,
    FinishRequest,
    JobOffer,
    StageEvent,
)
from aidge_deploy.farm.reaper import end_job_processes
from aidge_deploy.farm.states import JobState
from aidge_deploy.lab import LabBoard

log = logging.getLogger("aidge_deploy.farm.agent")

#: how often a running job's logs are sent to the service, so its page shows them growing (s)
LOG_UPLOAD_INTERVAL = 1.0
#: a job's progress events are sent together when they come within this many seconds
EVENT_BATCH_S = 0.2


class JobHost(Protocol):
    """What a job asks of the agent that runs it (``agent.Agent``)."""

    service: ServiceClient
    labgrid: LabgridThread | None
    runners: Runners
    built_exports: Path
    #: carried by every process the agent starts (``reaper``)
    mark: str

    @property
    def work_dir(self) -> Path: ...

    @property
    def job_nice(self) -> int: ...

    def finished(self, job_id: int) -> None: ...

    def board_freed(self) -> None: ...


class JobRun:
    """One job on one board, in its own thread and folder."""

    def __init__(self, agent: JobHost, offer: JobOffer, board: LabBoard) -> None:
        self.agent = agent
        self.offer = offer
        self.id = offer.id
        self.board = board.name
        self.lab_board = board
        self.token = offer.token
        self.dir = agent.work_dir / "jobs" / str(self.id)
        self.lease = 0
        self.proc: Runner | None = None
        self.cancelled = threading.Event()
        self.cancel_reason = ""
        #: stopped by the agent itself (stopping), not by the job's owner
        self.interrupted = False
        #: the board was unlocked here (and the reservation cancelled): not when the place
        #: holds another reservation than the job's own, as after a coordinator restart the
        #: service's re-lock does — the service, which knows that token, unlocks it then
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
                log.warning("job %s: claim refused: %s", self.id, response_message(r))
                return
            self.lease = ClaimAnswer.model_validate(r.json()).lease
            # the one line that says this job got the board (the race test reads it): no
            # build, flash or run of a job happens without it
            log.info("job %s: claimed on %s: building", self.id, self.board)
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
                self.released = labgrid.call(
                    lambda: free_board(labgrid.link, self.token, self.board)
                )
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
            "nice": self.agent.job_nice,
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
            raise DeployError(f"cannot fetch the export: {response_message(r)}")
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
            log.warning("job %s: finish refused: %s", self.id, response_message(r))


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


__all__ = ["EVENT_BATCH_S", "LOG_UPLOAD_INTERVAL", "JobHost", "JobRun"]
