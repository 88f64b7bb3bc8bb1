"""The lifecycle of a Linux board reached over SSH: ``ssh`` and ``ssh_docker`` backends.

Why this module exists: every Linux board (Raspberry Pi, Jetson, K230, a host over SSH) is
deployed the same way; only the hardware identity differs (``targets`` registers one class
per board). The pipeline calls, in order:

* ``prepare``: check the config, connect (host key verified, key auth), find the remote
  layout (``layout``), and for ``ssh_docker`` check the image and decide where to build;
* ``build_remote`` (default): upload the export (only changed files) and build it on the
  board (or in the container) unless the stamped build is already there; or ``build``
  (``cross_compile=True``): build here with the board's cross toolchain;
* ``transfer``: upload the cross-built binary (unchanged: nothing sent) and provision the
  ``perf_run`` launcher that measures peak RSS on the board;
* ``execute``: run the program under ``timeout`` (and the launcher), in a container for
  ``ssh_docker``; ``parse_output``: the manifest's protocol parser, as on the host;
* ``cleanup``: the clean-up policy of ``layout``; containers never outlive a run.

The steps live in ``build_steps`` (build, transfer) and ``run_steps`` (execute, parse) on the
shared state of ``session``; the SSH settings come from ``settings``. This module assembles
them and owns ``prepare`` and ``cleanup``.
"""

from __future__ import annotations

import logging
import shlex
from typing import Any, ClassVar

from aidge_deploy.backendoptions import DockerOptions, SshOptions
from aidge_deploy.boards.container import (
    BuildLocation,
    DockerBuildChoice,
    docker_build_choice,
    docker_failure,
    image_probe_command,
)
from aidge_deploy.boards.sbc.build_steps import SbcBuildSteps
from aidge_deploy.boards.sbc.layout import eviction_command, remote_layout, touch_command
from aidge_deploy.boards.sbc.run_steps import SbcRunSteps
from aidge_deploy.boards.sbc.session import SHORT_TIMEOUT_S
from aidge_deploy.connections.ssh import SshConnection
from aidge_deploy.connections.ssh_settings import ssh_settings_from_config
from aidge_deploy.errors import ConfigError, DeployError, ExecutionError
from aidge_deploy.power.capability import RepeatedRunPower
from aidge_deploy.readiness import ToolCheck, apt_program_check
from aidge_deploy.registry import DeployTarget, RemoteBuildTarget, TransferableTarget
from aidge_deploy.results import DeployContext, Provenance
from aidge_deploy.targetspec import BackendCaps, Lane, TargetKind

_log = logging.getLogger(__name__)


