"""Report: write the result bundle of the run when ``DeployConfig.report_dir`` is set.

Runs after Assemble, so the bundle holds exactly the ``DeployResult`` the caller gets, and
records where it went (``ctx.report_paths`` and ``DeployResult.report_dir``). The folder
was checked in Preflight; if writing still fails, the ``ReportError`` carries the run's
result (``.result``) and log, so nothing measured is lost. The profile
table is CSV unless ``config.extra["report_format"]`` is ``"json"``.
"""

from __future__ import annotations

from aidge_deploy.errors import ConfigError, ReportError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.progress import ProgressKind
from aidge_deploy.report.bundle import write_bundle
from aidge_deploy.report.metadata import target_hardware_facts
from aidge_deploy.report.summary import ProfileFormat
from aidge_deploy.targetcaps import target_caps


class ReportStage:
    name = "Report"

    def __init__(self, profile_format: ProfileFormat | None = None) -> None:
        self.profile_format = profile_format

    def should_skip(self, ctx: PipelineContext) -> bool:
        return ctx.config.report_dir is None

    def _format(self, ctx: PipelineContext) -> ProfileFormat:
        if self.profile_format is not None:
            return self.profile_format
        raw = ctx.config.extra.get("report_format", ProfileFormat.CSV.value)
        try:
            return ProfileFormat(str(raw).lower())
        except ValueError:
            raise ConfigError(
                f"Unknown report_format {raw!r}",
                hint=f"Use one of: {', '.join(f.value for f in ProfileFormat)}.",
            ) from None

    def run(self, ctx: PipelineContext) -> None:
        report_dir = ctx.config.report_dir
        if report_dir is None:  # should_skip guards this; kept for the type checker
            return
        result = ctx.deploy_result
        ctx.report(self.name, ProgressKind.STATUS, f"writing {report_dir}")
        try:
            bundle = write_bundle(
                report_dir,
                result,
                ctx.config,
                ctx.artifact,
                hardware=target_hardware_facts(
                    ctx.resolved_target,
                    this_machine=target_caps(ctx.resolved_target).this_machine,
                ),
                binary=ctx.binary_info,
                log_path=ctx.executed.log_path,
                stage_durations_ms=ctx.stage_durations_ms,
                profile_format=self._format(ctx),
                overwrite=ctx.config.report_overwrite,
            )
        except ReportError as exc:
            # the run itself succeeded: its results travel with the error, and its log is named
            exc.result = result
            if exc.log_path is None:
                exc.log_path = ctx.executed.log_path
            raise
        ctx.report_paths.extend(bundle.files)
        result.report_dir = bundle.path
