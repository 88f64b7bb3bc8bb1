"""The ``api`` backend: a whole deploy on a board farm, as one remote call.

``deploy()`` hands an ``api`` config here (``FarmBackend.deploy``) and no local stage
runs: the export's sources are packed and uploaded (stored once per content), the job is
submitted (the board by name, else any board of the target, with the measurement settings
of ``DeployConfig`` and never a secret), followed through its events — the board host's
own stages are reported as progress under their names — and its result fetched. The
``DeployResult`` is the one the board host's own ``deploy()`` made (outputs, timings,
layers, memory and measurements with their original provenance) plus ``farm_job_id`` and
``farm_board``. The log (and the bundle, with ``report_dir``) is downloaded into the run
folder. Interrupting the client cancels the farm job.

Registered for every target (``registry.register_remote_backend``) through the
``aidge_deploy.remote_backends`` entry point: the core never imports the farm.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from aidge_deploy.errors import (
    ConfigError,
    DeployError,
    FarmError,
    FarmJobBug,
    FarmJobCancelled,
    FarmJobFailed,
    FarmTimeout,
)
from aidge_deploy.exportspec import Export
from aidge_deploy.farm.client import FarmClient, credentials_from_env
from aidge_deploy.farm.models import CampaignTag, JobView
from aidge_deploy.farm.states import FailureClass, JobState
from aidge_deploy.progress import ProgressCallback, ProgressKind, ProgressUpdate
from aidge_deploy.registry import RemoteBackend
from aidge_deploy.results import DeployResult

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig

#: the errors of a board host that are bugs of aidge-deploy there (exit 3 here as there)
INTERNAL_TYPES = frozenset({"InternalError", "PipelineError"})

#: the progress stage under which the farm's own steps (upload, queue) are reported
FARM_STAGE = "Farm"


class FarmBackend(RemoteBackend):
    """Deploy through a board farm's HTTP API (``aidge-deploy farm serve``)."""

    description: ClassVar[str] = "board farm over HTTP: upload, queue, run on a farm board"

    def run_needs(self) -> list[str]:
        return [
            "a board farm's address (--api-url) with a board of the target",
            "a farm user (--api-username and AIDGE_DEPLOY_API_PASSWORD, or an API token in "
            "AIDGE_DEPLOY_API_TOKEN)",
        ]

    def check_config(self) -> None:
        c = self.config.farm
        if not c.url:
            raise ConfigError(
                "backend 'api' needs api_url (the board farm's address)",
                hint="e.g. DeployConfig(backend='api', api_url='http://farm:8000/api', ...) or "
                "--api-url.",
            )
        if credentials_from_env().token:
            return  # a long-lived API token stands for user and password
        if not c.username:
            raise ConfigError(
                "backend 'api' needs api_username (or an API token in AIDGE_DEPLOY_API_TOKEN)",
                hint="Pass api_username (--api-username).",
            )
        if not (c.password or credentials_from_env().password):
            raise ConfigError(
                "backend 'api' needs a password: set AIDGE_DEPLOY_API_PASSWORD (or an API "
                "token in AIDGE_DEPLOY_API_TOKEN)",
                hint="export AIDGE_DEPLOY_API_PASSWORD=... (AIDGE_BENCHMARK_API_PASSWORD also "
                "works); the CLI prompts for it when run in a terminal.",
            )

    def deploy(
        self,
        artifact: Export,
        *,
        work_dir: Path,
        progress: ProgressCallback | None = None,
    ) -> DeployResult:
        run = _FarmRun(self, artifact, work_dir, progress)
        return run.go()


def open_farm(config: DeployConfig) -> FarmClient:
    """A client of ``config``'s farm, checked to be one ("not a farm at this URL" before
    any credential is sent) and logged in: with the API token of the environment, else
    with ``api_username`` and the password (never shown)."""
    options = config.farm
    farm = FarmClient(str(options.url), timeout=options.request_timeout)
    try:
        farm.health()
        creds = credentials_from_env()
        if creds.token:
            farm.use_token(creds.token)
        else:
            farm.login(str(options.username), options.password or creds.password or "")
    except BaseException:
        farm.close()
        raise
    return farm


