"""Settings of a farm service (``aidge-deploy farm serve`` flags), and its private data folder."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LoginLimits:
    """How failed logins are slowed down (``throttle``): per (address, user name), the
    first ``free`` failures cost nothing, then each one doubles the wait before the next
    attempt (from ``base_s`` up to ``max_s``); one address gets ``per_address_free``
    failures over all the names it tries. Failures are forgotten after ``forget_s``."""

    free: int = 5
    base_s: float = 1.0
    max_s: float = 300.0
    per_address_free: int = 50
    forget_s: float = 3600.0


@dataclass(frozen=True)
class HealthSettings:
    """When boards run their golden job (``farm.health``): every ``interval_s`` (0: not
    on a schedule), after their agent restarts and after ``failures`` jobs in a row failed
    on the board for a reason that is not the user's; a board that fails it is drained
    and admitted again after ``clean`` golden runs in a row pass, tried every
    ``recheck_s``. A golden figure (cycles or latency) passes within ``band`` (a
    fraction) of the target's reference."""

    interval_s: float = 3600.0
    failures: int = 3
    clean: int = 2
    recheck_s: float = 60.0
    band: float = 0.10
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.failures < 1 or self.clean < 1:
            raise ValueError("health check failures and clean runs are at least 1")
        if not 0 < self.band < 1 or self.interval_s < 0 or self.recheck_s < 0:
            raise ValueError("health check band is in (0, 1), intervals are not negative")


@dataclass(frozen=True)
class FarmSettings:
    data_dir: Path
    #: labgrid coordinator ``HOST:PORT``
    coordinator: str = "127.0.0.1:20408"
    #: SQLAlchemy URL; default: ``sqlite:///<data_dir>/farm.db``
    database_url: str | None = None
    farm_name: str = "farm"
    #: largest upload (the compressed archive, bytes)
    max_upload_bytes: int = 200 * 1024 * 1024
    #: largest export once uncompressed (bytes), and most members: checked while reading
    max_export_bytes: int = 1024 * 1024 * 1024
    max_export_members: int = 20_000
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
    #: how many times a job whose run failed for an infrastructure reason (board, flash,
    #: agent lost, emulator crash: ``farm.failures``) is run again, on another board of
    #: its target where there is one; a user's failure is never retried
    job_retries: int = 1
    #: how failed logins (API token and dashboard) are slowed down
    login_limits: LoginLimits = field(default_factory=LoginLimits)
    #: reverse proxies (addresses or networks) whose ``X-Forwarded-For`` is believed
    trusted_proxies: tuple[str, ...] = ()
    #: serve the API's Swagger UI at ``/api/docs`` (from the package, no CDN)
    api_docs: bool = True
    #: boards' health checks (golden jobs, drain and readmission)
    health: HealthSettings = field(default_factory=HealthSettings)
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for proxy in self.trusted_proxies:
            ipaddress.ip_network(proxy, strict=False)  # ValueError for a typo, at start

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{Path(self.data_dir) / 'farm.db'}"

    @property
    def jobs_dir(self) -> Path:
        return Path(self.data_dir) / "jobs"


def private_data_dir(path: Path) -> Path:
    """Create ``path`` readable by its owner only (``0700``), and make an existing one so:
    it holds the database, users' exports and results, and agent tokens."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


__all__ = ["FarmSettings", "HealthSettings", "LoginLimits", "private_data_dir"]
