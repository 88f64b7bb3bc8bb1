"""The former per-board classes of the Linux boards, kept importable.

Why this module exists: every Linux board (and the host reached over SSH) is one record of
``aidge_deploy.boards.records``, and its ``ssh`` and ``ssh_docker`` targets are made from
that record with ``SbcSshTarget`` / ``SbcSshDockerTarget`` (``aidge_deploy.registry``); a
board differs from the others only in its hardware model. The class names they had
(``RaspberryPiSsh``, ``K230SshDocker``...) still name those targets.
"""

from __future__ import annotations

#: the Linux boards of aidge_core.hw_model, plus the host reached over SSH
SBC_TARGETS = ("raspberrypi", "jetson-agx", "jetson-nano", "jetson-thor", "k230", "host")

_ALIASES = {
    "RaspberryPiSsh": ("raspberrypi", "ssh"),
    "RaspberryPiSshDocker": ("raspberrypi", "ssh_docker"),
    "JetsonAgxSsh": ("jetson-agx", "ssh"),
    "JetsonAgxSshDocker": ("jetson-agx", "ssh_docker"),
    "JetsonNanoSsh": ("jetson-nano", "ssh"),
    "JetsonNanoSshDocker": ("jetson-nano", "ssh_docker"),
    "JetsonThorSsh": ("jetson-thor", "ssh"),
    "JetsonThorSshDocker": ("jetson-thor", "ssh_docker"),
    "K230Ssh": ("k230", "ssh"),
    "K230SshDocker": ("k230", "ssh_docker"),
    "HostSsh": ("host", "ssh"),
    "HostSshDocker": ("host", "ssh_docker"),
}


def __getattr__(name: str) -> object:
    """``RaspberryPiSsh`` and the others: the targets made from the boards' records."""
    pair = _ALIASES.get(name)
    if pair is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from aidge_deploy.registry import pipeline_target_class

    return pipeline_target_class(*pair)


__all__ = ["SBC_TARGETS"]