def submit_export(farm: FarmClient, export_dir: Path, config: DeployConfig, target: str) -> JobView:
    """Pack and upload the export in ``export_dir`` (stored once per content) and queue its
    job: on the board ``config.farm.board_name``, else on any board of ``target``, with the
    measurement settings of ``config`` and never a secret."""
    from aidge_deploy.farm.archive import pack_export
    from aidge_deploy.farm.jobconfig import encode_config

    export = farm.upload_export(pack_export(export_dir), name=export_dir.name)
    options = config.farm
    campaign = options.campaign
    return farm.submit(
        export.id,
        board=options.board_name,
        target=None if options.board_name else target,
        config=encode_config(config),
        campaign=None
        if campaign is None
        else CampaignTag(
            id=campaign.id,
            name=campaign.name,
            cell=campaign.cell,
            cells=campaign.cells,
            step=campaign.step,
            steps=campaign.steps,
        ),
    )


class _FarmRun:
    """One deploy on the farm: its client, its job and what it reports."""

    def __init__(
        self,
        backend: FarmBackend,
        artifact: Export,
        work_dir: Path,
        progress: ProgressCallback | None,
    ) -> None:
        self.config = backend.config
        self.target = backend.target_name
        self.artifact = artifact
        self.work_dir = work_dir
        self.progress = progress
        self._stage: str | None = None

    def report(self, stage: str, kind: ProgressKind, message: str = "") -> None:
        if self.progress is not None:
            self.progress(ProgressUpdate(stage, kind, message))

    def status(self, message: str) -> None:
        self.report(FARM_STAGE, ProgressKind.STATUS, message)

    def go(self) -> DeployResult:
        from aidge_deploy.farm.resultcodec import decode_result

        c = self.config
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with open_farm(c) as farm:
            self.report(FARM_STAGE, ProgressKind.START)
            self.status("packing and uploading the export")
            job = submit_export(farm, Path(self.artifact.path), c, self.target)
            try:
                final = self._follow(farm, job)
            except BaseException:
                # Ctrl-C, SIGTERM or a timeout here: the farm job must not run on for nobody
                with contextlib.suppress(DeployError):
                    farm.cancel(job.id)
                raise
            log_path = self._download_log(farm, final)
            self._raise_if_failed(final, log_path, farm)
            result = decode_result(farm.result(final.id))
            if c.report_dir is not None:
                self._download_bundle(farm, final.id, Path(c.report_dir))
            self.report(FARM_STAGE, ProgressKind.DONE)
        result.backend = "api"
        result.log_path = log_path
        result.farm_job_id = final.id
        result.farm_board = final.board
        result.report_dir = c.report_dir
        return result

    def _follow(self, farm: FarmClient, job: JobView) -> JobView:
        """Follow the job's events until it ends; its last view. Each poll is retried
        while the service restarts (``FarmClient``): the run re-attaches to its job."""
        c = self.config.farm
        deadline = time.monotonic() + c.job_timeout
        after = 0
        last_state = ""
        while True:
            page = farm.events(job.id, after=after, wait=max(0.1, c.poll_interval))
            view = page.job
            for event in page.events:
                after = max(after, event.id)
                if event.kind == "state" and event.state and event.state != last_state:
                    last_state = event.state
                    where = f" on {view.board}" if view.board else ""
                    self.status(f"job {view.id}: {last_state}{where}")
                elif event.kind == "stage" and event.stage:
                    self._remote_stage(event.stage, event.message)
            if view.state.terminal:
                self._end_stage()
                return view
            if view.state == JobState.QUEUED and view.queue_position is not None:
                self.status(f"job {view.id}: queued ({view.queue_position} ahead)")
            if time.monotonic() > deadline:
                log_url = farm.root + view.urls.log
                raise FarmTimeout(
                    f"farm job {view.id} did not finish in {c.job_timeout:g} s "
                    f"(it was {view.state}); it is cancelled",
                    hint="Raise --api-job-timeout (FarmOptions.job_timeout), or pick a less busy board or target. "
                    f"Farm log: {log_url}",
                    job_id=view.id,
                    log_url=log_url,
                )

    def _remote_stage(self, stage: str, message: str) -> None:
        """A stage event of the board host's deploy, reported under the stage's own name."""
        word, _, rest = message.partition(" ")
        try:
            kind = ProgressKind(word)
        except ValueError:
            kind, rest = ProgressKind.STATUS, message
        if kind is ProgressKind.START:
            self._end_stage()
            self._stage = stage
        self.report(stage, kind, rest)
        if kind in (ProgressKind.DONE, ProgressKind.SKIP) and self._stage == stage:
            self._stage = None

    def _end_stage(self) -> None:
        if self._stage is not None:
            self.report(self._stage, ProgressKind.DONE)
            self._stage = None

    def _download_log(self, farm: FarmClient, view: JobView) -> Path | None:
        try:
            data = farm.download(view.id, "log")
        except DeployError:
            return None
        path = self.work_dir / f"farm-job-{view.id}.log"
        path.write_bytes(data)
        return path

    def _raise_if_failed(self, view: JobView, log_path: Path | None, farm: FarmClient) -> None:
        if view.state != JobState.DONE:
            raise job_error(view, farm.root, log_path)

    def _download_bundle(self, farm: FarmClient, job_id: int, dest: Path) -> None:
        """The board host's result bundle, extracted into ``dest`` (members checked)."""
        from aidge_deploy.farm.archive import extract_archive

        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / ".farm-bundle.tar.gz"
        tmp.write_bytes(farm.download(job_id, "bundle"))
        try:
            extract_archive(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)


