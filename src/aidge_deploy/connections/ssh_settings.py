"""Settings of one SSH connection to a Linux board.

Why this module exists: the deploy config, the CLI and the board farm all describe "how to reach
this board" and none of them should have to import asyncssh to do it. ``SshSettings`` is a plain
frozen value the caller builds; the connection layer (``ssh.py``) turns it into asyncssh options.
The passphrase is the only secret a caller may put here and it is kept out of ``repr()``;
it never enters the deploy config either (whose snapshot lands in result bundles):
``ssh_settings_from_config`` takes it from the environment only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ConfigError

DEFAULT_SSH_PORT = 22
DEFAULT_SSH_CONFIG = Path("~/.ssh/config")
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")


@dataclass(frozen=True)
class SshSettings:
    """How to reach and trust one board over SSH.

    ``port`` and ``user`` may be left ``None`` so that ``~/.ssh/config`` (or the OpenSSH
    defaults: port 22, the local user name) decide, as the ``ssh`` command would.
    ``config_path`` is honoured only when the file exists; ``None`` disables ssh_config.
    ``connect_timeout_s`` bounds one attempt (TCP connect + handshake + authentication);
    ``connect_attempts`` attempts are made with exponential backoff starting at
    ``retry_backoff_s``. ``command_timeout_s`` is the default limit of a remote command.
    """

    host: str
    port: int | None = None
    user: str | None = None
    key_path: Path | None = None
    key_passphrase: str | None = field(default=None, repr=False, compare=False)
    known_hosts_path: Path | None = None
    config_path: Path | None = DEFAULT_SSH_CONFIG
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 600.0
    transfer_timeout_s: float = 600.0
    trust_on_first_use: bool = False
    allow_agent: bool = True
    connect_attempts: int = 3
    retry_backoff_s: float = 0.5
    keepalive_interval_s: float = 15.0
    keepalive_count_max: int = 3
    kill_after_s: float = 5.0
    #: the board's logical name (``sbc_board_name``, a lab file's board), for messages
    name: str | None = None

    def __post_init__(self) -> None:
        if not self.host or any(c.isspace() for c in self.host):
            raise ConfigError(
                f"Invalid SSH host {self.host!r}",
                "Give a host name, an IP address or a Host alias of ~/.ssh/config.",
            )
        if self.port is not None and not 0 < self.port < 65536:
            raise ConfigError(f"Invalid SSH port {self.port}", "Use a port between 1 and 65535.")
        for name in ("connect_timeout_s", "command_timeout_s", "transfer_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"SSH setting {name} must be > 0", "Give a positive timeout.")
        if self.connect_attempts < 1:
            raise ConfigError("SSH setting connect_attempts must be >= 1", "Use 1 for no retry.")
        if self.retry_backoff_s < 0 or self.kill_after_s < 0 or self.keepalive_interval_s < 0:
            raise ConfigError(
                "SSH backoff, kill-after and keepalive durations must be >= 0",
                "Use 0 to disable keepalives.",
            )

    @property
    def label(self) -> str:
        """``user@host:port`` as given (before ssh_config), for messages; after the board's
        name when it has one: ``pi-lab (pi@192.168.1.50)``."""
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        address = f"{user}{self.host}{port}"
        return f"{self.name} ({address})" if self.name else address

    def resolved_known_hosts(self) -> Path:
        """The known_hosts file checked (and appended to on trust-on-first-use)."""
        return (self.known_hosts_path or DEFAULT_KNOWN_HOSTS).expanduser()

    def resolved_config(self) -> Path | None:
        """The ssh_config file to apply, or ``None`` when disabled or absent."""
        if self.config_path is None:
            return None
        path = self.config_path.expanduser()
        return path if path.is_file() else None

    def resolved_key(self) -> Path | None:
        """The private key file, ``~`` expanded."""
        return self.key_path.expanduser() if self.key_path is not None else None


#: environment variable holding the passphrase of an encrypted SSH key (never in the config,
#: whose snapshot lands in result bundles)
PASSPHRASE_ENV = "AIDGE_SBC_SSH_KEY_PASSPHRASE"


def ssh_settings_from_config(config: DeployConfig) -> SshSettings:
    """``SshSettings`` for ``DeployConfig``'s SSH options (``config.ssh``: the guide's
    ``ssh_*`` fields and the record's own options); the key's passphrase from the
    environment only."""
    ssh = config.ssh
    if not ssh.host:
        raise ConfigError(
            f"Backend {config.backend_kind} needs the board's address (ssh_host)",
            hint="Pass --ssh-host (or AIDGE_SBC_IP), or DeployConfig(ssh_host=...).",
        )
    return SshSettings(
        host=ssh.host,
        name=ssh.board_name,
        port=ssh.port,
        user=ssh.user,
        key_path=ssh.key_path,
        known_hosts_path=ssh.known_hosts_path,
        trust_on_first_use=ssh.trust_on_first_use,
        connect_timeout_s=ssh.connect_timeout,
        key_passphrase=os.environ.get(PASSPHRASE_ENV) or None,
        config_path=ssh.config_path,
        allow_agent=ssh.allow_agent,
        connect_attempts=ssh.connect_attempts,
        retry_backoff_s=ssh.retry_backoff,
        keepalive_interval_s=ssh.keepalive_interval,
        keepalive_count_max=ssh.keepalive_count_max,
        command_timeout_s=ssh.command_timeout,
        transfer_timeout_s=ssh.transfer_timeout,
        kill_after_s=ssh.kill_after,
    )


__all__ = [
    "DEFAULT_KNOWN_HOSTS",
    "DEFAULT_SSH_CONFIG",
    "DEFAULT_SSH_PORT",
    "PASSPHRASE_ENV",
    "SshSettings",
    "ssh_settings_from_config",
]
