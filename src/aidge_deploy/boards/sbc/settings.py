"""SSH settings of an SBC deployment, read from ``DeployConfig`` and the environment.

Why this module exists: the passphrase of an encrypted key must never enter the config (its
snapshot lands in result bundles), so the rules for what may come from where live in one
small place that both backends and the tests share.
"""

from __future__ import annotations

import os

from aidge_deploy.config import DeployConfig
from aidge_deploy.connections.ssh_settings import SshSettings
from aidge_deploy.errors import ConfigError

#: environment variable holding the passphrase of an encrypted SSH key (never in the config,
#: whose snapshot lands in result bundles)
PASSPHRASE_ENV = "AIDGE_SBC_SSH_KEY_PASSPHRASE"


def ssh_settings_from_config(config: DeployConfig) -> SshSettings:
    """``SshSettings`` for ``DeployConfig`` (``extra["ssh_settings"]`` overrides the rest)."""
    if not config.ssh_host:
        raise ConfigError(
            f"Backend {config.backend_kind} needs the board's address (ssh_host)",
            hint="Pass --ssh-host (or AIDGE_SBC_IP), or DeployConfig(ssh_host=...).",
        )
    values: dict[str, object] = {
        "host": config.ssh_host,
        "name": config.sbc_board_name,
        "port": config.ssh_port,
        "user": config.ssh_user,
        "key_path": config.ssh_key_path,
        "known_hosts_path": config.ssh_known_hosts_path,
        "trust_on_first_use": config.ssh_trust_on_first_use,
        "connect_timeout_s": config.ssh_connect_timeout,
        "key_passphrase": os.environ.get(PASSPHRASE_ENV) or None,
    }
    overrides = config.extra.get("ssh_settings") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(
            "extra['ssh_settings'] must be a dict of SshSettings fields",
            hint="e.g. extra={'ssh_settings': {'connect_attempts': 1}}",
        )
    if "key_passphrase" in overrides:
        raise ConfigError(
            "The key passphrase cannot be given in the config (it would be recorded)",
            hint=f"Set the {PASSPHRASE_ENV} environment variable, or use an SSH agent.",
        )
    values.update(overrides)
    try:
        return SshSettings(**values)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ConfigError(
            f"Unknown SSH setting in extra['ssh_settings']: {exc}",
            hint="See aidge_deploy.connections.ssh_settings.SshSettings for the fields.",
        ) from None


__all__ = ["PASSPHRASE_ENV", "ssh_settings_from_config"]