def job_error(view: JobView, root: str, log_path: Path | None = None) -> FarmError:
    """The typed error of a job that did not end done (``view``: its JSON, ``root``: the
    farm's address): cancelled, or failed — saying whose failure it was and after how
    many attempts (``FailureClass``)."""
    err = view.error
    log_url = root + view.urls.log
    where = f" on board {view.board}" if view.board else ""
    common: dict[str, Any] = {
        "job_id": view.id,
        "log_url": log_url,
        "remote_type": err.type if err else None,
        "log_path": log_path,
    }
    if view.state == JobState.CANCELLED:
        return FarmJobCancelled(
            f"farm job {view.id}{where} was cancelled",
            hint=f"Resubmit it if that was not intended. Log: {log_url}",
            **common,
        )
    hint = (err.hint if err else "").strip()
    failed = FarmJobBug if err is not None and err.type in INTERNAL_TYPES else FarmJobFailed
    return failed(
        f"farm job {view.id} failed{where}{_whose(view)}: "
        f"{err.message if err else 'no reason given'}",
        hint=(hint + " " if hint else "") + f"Farm log: {log_url}",
        failure_class=None if view.failure_class is None else view.failure_class.value,
        attempts=view.attempt,
        **common,
    )


def _whose(view: JobView) -> str:
    """Whose failure it was, as the farm classified it (``FailureClass``)."""
    if view.failure_class is FailureClass.INFRASTRUCTURE:
        runs = "attempt" if view.attempt == 1 else "attempts"
        return (
            f", an infrastructure failure (the lab's, not your job's) after {view.attempt} {runs}"
        )
    if view.failure_class is FailureClass.USER:
        return ", a user failure (your job's: the farm does not retry it)"
    return ""


__all__ = ["FARM_STAGE", "FarmBackend", "job_error", "open_farm", "submit_export"]
