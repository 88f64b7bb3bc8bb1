"""Preflight: check the config and the tools the target needs before touching anything."""

from __future__ import annotations

from aidge_deploy.artifact import check_target
from aidge_deploy.errors import ConfigError, PreflightError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.profiling.capability import check_counter_request
from aidge_deploy.registry import RemoteResultTarget, get_deploy_target_class


class PreflightStage:
    name = "Preflight"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        manifest = ctx.artifact.manifest
        target = check_target(ctx.config, manifest, ctx.artifact.manifest_path)
        cls = get_deploy_target_class(target, ctx.config.backend_kind)
        if ctx.config.run_timeout <= 0:
            raise ConfigError(
                "run_timeout must be positive", hint="Use a timeout in seconds, e.g. 120."
            )
        if not issubclass(cls, RemoteResultTarget):  # a farm checks them at submit time
            check_counter_request(ctx.config.counters, cls, target, ctx.config.backend_kind)
        if ctx.config.power is not None:
            from aidge_deploy.power.monitors import preflight_checks

            bad = [c for c in preflight_checks(ctx.config, cls) if not c.ok]
            if bad:
                raise PreflightError(
                    f"Power monitor {ctx.config.power} is not usable: "
                    + "; ".join(f"{c.name}: {c.detail}" for c in bad),
                    hint="; ".join(c.hint for c in bad if c.hint) or "Run `aidge-deploy doctor`.",
                )
        instance = cls(ctx.config)
        instance.check_config()
        missing = [c for c in instance.preflight() if not c.ok]
        if missing:
            first = missing[0]
            names = ", ".join(c.name for c in missing)
            raise PreflightError(
                f"Missing what target {target}/{ctx.config.backend_kind} needs: {names} ({first.detail})",
                hint="; ".join(c.hint for c in missing if c.hint) or "Run `aidge-deploy doctor`.",
            )
