"""What every request handler of the service shares: settings, database, export store,
notifier, token cache, login throttle, the boards' health checks and the dispatcher
(``FarmState``)."""

from __future__ import annotations

from pathlib import Path

from aidge_deploy.errors import ConfigError
from aidge_deploy.farm.auth import TokenCache, has_admin
from aidge_deploy.farm.db import Database
from aidge_deploy.farm.dispatch import Coordinator, Dispatcher
from aidge_deploy.farm.health import HealthChecks
from aidge_deploy.farm.notify import Notifier
from aidge_deploy.farm.settings import FarmSettings, private_data_dir
from aidge_deploy.farm.store import ExportStore
from aidge_deploy.farm.throttle import LoginThrottle
from aidge_deploy.history.store import HistoryStore


class FarmState:
    def __init__(self, settings: FarmSettings, link: Coordinator | None = None) -> None:
        self.settings = settings
        private_data_dir(Path(settings.data_dir))
        settings.jobs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.db = Database(settings.db_url)
        # the jobs' results history, in the farm's own database (farm.jobhistory)
        self.history = HistoryStore(self.db.engine)
        self.store = ExportStore(
            Path(settings.data_dir),
            settings.max_upload_bytes,
            max_export_bytes=settings.max_export_bytes,
            max_members=settings.max_export_members,
        )
        self.notifier = Notifier()
        self.tokens = TokenCache()
        self.tokens.watch(self.db.sessions)
        self.logins = LoginThrottle(settings.login_limits)
        self.health = HealthChecks(settings, self.db, self.store)
        self.dispatcher = Dispatcher(settings, self.db, self.notifier, link, self.health)

    def job_dir(self, job_id: int) -> Path:
        return self.settings.jobs_dir / str(int(job_id))


class NoAdminError(ConfigError):
    """The service refuses to start before an admin account exists."""


def check_ready(state: FarmState) -> None:
    with state.db.session() as s:
        if not has_admin(s):
            raise NoAdminError(
                "the farm has no admin user: refusing to start (there is no default password)",
                hint="Create one: AIDGE_DEPLOY_API_PASSWORD=... aidge-deploy farm user add NAME "
                f"--admin --data-dir {state.settings.data_dir}",
            )


__all__ = ["FarmState", "NoAdminError", "check_ready"]
