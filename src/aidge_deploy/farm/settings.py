"""Settings of a farm service (``aidge-deploy farm serve`` flags)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LoginLimits:
    """Failed logins allowed in ``window_s`` seconds before more are refused (``throttle``)."""

    per_user: int = 10
    per_address: int = 30
    window_s: int = 300


@dataclass(frozen=True)
class FarmSettings:
    data_dir: Path
    #: labgrid coordinator ``HOST:PORT``
    coordinator: str = "127.0.0.1:20408"
    #: SQLAlchemy URL; default: ``sqlite:///<data_dir>/farm.db``
    database_url: str | None = None
    farm_name: str = "farm"
    max_upload_bytes: int = 200 * 1024 * 1024
    #: an agent silent for this long is lost: its running jobs fail, its boards go offline
    agent_timeout: float = 15.0
    heartbeat_interval: float = 2.0
    #: the service's loop runs when the coordinator pushes a place change or a job is
    #: submitted, finished or cancelled, and at least this often (s)
    dispatch_interval: float = 1.0
    #: a waiting reservation is refreshed this often (labgrid expires it after 60 s)
    refresh_interval: float = 20.0
    #: longest wait of a long-poll request (events, agent poll)
    long_poll_max: float = 25.0
    #: the coordinator address agents are told to use (default: ``coordinator``)
    agent_coordinator: str | None = None
    #: failed logins (API token and dashboard) allowed per user name and per address
    login_limits: LoginLimits = field(default_factory=LoginLimits)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{Path(self.data_dir) / 'farm.db'}"

    @property
    def jobs_dir(self) -> Path:
        return Path(self.data_dir) / "jobs"


__all__ = ["FarmSettings", "LoginLimits"]
