"""What one SSH deployment keeps between the pipeline's calls, and what every step shares.

Why this module exists: ``SbcSshTarget`` is assembled from its build steps (``build_steps``)
and run steps (``run_steps``); both read the same connection, remote layout, build location,
launcher and program, report progress the same way, and wrap commands in the same container.
That shared state and those helpers live here, so each step module holds one stage.
"""

from __future__ import annotations

import json
import logging
import posixpath
import shlex
from typing import TYPE_CHECKING, ClassVar

from aidge_deploy.boards.container import (
    BOARD_USER_EXPR,
    BuildLocation,
    Mount,
    container_name,
    docker_run_argv,
    shell_line,
)
from aidge_deploy.boards.sbc.launcher import BoardLauncher, staging_dir
from aidge_deploy.boards.sbc.layout import RemoteLayout
from aidge_deploy.boards.sbc.toolchains import CrossToolchain, toolchain_for
from aidge_deploy.boards.seccomp import PROFILE_NAME, perf_profile, perf_profile_folder
from aidge_deploy.connections.ssh import SshConnection
from aidge_deploy.connections.ssh_transfer import TransferReport
from aidge_deploy.errors import DeployError
from aidge_deploy.results import DeployContext
from aidge_deploy.runcontrol import shielded
from aidge_deploy.targetspec import BackendCaps

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig

#: timeout of the short housekeeping commands on the board (mkdir, build check, probes, rm)
SHORT_TIMEOUT_S = 60.0

_log = logging.getLogger(__name__)


class SbcSession:
    """The state of one deployment to a board (a mixin base of ``SbcSshTarget``)."""

    target_name: ClassVar[str]
    #: the board's hardware model when a record names one (``DeployTarget.hardware_model``)
    hardware_model: ClassVar[str | None]
    backend_name: ClassVar[str]
    #: how the backend reaches the board (``DeployTarget.reach``)
    reach: ClassVar[BackendCaps]
    config: DeployConfig

    @property
    def uses_container(self) -> bool:
        """The run (and, when the image can, the build) happens inside ``docker_image``:
        the backend's declared reach."""
        return self.reach.in_container

    _conn: SshConnection | None = None
    _layout: RemoteLayout | None = None
    _ctx: DeployContext | None = None
    _location: BuildLocation = BuildLocation.BOARD
    _image_id: str | None = None
    _launcher: BoardLauncher | None = None
    _program: str | None = None  # the artifact on the board
    _upload: TransferReport | None = None
    _seccomp_profile: str | None = None  # board path of the perf seccomp profile

    @property
    def launcher(self) -> BoardLauncher | None:
        """The ``perf_run`` launcher on the board (None before Prepare installs it)."""
        return self._launcher

    # ----------------------------------------------------------------- configuration

    @property
    def toolchain(self) -> CrossToolchain:
        return toolchain_for(self.hardware_model or self.target_name)

    @property
    def run_timeout_s(self) -> float:
        limit = self.config.ssh.max_runtime_seconds or self.config.run_timeout
        return float(limit)

    @property
    def conn(self) -> SshConnection:
        if self._conn is None:
            raise DeployError("Not connected to the board", hint="prepare() was not called.")
        return self._conn

    @property
    def layout(self) -> RemoteLayout:
        if self._layout is None:
            raise DeployError("No remote layout", hint="prepare() was not called.")
        return self._layout

    def _report(self, stage: str, message: str, **figures: float | str | None) -> None:
        ctx = self._ctx
        progress = getattr(ctx, "progress", None) if ctx is not None else None
        if progress is None:
            return
        from aidge_deploy.progress import ProgressKind, ProgressUpdate

        completed = figures.get("completed")
        total = figures.get("total")
        progress(
            ProgressUpdate(
                stage,
                ProgressKind.STATUS,
                message,
                completed=float(completed) if isinstance(completed, int | float) else None,
                total=float(total) if isinstance(total, int | float) else None,
                unit=str(figures.get("unit") or ""),
            )
        )

    def _write_record(self, ctx: DeployContext) -> None:
        """``remote.json`` in the run's log folder: where everything went on the board."""
        layout = self.layout
        record = {
            "board": self.conn.target,
            "board_name": self.config.ssh.board_name,
            "backend": self.backend_name,
            "build_location": self._location.value,
            "docker_image": self.config.docker.image if self.uses_container else None,
            "docker_image_id": self._image_id,
            "export_folder": layout.export_home,
            "removed_after_run": layout.user_workdir and not self.config.keep_build_dir,
            "upload": None
            if self._upload is None
            else {
                "files_sent": self._upload.files_sent,
                "bytes_sent": self._upload.bytes_sent,
                "files_unchanged": self._upload.files_unchanged,
                "files_deleted": self._upload.files_deleted,
            },
            "launcher": None
            if self._launcher is None
            else {
                "path": self._launcher.path,
                "static": self._launcher.static,
                "unavailable_reason": self._launcher.unavailable_reason,
            },
            "program": self._program,
        }
        (ctx.log_dir / "remote.json").write_text(json.dumps(record, indent=2), encoding="utf-8")

    def _perf_seccomp_profile(self) -> str:
        """The board path of the perf seccomp profile (uploaded once per profile version)."""
        if self._seccomp_profile is None:
            folder = perf_profile_folder(self.layout.tools)
            self.conn.upload_dir(staging_dir("seccomp", perf_profile()), folder)
            self._seccomp_profile = posixpath.join(folder, PROFILE_NAME)
        return self._seccomp_profile

    def _remove_container(self, name: str) -> None:
        """Best effort: a container orphaned by a timeout, a drop or an interruption must not
        keep running (shielded: it runs after the run was cancelled)."""
        try:
            with shielded():
                self.conn.run(
                    f"docker rm -f {shlex.quote(name)} >/dev/null 2>&1; true", timeout_s=30.0
                )
        except DeployError as exc:
            _log.warning("Could not remove container %s on the board: %s", name, exc.message)

    def _container_command(
        self, script: str, *, workdir: str, name: str | None = None, perf_events: bool = False
    ) -> str:
        """``docker run`` on the board; with ``perf_events`` (counter passes) the container's
        seccomp profile is ours, which allows ``perf_event_open`` where Docker's default
        refuses it even for software events (``boards.seccomp``)."""
        layout = self.layout
        mounts = [Mount(layout.export_home, "/work")]
        if self._launcher is not None and self._launcher.path is not None:
            mounts.append(Mount(posixpath.dirname(self._launcher.path), "/aidge-tools", True))
        argv = docker_run_argv(
            str(self.config.docker.image),
            script,
            mounts=mounts,
            workdir=workdir,
            name=name or container_name(),
            pull=self.config.docker.pull,
            user=BOARD_USER_EXPR,
            security_opts=(f"seccomp={self._perf_seccomp_profile()}",) if perf_events else (),
        )
        return shell_line(argv)
