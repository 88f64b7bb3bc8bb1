"""Everything about a run that can be checked before it starts, without an export.

Preflight runs it on every deploy; ``aidge-deploy profile``, ``validate``, a campaign's
preflight and a remote deploy run it before exporting or submitting anything, so a bad
value, a target typo, a missing backend or connection option, an unusable ``--report``
folder or a missing tool costs nothing. It lives here, below the pipeline and the CLI
that both use it, and returns the implementation it resolved: a run builds it once.
"""

from __future__ import annotations

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import PreflightError
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
    """Check ``config`` for ``target``; the target's implementation (a local target, or the
    remote backend that runs the whole deploy), instantiated with ``config``.

    Raises ``ConfigError`` (values, unknown target with a did-you-mean, a backend the target
    has not, connection options the backend needs, counters), ``ReportError`` (the report
    folder) or ``PreflightError`` (tools missing on this machine).
    """
    config.check_values()
    cls = get_deploy_target_class(target, config.backend_kind)
    if issubclass(cls, DeployTarget):  # a remote backend checks them where they are counted
        check_counter_request(config.counters, cls, target, config.backend_kind)
        if config.counters and issubclass(cls, CounterCapableTarget):
            require(cls.counter_needs(), f"Counting on {target}/{config.backend_kind}")
    if config.power is not None:
        from aidge_deploy.power.monitors import preflight_checks

        require(preflight_checks(config, cls), f"Power monitor {config.power}")
    instance = get_deploy_target(target, config.backend_kind, config)
    instance.check_config()
    if config.report_dir is not None:
        check_report_dir(config.report_dir, overwrite=config.report_overwrite)
    require(instance.preflight(), f"Target {target}/{config.backend_kind}")
    return instance


def require(checks: list[ToolCheck], what: str) -> None:
    """``PreflightError`` naming what is missing and how to get it, in the words of
    ``doctor``'s row for it (``readiness.missing_text``)."""
    if missing(checks):
        absent, how = missing_text(checks)
        raise PreflightError(f"{what} is missing {absent}", hint=how)


__all__ = ["check_deploy_config", "require"]
