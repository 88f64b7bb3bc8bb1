"""``deploy()``: the one entry point, as the deploy guide documents it."""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

from aidge_deploy import runcontrol
from aidge_deploy.artifact import check_target, load_export_artifact
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.config import DeployConfig
from aidge_deploy.configcheck import check_run, timed_iterations
from aidge_deploy.errors import ConfigError, InternalError
from aidge_deploy.exportspec import Export
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.pipeline.default import build_default_pipeline
from aidge_deploy.pipeline.runner import PipelineRunner, Stage
from aidge_deploy.progress import ProgressCallback
from aidge_deploy.registry import DeployTarget, hardware_model_of, remote_backend
from aidge_deploy.results import DeployResult
from aidge_deploy.runcontrol import RunControl, RunInterrupted

if TYPE_CHECKING:  # an ExportArtifact is accepted, never needed: a folder is read without
    # importing aidge_core
    from collections.abc import Sequence

    from aidge_core.export_utils import ExportArtifact


def new_run_dir(target: str) -> Path:
    """A fresh folder for one run's logs: ``<cache>/runs/<UTC time>-<target>-<id>``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = default_cache_root() / "runs" / f"{stamp}-{target}-{secrets.token_hex(3)}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def deploy(
    export: ExportArtifact | Export | str | os.PathLike[str],
    config: DeployConfig | None = None,
    *,
    progress: ProgressCallback | None = None,
    work_dir: Path | None = None,
    control: RunControl | None = None,
    pipeline: PipelineRunner | Sequence[Stage] | None = None,
) -> DeployResult:
    """Build (if needed), transfer or flash, run, capture and parse one export.

    ``export`` is an ``ExportArtifact`` or a directory holding ``.aidge-export.json``.
    Runtime defaults missing from ``config`` are hydrated from the manifest; the caller's
    config object is not modified. Logs of the run stay in ``work_dir`` (a new folder under
    the cache by default) whatever happens; errors carry their path. A run that fails
    before writing any log leaves no empty folder behind.

    ``control`` (default: the caller's current one, else a new one) lets another thread
    stop the run with ``control.cancel()``; ``deploy`` then raises ``RunInterrupted`` once
    every process, container and remote process of the run is stopped (see ``runcontrol``).

    ``pipeline`` replaces the default pipeline (``pipeline.default.build_default_pipeline``)
    with a runner, or a list of stages, of the caller's: a stage inserted, replaced or left
    out. A backend that runs the whole deploy elsewhere (``api``) runs no local pipeline
    and refuses one.
    """
    if config is None:
        config = DeployConfig()
    if not isinstance(config, DeployConfig):
        raise ConfigError(
            f"config must be a DeployConfig, got {type(config).__name__}",
            hint="Build it with aidge_deploy.DeployConfig(target=..., backend=...).",
        )
    runner = _runner(pipeline)
    remote = remote_backend(config.backend_kind)
    if remote is not None and pipeline is not None:
        raise ConfigError(
            f"backend {config.backend_kind!r} runs the whole deploy elsewhere: it runs no "
            "local pipeline",
            hint="Leave pipeline= out with this backend.",
        )
    control = control or runcontrol.current() or RunControl()
    with control.activate():
        artifact = load_export_artifact(export)
        run_config = dataclasses.replace(config)
        created = work_dir is None or not Path(work_dir).exists()
        run_dir = Path(work_dir) if work_dir is not None else new_run_dir(artifact.manifest.target)
        run_dir.mkdir(parents=True, exist_ok=True)
        control.log_path = run_dir
        if remote is not None:  # the whole deploy runs elsewhere: no local stage
            try:
                return _deploy_remote(artifact, run_config, run_dir, progress)
            except BaseException as exc:
                _forget_empty(exc, control, run_dir, created)
                raise
        ctx = PipelineContext(
            config=run_config, artifact=artifact, work_dir=run_dir, progress=progress
        )
        try:
            runner.run(ctx)
        except BaseException as exc:
            _forget_empty(exc, control, run_dir, created)
            raise
        finally:
            with runcontrol.shielded():  # runs after a cancellation too
                if ctx.power_monitor is not None and not ctx.power_monitor_closed:
                    ctx.power_monitor.close()
                if ctx.target is not None and ctx.deploy_context is not None:
                    ctx.target.cleanup(ctx.deploy_context)
        return ctx.deploy_result


def _runner(pipeline: PipelineRunner | Sequence[Stage] | None) -> PipelineRunner:
    if pipeline is None:
        return build_default_pipeline()
    if isinstance(pipeline, PipelineRunner):
        return pipeline
    stages = list(pipeline)
    strays = [s for s in stages if not isinstance(s, Stage)]
    if strays:
        raise ConfigError(
            f"pipeline= holds {strays[0]!r}, which is not a stage",
            hint="A stage has a name, should_skip(ctx) and run(ctx) (pipeline.runner.Stage).",
        )
    return PipelineRunner(stages)


def _deploy_remote(
    artifact: Export, config: DeployConfig, run_dir: Path, progress: ProgressCallback | None
) -> DeployResult:
    """Hand the deploy to the remote backend of ``config`` (checked first, as Preflight
    checks a local one)."""
    target = check_target(
        config,
        artifact.manifest,
        artifact.manifest_path,
        hardware_model_of(config.target) if config.target else None,
    )
    backend, _ = check_run(config, target, iterations=timed_iterations(artifact.manifest))
    if isinstance(backend, DeployTarget):  # remote_backend() said it was a remote one
        raise InternalError(f"backend {config.backend_kind!r} is not a remote backend")
    return backend.deploy(artifact, work_dir=run_dir, progress=progress)


def _forget_empty(exc: BaseException, control: RunControl, run_dir: Path, created: bool) -> None:
    """After a failed run: drop its folder if nothing was written there."""
    removed = created and _remove_if_empty(run_dir)
    if removed:
        control.log_path = None
    if isinstance(exc, RunInterrupted):
        exc.log_path = None if removed else run_dir


def _remove_if_empty(path: Path) -> bool:
    """Remove ``path`` if nothing was written in it (a run stopped before its first log)."""
    try:
        path.rmdir()
    except OSError:
        return False
    return True
