"""Preflight: check the config and the tools the target needs before touching anything.

``check_deploy_config`` is the same check without an export: ``aidge-deploy profile`` calls
it before exporting, so a bad value, a target typo, a missing backend or connection option,
an unusable ``--report`` folder or a missing tool costs nothing.
"""

from __future__ import annotations

from aidge_deploy.artifact import check_target
from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import PreflightError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.profiling.capability import check_counter_request
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
    if config.power is not None:
        from aidge_deploy.power.monitors import preflight_checks

        bad = [c for c in preflight_checks(config, cls) if not c.ok]
        if bad:
            raise PreflightError(
                f"Power monitor {config.power} is not usable: "
                + "; ".join(f"{c.name}: {c.detail}" for c in bad),
                hint="; ".join(c.hint for c in bad if c.hint) or "Run `aidge-deploy doctor`.",
            )
    instance = get_deploy_target(target, config.backend_kind, config)
    instance.check_config()
    if config.report_dir is not None:
        check_report_dir(config.report_dir, overwrite=config.report_overwrite)
    missing = [c for c in instance.preflight() if not c.ok]
    if missing:
        first = missing[0]
        names = ", ".join(c.name for c in missing)
        raise PreflightError(
            f"Missing what target {target}/{config.backend_kind} needs: {names} ({first.detail})",
            hint="; ".join(c.hint for c in missing if c.hint) or "Run `aidge-deploy doctor`.",
        )
    return instance


class PreflightStage:
    name = "Preflight"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        manifest = ctx.artifact.manifest
        target = check_target(ctx.config, manifest, ctx.artifact.manifest_path)
        check_deploy_config(ctx.config, target)
