"""Registers the ``ssh`` and ``ssh_docker`` backends of every Linux board of the hardware model.

Why this module exists: the registry imports it to learn the SBC targets; one small class per
(board, backend) pair keeps ``aidge-deploy targets`` and ``get_deploy_target`` explicit. The
hardware facts come from ``aidge_core.hw_model`` (``register_deploy_target`` attaches them).
"""

from __future__ import annotations

from aidge_deploy.boards.sbc.base import SbcSshDockerTarget, SbcSshTarget
from aidge_deploy.registry import register_deploy_target
from aidge_deploy.results import Provenance

#: the Linux boards of aidge_core.hw_model, plus the host reached over SSH
SBC_TARGETS = ("raspberrypi", "jetson-agx", "jetson-nano", "jetson-thor", "k230", "host")


@register_deploy_target("raspberrypi", "ssh")
class RaspberryPiSsh(SbcSshTarget):
    pass


@register_deploy_target("raspberrypi", "ssh_docker")
class RaspberryPiSshDocker(SbcSshDockerTarget):
    pass


@register_deploy_target("jetson-agx", "ssh")
class JetsonAgxSsh(SbcSshTarget):
    pass


@register_deploy_target("jetson-agx", "ssh_docker")
class JetsonAgxSshDocker(SbcSshDockerTarget):
    pass


@register_deploy_target("jetson-nano", "ssh")
class JetsonNanoSsh(SbcSshTarget):
    pass


@register_deploy_target("jetson-nano", "ssh_docker")
class JetsonNanoSshDocker(SbcSshDockerTarget):
    pass


@register_deploy_target("jetson-thor", "ssh")
class JetsonThorSsh(SbcSshTarget):
    pass


@register_deploy_target("jetson-thor", "ssh_docker")
class JetsonThorSshDocker(SbcSshDockerTarget):
    pass


@register_deploy_target("k230", "ssh")
class K230Ssh(SbcSshTarget):
    pass


@register_deploy_target("k230", "ssh_docker")
class K230SshDocker(SbcSshDockerTarget):
    pass


@register_deploy_target("host", "ssh")
class HostSsh(SbcSshTarget):
    timing_provenance = Provenance.HOST  # the "board" is this machine
    counter_provenance = Provenance.HOST


@register_deploy_target("host", "ssh_docker")
class HostSshDocker(SbcSshDockerTarget):
    timing_provenance = Provenance.HOST
    counter_provenance = Provenance.HOST


__all__ = [
    "SBC_TARGETS",
    "HostSsh",
    "HostSshDocker",
    "JetsonAgxSsh",
    "JetsonAgxSshDocker",
    "JetsonNanoSsh",
    "JetsonNanoSshDocker",
    "JetsonThorSsh",
    "JetsonThorSshDocker",
    "K230Ssh",
    "K230SshDocker",
    "RaspberryPiSsh",
    "RaspberryPiSshDocker",
]
