"""Preflight: check the config and the tools the target needs before touching anything.

``check_deploy_config`` is the same check without an export: ``aidge-deploy profile`` calls
it before exporting, so a bad value, a target typo, a missing backend or connection option,
an unusable ``--report`` folder or a missing tool costs nothing.
"""

from __future__ import annotations

from aidge_deploy.artifact import check_target
from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ConfigError, PreflightError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.profiling.capability import CounterCapableTarget, check_counter_request
from aidge_deploy.readiness import ToolCheck, missing, missing_text
from aidge_deploy.registry import (
    DeployTarget,
    RemoteBackend,
    get_deploy_target,
    get_deploy_target_class,
)
from aidge_deploy.report.destination import check_report_dir


def check_deploy_config(config: DeployConfig, target: str) -> DeployTarget | RemoteBackend:
    """Everything about a run that can be checked before it starts; the target's
    implementation (a local target, or the remote backend that runs the whole deploy).

    Raises ``ConfigError`` (values, unknown target with a did-you-mean, a backend the target
    has not, connection options the backend needs, counters), ``ReportError`` (the report
    folder) or ``PreflightError`` (tools missing on this machine).
    """
    config.check_values()
    cls = get_deploy_target_class(target, config.backend_kind)
    if issubclass(cls, DeployTarget):  # a remote backend checks them where they are counted
        check_counter_request(config.counters, cls, target, config.backend_kind)
        if config.counters and issubclass(cls, CounterCapableTarget):
            _require(cls.counter_needs(), f"Counting on {target}/{config.backend_kind}")
    if config.power is not None:
        from aidge_deploy.power.monitors import preflight_checks

        _require(preflight_checks(config, cls), f"Power monitor {config.power}")
    instance = get_deploy_target(target, config.backend_kind, config)
    instance.check_config()
    if config.report_dir is not None:
        check_report_dir(config.report_dir, overwrite=config.report_overwrite)
    _require(instance.preflight(), f"Target {target}/{config.backend_kind}")
    return instance


def _require(checks: list[ToolCheck], what: str) -> None:
    """``PreflightError`` naming what is missing and how to get it, in the words of
    ``doctor``'s row for it (``readiness.missing_text``)."""
    if missing(checks):
        absent, how = missing_text(checks)
        raise PreflightError(f"{what} is missing {absent}", hint=how)


class PreflightStage:
    name = "Preflight"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        manifest = ctx.artifact.manifest
        target = check_target(ctx.config, manifest, ctx.artifact.manifest_path)
        app = manifest.application_config or {}
        if app.get("heterogeneous_deploy") or app.get("apss_linux"):
            raise ConfigError(
                f"{ctx.artifact.path} is a heterogeneous (two-core) export, and aidge-deploy "
                "builds and flashes one program on one core: it would run only part of it",
                hint="Export for one core (ExportApplication(heterogeneous_deploy=False, "
                "apss_linux=False)).",
            )
        check_deploy_config(ctx.config, target)
