"""``docker run`` command lines and the meaning of docker's failures.

Why this module exists: the ``ssh_docker`` backend (docker on the board, driven over SSH) and
the local Docker build location of the host target run the same kind of container and must
read docker's failures the same way. Rules, from the lab notes: always ``--pull never``
(``--pull missing`` only when the user allows pulls: a bare name would otherwise reach a
registry), ``--network none``, the export *mounted* (never copied into an image),
``--rm`` plus a unique ``--name`` so a container orphaned by a dropped connection can be
removed with ``docker rm -f``, and the caller's uid/gid so files written into the mounted
folder stay deletable by the board user.
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from aidge_deploy.backendoptions import DockerBuildChoice
from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ExecutionError, PreflightError

#: docker's own exit statuses (the container's program never ran)
DOCKER_ERROR = 125
DOCKER_NOT_FOUND = 127
#: prints "cmake" and "c++" when the image can build an export itself
TOOL_PROBE = "command -v cmake >/dev/null && { command -v c++ || command -v g++; } >/dev/null"
#: the value of ``--user`` evaluated by the board's shell
BOARD_USER_EXPR = '"$(id -u):$(id -g)"'


class BuildLocation(StrEnum):
    """Where an export was compiled (reported in ``BuildResult.log`` and the run log)."""

    BOARD = "board"  # on the board's own OS (outside any container)
    CONTAINER = "container"  # inside ``docker_image`` (on the board, or here for local Docker)
    LOCAL_CROSS = "local-cross"  # on this machine with a cross toolchain, binary uploaded
    LOCAL = "local"  # on this machine (the host target)


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False

    def option(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


def container_name() -> str:
    return f"aidge-deploy-{secrets.token_hex(6)}"


def image_key(image_id: str) -> str:
    """A short stable key of an image id, for build-tree folder names."""
    return hashlib.sha256(image_id.encode()).hexdigest()[:10]


def docker_build_choice(config: DeployConfig) -> DockerBuildChoice:
    """Build in the container, outside it, or decide by probing (``DockerOptions.build``)."""
    return config.docker.build


def docker_run_argv(
    image: str,
    script: str,
    *,
    mounts: Sequence[Mount],
    workdir: str,
    name: str,
    pull: bool,
    user: str | None,
    env: dict[str, str] | None = None,
    security_opts: Sequence[str] = (),
) -> list[str]:
    """``docker run`` argv running ``sh -c script``; ``user`` is ``uid:gid`` or None (image's)."""
    argv = [
        "docker",
        "run",
        "--rm",
        "--name",
        name,
        "--pull",
        "missing" if pull else "never",
        "--network",
        "none",
    ]
    if user is not None:
        argv += ["--user", user]
    for opt in security_opts:
        argv += ["--security-opt", opt]
    for key, value in {"HOME": "/tmp", **(env or {})}.items():
        argv += ["-e", f"{key}={value}"]
    for mount in mounts:
        argv += ["-v", mount.option()]
    return [*argv, "-w", workdir, image, "sh", "-c", script]


def shell_line(argv: Sequence[str]) -> str:
    """Quote ``argv`` for the board's shell, leaving ``BOARD_USER_EXPR`` to be evaluated."""
    return " ".join(arg if arg == BOARD_USER_EXPR else shlex.quote(arg) for arg in argv)


def image_probe_command(image: str, probe_tools: bool) -> str:
    """Shell line printing ``id=<image id>`` and, if asked, ``tools=yes|no``."""
    q = shlex.quote(image)
    line = (
        f"id=$(docker image inspect --format '{{{{.Id}}}}' {q}) || exit {DOCKER_ERROR}; echo id=$id"
    )
    if probe_tools:
        line += (
            f"; if docker run --rm --pull never --network none --entrypoint sh {q} -c "
            f"{shlex.quote(TOOL_PROBE)}; then echo tools=yes; else echo tools=no; fi"
        )
    return line


def docker_failure(
    status: int | None, stderr: str, *, image: str, where: str, doing: str, log_path: Path | None
) -> PreflightError | ExecutionError | None:
    """A typed error when docker itself failed (not the program); None otherwise."""
    text = stderr.strip()
    tail = "\n".join(text.splitlines()[-5:])
    path = log_path
    lowered = text.lower()
    if status == DOCKER_NOT_FOUND and "docker" in lowered and "not found" in lowered:
        return PreflightError(
            f"The docker CLI is not installed {where} (while {doing})",
            hint="Install Docker there (apt-get install docker.io) or use the plain ssh backend.",
            log_path=path,
        )
    if "permission denied" in lowered and "docker" in lowered and "socket" in lowered:
        return PreflightError(
            f"The user cannot talk to the Docker daemon {where} (while {doing}):\n{tail}",
            hint="Add the user to the docker group (sudo usermod -aG docker <user>, then log in "
            "again), or point DOCKER_HOST at a daemon the user may use.",
            log_path=path,
        )
    if (
        "cannot connect to the docker daemon" in lowered
        or "is the docker daemon running" in lowered
    ):
        return PreflightError(
            f"No Docker daemon is reachable {where} (while {doing}):\n{tail}",
            hint="Start it (sudo systemctl start docker) or set DOCKER_HOST for the user.",
            log_path=path,
        )
    if status == DOCKER_ERROR and ("no such image" in lowered or "unable to find image" in lowered):
        return PreflightError(
            f"Docker image {image!r} is not present {where} (while {doing})",
            hint=(
                f"Copy it to the board without a registry: `docker save {image} | ssh <board> "
                "docker load`"
                if where != "on this machine"
                else f"Load or build it here (`docker load -i image.tar`, `docker build -t {image} .`)"
            )
            + ", or pass --docker-pull (DockerOptions(pull=True)) to let docker pull it.",
            log_path=path,
        )
    if status == DOCKER_ERROR and ("docker:" in lowered or "error response" in lowered):
        return ExecutionError(
            f"docker could not start the container {where} (while {doing}):\n{tail}",
            hint="Check the image name, the mounts and `docker info` there.",
            log_path=path,
        )
    return None


__all__ = [
    "BOARD_USER_EXPR",
    "TOOL_PROBE",
    "BuildLocation",
    "DockerBuildChoice",
    "Mount",
    "container_name",
    "docker_failure",
    "docker_run_argv",
    "image_key",
    "image_probe_command",
    "shell_line",
]
