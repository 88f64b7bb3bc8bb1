"""The ``api`` backend: ``(target, "api")`` for every target a farm can hold.

``build_remote`` does the farm round trip: pack the export's sources, upload them (stored
once per content), submit the job (the board by name, else any board of the target, with
the measurement settings of ``DeployConfig`` and never a secret), follow its events at
``api_poll_interval`` (reported through the progress callback as the farm's stages), then
fetch the result. The ``DeployResult`` is the one the board host's own ``deploy()`` made —
outputs, timings, layers, memory and measurements with their original provenance — plus
``farm_job_id`` and ``farm_board``. The log (and the bundle, with ``report_dir``) is
downloaded into the run folder. Interrupting the client cancels the farm job.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, ClassVar

from aidge_deploy.errors import (
    ConfigError,
    DeployError,
    FarmError,
    FarmJobCancelled,
    FarmJobFailed,
    FarmTimeout,
    PipelineError,
)
from aidge_deploy.farm.client import FarmClient, password_from_env
from aidge_deploy.progress import ProgressKind, ProgressUpdate
from aidge_deploy.registry import (
    DeployTarget,
    RemoteBuildTarget,
    RemoteResultTarget,
    register_deploy_target,
    registered_targets,
)
from aidge_deploy.results import (
    BuildResult,
    BuildStatus,
    DeployContext,
    DeployResult,
    ExecutionResult,
)


class ApiDeployTarget(DeployTarget, RemoteBuildTarget, RemoteResultTarget):
    """Deploy through a board farm's HTTP API (``aidge-deploy farm serve``)."""

    description: ClassVar[str] = "board farm over HTTP: upload, queue, run on a farm board"

    def __init__(self, config=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config)
        self._result: DeployResult | None = None
        self._job: dict[str, Any] | None = None

    def check_config(self) -> None:
        c = self.config
        if not c.api_url:
            raise ConfigError(
                "backend 'api' needs api_url (the board farm's address)",
                hint="e.g. DeployConfig(backend='api', api_url='http://farm:8000/api', ...) or "
                "--api-url.",
            )
        if not c.api_username:
            raise ConfigError(
                "backend 'api' needs api_username", hint="Pass api_username (--api-username)."
            )
        if not (c.api_password or password_from_env()):
            raise ConfigError(
                "backend 'api' needs a password: set AIDGE_DEPLOY_API_PASSWORD",
                hint="export AIDGE_DEPLOY_API_PASSWORD=... (AIDGE_BENCHMARK_API_PASSWORD also "
                "works); the CLI prompts for it when run in a terminal.",
            )

    def prepare(self, ctx: DeployContext) -> None:
        ctx.log_dir.mkdir(parents=True, exist_ok=True)

    def build(self, ctx: DeployContext) -> BuildResult:  # pragma: no cover - build_remote runs
        return self.build_remote(ctx)

    def _report(self, ctx: DeployContext, message: str) -> None:
        if ctx.progress is not None:
            ctx.progress(ProgressUpdate("Build", ProgressKind.STATUS, message))

    def build_remote(self, ctx: DeployContext) -> BuildResult:
        from aidge_deploy.farm.archive import pack_export
        from aidge_deploy.farm.jobconfig import encode_config
        from aidge_deploy.farm.resultcodec import decode_result

        c = self.config
        password = c.api_password or password_from_env() or ""
        with FarmClient(str(c.api_url), timeout=c.api_request_timeout) as farm:
            farm.login(str(c.api_username), password)
            self._report(ctx, "packing and uploading the export")
            export = farm.upload_export(pack_export(ctx.export_dir), name=ctx.export_dir.name)
            job = farm.submit(
                export["id"],
                board=c.api_board_name,
                target=None if c.api_board_name else ctx.target,
                config=encode_config(c),
            )
            self._job = job
            try:
                final = self._follow(ctx, farm, job)
            except BaseException:
                # Ctrl-C, SIGTERM or a timeout here: the farm job must not run on for nobody
                with contextlib.suppress(DeployError):
                    farm.cancel(job["id"])
                raise
            log_path = self._download_log(ctx, farm, final)
            self._raise_if_failed(final, log_path, farm)
            result = decode_result(farm.result(final["id"]))
            if c.report_dir is not None:
                self._download_bundle(farm, final["id"], Path(c.report_dir))
        result.backend = "api"
        result.log_path = log_path
        result.farm_job_id = int(final["id"])
        result.farm_board = final.get("board")
        result.report_dir = c.report_dir
        self._result = result
        built = result.build
        return built or BuildResult(
            artifact_path=Path("farm"), mem_peaks=(), status=BuildStatus.BUILT, log=""
        )

    def _follow(self, ctx: DeployContext, farm: FarmClient, job: dict[str, Any]) -> dict[str, Any]:
        c = self.config
        deadline = time.monotonic() + c.api_job_timeout
        after = 0
        view = job
        last_state = ""
        while True:
            page = farm.events(job["id"], after=after, wait=max(0.1, c.api_poll_interval))
            view = page["job"]
            for event in page["events"]:
                after = max(after, int(event["id"]))
                if event["kind"] == "state" and event["state"] != last_state:
                    last_state = event["state"]
                    where = f" on {view['board']}" if view.get("board") else ""
                    self._report(ctx, f"farm job {view['id']}: {last_state}{where}")
                elif event["kind"] == "stage" and event["message"].startswith("start"):
                    self._report(
                        ctx, f"farm job {view['id']} on {view.get('board')}: {event['stage']}"
                    )
            if view["state"] in ("done", "failed", "cancelled"):
                return view
            if view["state"] == "queued" and "queue_position" in view:
                self._report(ctx, f"farm job {view['id']}: queued ({view['queue_position']} ahead)")
            if time.monotonic() > deadline:
                log_url = farm.root + view["urls"]["log"]
                raise FarmTimeout(
                    f"farm job {view['id']} did not finish in {c.api_job_timeout:g} s "
                    f"(it was {view['state']}); it is cancelled",
                    hint="Raise api_job_timeout, or pick a less busy board or target. "
                    f"Farm log: {log_url}",
                    job_id=int(view["id"]),
                    log_url=log_url,
                )

    def _download_log(
        self, ctx: DeployContext, farm: FarmClient, view: dict[str, Any]
    ) -> Path | None:
        try:
            data = farm.download(int(view["id"]), "log")
        except DeployError:
            return None
        path = ctx.log_dir / f"farm-job-{view['id']}.log"
        path.write_bytes(data)
        return path

    def _raise_if_failed(
        self, view: dict[str, Any], log_path: Path | None, farm: FarmClient
    ) -> None:
        state = view["state"]
        if state == "done":
            return
        err = view.get("error") or {}
        log_url = farm.root + view["urls"]["log"]
        where = f" on board {view['board']}" if view.get("board") else ""
        common: dict[str, Any] = {
            "job_id": int(view["id"]),
            "log_url": log_url,
            "remote_type": err.get("type"),
            "log_path": log_path,
        }
        if state == "cancelled":
            raise FarmJobCancelled(
                f"farm job {view['id']}{where} was cancelled",
                hint=f"Resubmit it if that was not intended. Log: {log_url}",
                **common,
            )
        hint = (err.get("hint") or "").strip()
        raise FarmJobFailed(
            f"farm job {view['id']} failed{where}: {err.get('message', 'no reason given')}",
            hint=(hint + " " if hint else "") + f"Farm log: {log_url}",
            **common,
        )

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

    def execute(self, ctx: DeployContext, build: BuildResult) -> ExecutionResult:
        result = self.remote_result(ctx)
        return result.execution or ExecutionResult(
            raw_output=result.log, exit_status=result.returncode, duration_s=0.0
        )

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult):  # type: ignore[no-untyped-def]
        raise PipelineError(
            "parse_output is not used with the api backend: the farm parsed the output",
            hint="This is a bug in the stage order; please report it.",
        )

    def remote_result(self, ctx: DeployContext) -> DeployResult:
        if self._result is None:
            raise FarmError("the farm job has not produced a result yet")
        return self._result


def register_api_targets() -> None:
    """``(target, "api")`` for every target registered with another backend."""
    for (target, backend), cls in list(registered_targets(load=False).items()):
        if backend == "api" or (target, "api") in registered_targets(load=False):
            continue
        api_cls = type(
            f"{cls.__name__}Api",
            (ApiDeployTarget,),
            {
                "__module__": __name__,
                "__qualname__": f"{cls.__name__}Api",
                "timing_provenance": cls.timing_provenance,
                "counter_provenance": cls.counter_provenance,
                "cycle_metric": cls.cycle_metric,
                "cycle_counter_bits": cls.cycle_counter_bits,
                "hardware_model_module": cls.hardware_model_module,
                "description": ApiDeployTarget.description,
            },
        )
        register_deploy_target(target, "api")(api_cls)


register_api_targets()

__all__ = ["ApiDeployTarget", "register_api_targets"]
