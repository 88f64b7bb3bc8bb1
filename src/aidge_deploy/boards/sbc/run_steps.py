"""The run steps of an SSH board: execute the program there, then parse what it printed.

Why this module exists: running on a board means wrapping the program in ``timeout`` and the
``perf_run`` launcher (in a container for ``ssh_docker``), turning the launcher's report and
the exit status into the same typed errors as on the host, and never leaving a container
behind. Mixed into ``SbcSshTarget`` (``base``).
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import shlex
from collections.abc import Sequence

from aidge_deploy.boards.container import BuildLocation, container_name, docker_failure
from aidge_deploy.boards.sbc.session import SbcSession
from aidge_deploy.connections.local_process import ProcessRun, describe_exit
from aidge_deploy.errors import DeployError, ExecutionError
from aidge_deploy.profiling.native import PerfRunReport
from aidge_deploy.profiling.native.wrap import split_report, wrap_with_launcher
from aidge_deploy.protocols.base import ProtocolResult
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.results import BuildResult, DeployContext, ExecutionResult

_log = logging.getLogger(__name__)


class SbcRunSteps(SbcSession):
    """``execute``, ``run_program`` and ``parse_output`` of ``SbcSshTarget``."""

    def execute(self, ctx: DeployContext, build: BuildResult) -> ExecutionResult:
        return self.run_program(ctx, build)[0]

    def run_program(
        self,
        ctx: DeployContext,
        build: BuildResult,
        *,
        events: Sequence[str] = (),
        log_name: str = "run.log",
    ) -> tuple[ExecutionResult, PerfRunReport | None]:
        """Run the program on the board (under the launcher, counting ``events`` if given)."""
        layout = self.layout
        program = self._program or str(build.artifact_path)
        launcher = self._launcher.path if self._launcher is not None else None
        timeout = self.run_timeout_s
        log_path = ctx.log_dir / log_name
        name: str | None = None
        if self.uses_container:
            name = container_name()
            in_launcher = (
                posixpath.join("/aidge-tools", posixpath.basename(launcher)) if launcher else None
            )
            script = wrap_with_launcher(in_launcher, layout.container_path(program), events)
            # the export's folder when it was uploaded, the binary's folder for cross builds
            cwd = posixpath.dirname(program) if self.config.ssh.cross_compile else layout.src
            command = self._container_command(
                script, workdir=layout.container_path(cwd), name=name, perf_events=bool(events)
            )
            where = f"in container {self.config.docker.image} on {self.conn.target}"
        else:
            cwd = layout.src if not self.config.ssh.cross_compile else posixpath.dirname(program)
            command = f"cd {shlex.quote(cwd)} && {wrap_with_launcher(launcher, program, events)}"
            where = f"on {self.conn.target}"
        self._report("Execute", f"running {posixpath.basename(program)} {where}")
        try:
            result = self.conn.run(command, timeout_s=timeout, log_path=log_path)
        except (ExecutionError, KeyboardInterrupt):  # KeyboardInterrupt: also RunInterrupted
            if name is not None:
                self._remove_container(name)
            raise
        if name is not None and (result.timed_out or result.exit_status is None):
            self._remove_container(name)
        stderr, report = split_report(result.stderr)
        if report is None and self.uses_container and not result.timed_out:
            error = docker_failure(
                result.exit_status,
                stderr,
                image=str(self.config.docker.image),
                where=f"on {self.conn.target}",
                doing="running the program",
                log_path=log_path,
            )
            if error is not None:
                raise error
        returncode = result.exit_status
        signal_number: int | None = None
        peak: int | None = None
        if report is not None:
            returncode, signal_number, peak = report.exit_code, report.signal, report.peak_rss_bytes
        elif returncode is not None and returncode > 128 and not result.timed_out:
            signal_number = returncode - 128  # sh convention when no launcher report exists
            returncode = None
        run = ProcessRun(
            argv=(command,),
            returncode=returncode,
            signal=signal_number,
            stdout=result.stdout,
            stderr=stderr,
            duration_s=result.duration_s,
            timed_out=result.timed_out,
            peak_rss_bytes=peak,
            stdout_path=log_path,
            stderr_path=log_path,
        )
        error = describe_exit(run, timeout)
        if error is not None:
            error.message = f"{error.message} ({where})"
            raise error
        execution = ExecutionResult(
            raw_output=result.stdout,
            exit_status=returncode,
            duration_s=result.duration_s,
            log_path=log_path,
            stderr=stderr,
            signal=signal_number,
            peak_rss_bytes=peak,
        )
        return execution, report

    def parse_output(self, ctx: DeployContext, execution: ExecutionResult) -> ProtocolResult:
        protocol = get_protocol(ctx.artifact.manifest.protocol)
        try:
            parsed = protocol.parse(execution.raw_output, ctx.artifact.manifest)
        except DeployError as exc:
            if exc.log_path is None:
                exc.log_path = execution.log_path
            raise
        notices = [f"built {self._where_built()}"]
        if self._launcher is not None and self._launcher.unavailable_reason:
            notices.append(f"peak RSS unavailable: {self._launcher.unavailable_reason}")
        return dataclasses.replace(parsed, notices=(*parsed.notices, *notices))

    def _where_built(self) -> str:
        target = self.conn.target if self._conn is not None else "the board"
        if self._location == BuildLocation.LOCAL_CROSS:
            return f"locally with {self.toolchain.cxx} (local-cross)"
        if self._location == BuildLocation.CONTAINER:
            return f"in container {self.config.docker.image} on {target} (container)"
        return f"on {target} (board)"