class SbcSshTarget(
    SbcBuildSteps,
    SbcRunSteps,
    DeployTarget,
    TransferableTarget,
    RemoteBuildTarget,
    RepeatedRunPower,
):
    """A Linux board over SSH: build on the board (or cross-build here), run, measure."""

    target_kind: ClassVar[TargetKind] = TargetKind.LINUX_BOARD
    #: a board of its own over SSH: its runs hold it one at a time
    reach: ClassVar[BackendCaps] = BackendCaps(
        over_ssh=True, lane=Lane.PER_BOARD, options=(SshOptions,)
    )
    #: timings, RSS and counters are measured on the board (its OS clock, kernel and PMU)
    timing_provenance: ClassVar[Provenance] = Provenance.SILICON
    counter_provenance: ClassVar[Provenance] = Provenance.SILICON
    counts_with: ClassVar[str | None] = "linux-perf-board"
    description: ClassVar[str] = "SSH: build on the board (or cross-compile), run, peak RSS"

    def check_config(self) -> None:
        ssh_settings_from_config(self.config)  # the board's address and SSH options, early

    # ----------------------------------------------------------------- configuration

    def builds_remotely(self) -> bool:
        return not self.config.ssh.cross_compile

    def run_needs(self) -> list[str]:
        needs = [
            "the board's address: --ssh-host (with --ssh-user; a key by --ssh-key-path or an "
            "SSH agent)",
            "the board's host key in known_hosts, or --ssh-trust-on-first-use",
        ]
        if self.uses_container:
            needs.append("docker on the board and the image (--docker-image)")
        if not self.config.ssh.cross_compile:
            needs.append("cmake and a C++ compiler on the board (or in the image)")
        return needs

    @classmethod
    def variants(cls) -> dict[str, dict[str, Any]]:
        return {"": {}, "--cross-compile": {"cross_compile": True}}

    def preflight(self) -> list[ToolCheck]:
        checks: list[ToolCheck] = []
        if self.config.ssh.cross_compile:
            tc = self.toolchain
            checks.append(apt_program_check(tc.cxx, tc.apt_package))
            checks.append(apt_program_check("cmake", "cmake"))
        return checks

    # ----------------------------------------------------------------- prepare

    def prepare(self, ctx: DeployContext) -> None:
        self._ctx = ctx
        ctx.log_dir.mkdir(parents=True, exist_ok=True)
        if self.uses_container and not self.config.docker.image:
            raise ConfigError(
                "Backend ssh_docker needs docker_image (the image to build/run in on the board)",
                hint="Pass --docker-image IMAGE (or DeployConfig(docker_image=...)).",
            )
        settings = ssh_settings_from_config(self.config)
        self._conn = SshConnection(settings)
        self._report("Prepare", f"connecting to {settings.label}")
        self._conn.connect()
        home = self._conn.home()
        self._layout = remote_layout(home, self.config.ssh.remote_workdir, ctx.export_dir)
        # in use from now on: another run's eviction leaves it alone (layout module)
        self._conn.run(touch_command(self._layout), timeout_s=SHORT_TIMEOUT_S)
        if self.config.ssh.cross_compile:
            self._location = BuildLocation.LOCAL_CROSS
        if self.uses_container:
            self._probe_image(ctx)
        self._write_record(ctx)

    def _probe_image(self, ctx: DeployContext) -> None:
        image = str(self.config.docker.image)
        choice = docker_build_choice(self.config)
        probe_tools = choice == DockerBuildChoice.AUTO and not self.config.ssh.cross_compile
        self._report("Prepare", f"checking docker image {image} on the board")
        result = self.conn.run(
            image_probe_command(image, probe_tools),
            timeout_s=SHORT_TIMEOUT_S,
            log_path=ctx.log_dir / "docker-probe.log",
        )
        if not result.ok:
            error = docker_failure(
                result.exit_status,
                result.stderr,
                image=image,
                where=f"on {self.conn.target}",
                doing="checking the image",
                log_path=result.log_path,
            )
            if error is not None and not (
                self.config.docker.pull and "not present" in error.message
            ):
                raise error
            if error is None:
                raise ExecutionError(
                    f"Checking docker image {image} on {self.conn.target} failed "
                    f"(exit {result.exit_status}): {result.stderr.strip()[-500:]}",
                    hint="Run `docker image inspect IMAGE` on the board to see why.",
                    log_path=result.log_path,
                )
        found = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        self._image_id = found.get("id") or image  # pulled later (docker_pull): key by name
        if self.config.ssh.cross_compile:
            return
        if choice == DockerBuildChoice.CONTAINER or found.get("tools") == "yes":
            self._location = BuildLocation.CONTAINER
        else:
            self._location = BuildLocation.BOARD

    # ----------------------------------------------------------------- cleanup

    def cleanup(self, ctx: DeployContext) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            if conn.connected or self._layout is not None:
                self._clean_remote(ctx)
        except DeployError as exc:
            _log.warning("Remote clean-up on %s failed: %s", conn.target, exc.message)
        finally:
            conn.close()
            self._conn = None

    def _clean_remote(self, ctx: DeployContext) -> None:
        layout = self._layout
        if layout is None:
            return
        if self.config.keep_build_dir:
            _log.info("keep_build_dir: kept %s on %s", layout.export_home, self.conn.target)
            return
        if layout.user_workdir:
            self.conn.run(
                f"chmod -R u+w {shlex.quote(layout.export_home)} 2>/dev/null; "
                f"rm -rf -- {shlex.quote(layout.export_home)}",
                timeout_s=SHORT_TIMEOUT_S,
            )
        else:
            self.conn.run(eviction_command(layout), timeout_s=SHORT_TIMEOUT_S)


class SbcSshDockerTarget(SbcSshTarget):
    """The same board, with the run (and the build, when the image can) in ``docker_image``."""

    description: ClassVar[str] = "SSH + Docker on the board: export mounted, --pull never"
    reach: ClassVar[BackendCaps] = BackendCaps(
        over_ssh=True, in_container=True, lane=Lane.PER_BOARD, options=(SshOptions, DockerOptions)
    )


__all__ = ["SbcSshDockerTarget", "SbcSshTarget"]
