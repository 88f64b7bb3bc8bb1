"""``aidge-deploy farm ...``: run a board farm (service, agents, one-machine ``up``) and
manage its users and agent tokens.

Passwords come from ``AIDGE_DEPLOY_API_PASSWORD`` or a prompt, never from an option
(options are visible in ``ps``). Agent tokens are printed once, or written to a file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from aidge_deploy.cli.render import console, error_exit
from aidge_deploy.defaults import DEFAULT_JOB_NICE
from aidge_deploy.errors import DeployError

app = typer.Typer(
    name="farm",
    help="Board farm: service, agents, users (labgrid underneath).",
    no_args_is_help=True,
)
user_app = typer.Typer(
    help="Farm users (hashed passwords, roles admin/user).", no_args_is_help=True
)
app.add_typer(user_app, name="user")


def _add_board_app() -> None:
    from aidge_deploy.cli.farmboard import app as board_app

    app.add_typer(board_app, name="board")


_add_board_app()

PASSWORD_ENV = ("AIDGE_DEPLOY_API_PASSWORD", "AIDGE_BENCHMARK_API_PASSWORD")
DEFAULT_DATA = Path("~/.local/share/aidge-deploy/farm")

DataDir = Annotated[
    Path, typer.Option("--data-dir", help="Farm state (database, exports, results).")
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="AIDGE_FARM_DATABASE_URL",
        help="SQLAlchemy URL of the farm's database (default: SQLite in --data-dir), "
        "e.g. postgresql+psycopg://farm@db-host/farm; the service and these commands must "
        "use the same. A URL with a password goes in AIDGE_FARM_DATABASE_URL, not here.",
    ),
]


# the boards' health checks (farm.health), options of `farm serve` and `farm up` alike
HealthInterval = Annotated[
    float,
    typer.Option(min=0, help="Seconds between two golden runs of a board (0: not on a schedule)."),
]
HealthFailures = Annotated[
    int,
    typer.Option(
        min=1,
        help="Jobs in a row failing on a board (not for the user's own error) before a golden run.",
    ),
]
HealthClean = Annotated[
    int, typer.Option(min=1, help="Clean golden runs in a row that admit a drained board.")
]
HealthRecheck = Annotated[
    float, typer.Option(min=0, help="Seconds between golden runs of a drained board.")
]
HealthBand = Annotated[
    float,
    typer.Option(
        min=0.001, max=0.999, help="Band of a golden figure around its reference (fraction)."
    ),
]
HealthOn = Annotated[
    bool, typer.Option(help="Run the boards' golden jobs (drain and readmit on them).")
]


def _data(path: Path) -> Path:
    return Path(os.path.expanduser(str(path)))


def _fail(exc: DeployError) -> NoReturn:
    raise error_exit(exc)


def read_password(confirm: bool) -> str:
    for name in PASSWORD_ENV:
        value = os.environ.get(name)
        if value:
            return value
    if not sys.stdin.isatty():
        raise DeployError(
            "no password: set AIDGE_DEPLOY_API_PASSWORD (there is no password option)",
            hint="export AIDGE_DEPLOY_API_PASSWORD=... (or run interactively for a prompt).",
        )
    return str(typer.prompt("Password", hide_input=True, confirmation_prompt=confirm))


def _db(data_dir: Path, database_url: str | None):  # type: ignore[no-untyped-def]
    from aidge_deploy.farm.db import Database
    from aidge_deploy.farm.settings import FarmSettings

    settings = FarmSettings(data_dir=_data(data_dir), database_url=database_url)
    if database_url is None:
        from aidge_deploy.farm.settings import private_data_dir

        private_data_dir(settings.data_dir)
    return Database(settings.db_url)


def _in_db[T](data_dir: Path, database_url: str | None, work: Callable[[Any], T]) -> T:
    """Run ``work`` (given a session) as one unit of work on the farm's database; a
    refusal exits 2 with its message and hint."""
    try:
        db = _db(data_dir, database_url)
        try:
            with db.session() as s:
                return work(s)
        finally:
            db.dispose()
    except DeployError as exc:
        raise error_exit(exc) from None


@user_app.command("add")
def user_add(
    name: str,
    admin: Annotated[bool, typer.Option("--admin", help="Role admin (sees all jobs).")] = False,
    data_dir: DataDir = DEFAULT_DATA,
    database_url: DatabaseUrl = None,
) -> None:
    """Add a user; the password comes from AIDGE_DEPLOY_API_PASSWORD or a prompt."""
    from aidge_deploy.farm.auth import add_user
    from aidge_deploy.farm.states import Role

    try:
        password = read_password(confirm=True)
    except DeployError as exc:
        _fail(exc)
    _in_db(data_dir, database_url, lambda s: add_user(s, name, password, Role.ADMIN if admin else Role.USER))  # fmt: skip
    console.print(f"user {name} added ({'admin' if admin else 'user'})")


@user_app.command("passwd")
def user_passwd(
    name: str, data_dir: DataDir = DEFAULT_DATA, database_url: DatabaseUrl = None
) -> None:
    """Reset a user's password (their tokens end)."""
    from aidge_deploy.farm.auth import set_password

    try:
        password = read_password(confirm=True)
    except DeployError as exc:
        _fail(exc)
    _in_db(data_dir, database_url, lambda s: set_password(s, name, password))
    console.print(f"password of {name} changed")


@user_app.command("list")
def user_list(data_dir: DataDir = DEFAULT_DATA, database_url: DatabaseUrl = None) -> None:
    from sqlalchemy import select

    from aidge_deploy.farm.db import User

    users = _in_db(data_dir, database_url, lambda s: list(s.scalars(select(User).order_by(User.name))))  # fmt: skip
    for u in users:
        console.print(f"{u.name}\t{u.role}{'\tdisabled' if u.disabled else ''}")


@app.command("agent-token")
def agent_token(
    name: str,
    data_dir: DataDir = DEFAULT_DATA,
    database_url: DatabaseUrl = None,
    write: Annotated[
        Path | None, typer.Option(help="Write the token to this file (mode 600).")
    ] = None,
) -> None:
    """Create (or replace) the token of agent NAME."""
    from aidge_deploy.farm.auth import issue_agent_token

    token = _in_db(data_dir, database_url, lambda s: issue_agent_token(s, name))
    if write is not None:
        write_secret(write, token)
        console.print(f"token of agent {name} written to {write}")
    else:
        sys.stdout.write(token + "\n")


token_app = typer.Typer(
    help="Long-lived API tokens for CI (hashed at rest, revocable): AIDGE_DEPLOY_API_TOKEN.",
    no_args_is_help=True,
)
app.add_typer(token_app, name="token")


def parse_expiry(text: str) -> float | None:
    """``90d``, ``12h``, ``30m``, ``3600s`` (or plain seconds) from now, or ``never``."""
    import re
    import time

    value = text.strip().lower()
    if value in ("never", "none"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw]?)", value)
    if m is None or float(m.group(1)) <= 0:
        raise DeployError(
            f"--expires {text!r} is not a duration", hint="e.g. --expires 90d (or 12h, never)"
        )
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}[m.group(2)]
    return time.time() + float(m.group(1)) * unit


@token_app.command("create")
def token_create(
    user: Annotated[str, typer.Option("--user", help="The user the token acts for.")],
    expires: Annotated[str, typer.Option(help="Lifetime: 90d, 12h, 30m... or never.")] = "90d",
    name: Annotated[str, typer.Option(help="What it is for (shown in lists).")] = "",
    data_dir: DataDir = DEFAULT_DATA,
    database_url: DatabaseUrl = None,
    write: Annotated[
        Path | None, typer.Option(help="Write the token to this file (mode 600).")
    ] = None,
) -> None:
    """Create an API token for USER; it is printed once (or written to --write)."""
    from aidge_deploy.farm.auth import create_api_token

    try:
        expires_at = parse_expiry(expires)
    except DeployError as exc:
        _fail(exc)
    token, info = _in_db(
        data_dir, database_url, lambda s: create_api_token(s, user, name, expires_at)
    )
    if write is not None:
        write_secret(write, token)
        console.print(f"API token {info.id} of {user} written to {write}")
    else:
        sys.stdout.write(token + "\n")


@token_app.command("list")
def token_list(
    user: Annotated[str | None, typer.Option("--user", help="Only this user's.")] = None,
    data_dir: DataDir = DEFAULT_DATA,
    database_url: DatabaseUrl = None,
) -> None:
    """The API tokens (never the tokens themselves): id, user, name, expiry, state."""
    import time

    from aidge_deploy.farm.auth import list_api_tokens

    tokens = _in_db(data_dir, database_url, lambda s: list_api_tokens(s, user))
    now = time.time()
    for t in tokens:
        expiry = (
            "never"
            if t.expires_at is None
            else time.strftime("%Y-%m-%d", time.gmtime(t.expires_at))
        )
        status = (
            "revoked"
            if t.revoked_at is not None
            else "expired"
            if t.expires_at is not None and t.expires_at < now
            else "active"
        )
        console.print(f"{t.id}\t{t.user}\t{t.name or '-'}\texpires {expiry}\t{status}")


@token_app.command("revoke")
def token_revoke(
    token_id: int, data_dir: DataDir = DEFAULT_DATA, database_url: DatabaseUrl = None
) -> None:
    """Revoke API token ID (the service refuses it within seconds: its cache lasts 5 s)."""
    from aidge_deploy.farm.auth import revoke_api_token

    info = _in_db(data_dir, database_url, lambda s: revoke_api_token(s, token_id))
    console.print(f"API token {info.id} of {info.user} revoked")


def write_secret(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")


@app.command()
def serve(
    data_dir: DataDir = DEFAULT_DATA,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free one).")] = 8000,
    coordinator: Annotated[
        str, typer.Option(envvar="LG_COORDINATOR", help="labgrid coordinator HOST:PORT.")
    ] = "127.0.0.1:20408",
    database_url: DatabaseUrl = None,
    farm_name: Annotated[str, typer.Option(help="Name of this farm (labgrid tag).")] = "farm",
    agent_timeout: Annotated[
        float, typer.Option(help="Seconds without heartbeat before an agent is lost.")
    ] = 15.0,
    max_upload_mb: Annotated[
        int,
        typer.Option(
            min=1,
            max=2047,
            help="Largest export upload (the archive, MiB; its size is a 32-bit column).",
        ),
    ] = 200,
    max_export_mb: Annotated[
        int,
        typer.Option(
            min=1, help="Largest export once uncompressed (MiB), checked while reading it."
        ),
    ] = 1024,
    max_export_members: Annotated[
        int, typer.Option(min=1, help="Most files and folders in an uploaded export.")
    ] = 20_000,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            help="A reverse proxy (address or network) whose X-Forwarded-For is believed; "
            "repeat it for several. Without one, the header is ignored."
        ),
    ] = None,
    api_docs: Annotated[
        bool, typer.Option(help="Serve the API's Swagger UI at /api/docs (from the package).")
    ] = True,
    job_retries: Annotated[
        int,
        typer.Option(
            min=0,
            max=10,
            help="Runs again of a job that failed for an infrastructure reason (board, "
            "flash, agent lost, emulator crash), on another board of its target where "
            "there is one; a user's failure is never retried.",
        ),
    ] = 1,
    health_interval: HealthInterval = 3600.0,
    health_failures: HealthFailures = 3,
    health_clean: HealthClean = 2,
    health_recheck: HealthRecheck = 60.0,
    health_band: HealthBand = 0.10,
    health_checks: HealthOn = True,
) -> None:
    """Run the farm service (REST API under /api)."""
    from aidge_deploy.farm.server import serve as run_server
    from aidge_deploy.farm.settings import FarmSettings, HealthSettings

    try:
        settings = FarmSettings(
            data_dir=_data(data_dir),
            coordinator=coordinator,
            database_url=database_url,
            farm_name=farm_name,
            agent_timeout=agent_timeout,
            max_upload_bytes=max_upload_mb * 1024 * 1024,
            max_export_bytes=max_export_mb * 1024 * 1024,
            max_export_members=max_export_members,
            trusted_proxies=tuple(trusted_proxy or ()),
            api_docs=api_docs,
            job_retries=job_retries,
            health=HealthSettings(
                interval_s=health_interval,
                failures=health_failures,
                clean=health_clean,
                recheck_s=health_recheck,
                band=health_band,
                enabled=health_checks,
            ),
        )
    except ValueError as exc:
        _fail(DeployError(f"--trusted-proxy: {exc}", hint="e.g. --trusted-proxy 10.0.0.2"))
    try:
        run_server(settings, host=host, port=port)
    except DeployError as exc:
        _fail(exc)


@app.command()
def agent(
    config: Annotated[Path, typer.Option("--config", "-c", help="Lab file (boards of this host).")],
    url: Annotated[
        str | None, typer.Option(envvar="AIDGE_DEPLOY_FARM_URL", help="Farm service URL.")
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(help="File holding the agent token (else AIDGE_DEPLOY_AGENT_TOKEN)."),
    ] = None,
    work_dir: Annotated[Path, typer.Option(help="Where jobs are unpacked and run.")] = Path(
        "~/.cache/aidge-deploy/farm-agent"
    ),
    coordinator: Annotated[
        str | None, typer.Option(help="labgrid coordinator (default: the service's).")
    ] = None,
    job_nice: Annotated[
        int,
        typer.Option(
            min=0,
            max=19,
            help="CPU priority (nice) of the jobs' builds and emulators, below the agent's "
            "and the service's (0: the agent's own).",
        ),
    ] = DEFAULT_JOB_NICE,
    cache_mb: Annotated[
        int,
        typer.Option(
            min=1,
            help="Size budget of each of the agent's caches (built exports, builds), MiB; "
            "the least recently used entries go first.",
        ),
    ] = 4096,
    stop_grace: Annotated[
        float,
        typer.Option(min=0, help="On SIGTERM, seconds the running jobs may take to finish first."),
    ] = 30.0,
) -> None:
    """Serve the boards of a lab file to a farm."""
    from aidge_deploy.farm.agent import AgentSettings, run_agent

    try:
        token = _agent_token(token_file)
        settings = AgentSettings.from_lab(
            config,
            url=url,
            token=token,
            work_dir=_data(work_dir),
            coordinator=coordinator,
            job_nice=job_nice,
            cache_bytes=cache_mb * 1024 * 1024,
            stop_grace=stop_grace,
        )
        run_agent(settings)
    except DeployError as exc:
        _fail(exc)


def _agent_token(token_file: Path | None) -> str:
    if token_file is not None:
        try:
            return token_file.expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise DeployError(
                f"cannot read the agent token file {token_file}: {exc.strerror}"
            ) from None
    value = os.environ.get("AIDGE_DEPLOY_AGENT_TOKEN", "").strip()
    if not value:
        raise DeployError(
            "no agent token: pass --token-file or set AIDGE_DEPLOY_AGENT_TOKEN",
            hint="An admin creates one: aidge-deploy farm agent-token NAME --write FILE",
        )
    return value


@app.command()
def up(
    data_dir: DataDir = DEFAULT_DATA,
    host: Annotated[str, typer.Option(help="Address the service listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Service port (0: any free one).")] = 8000,
    stop_grace: Annotated[
        float,
        typer.Option(min=0, help="On SIGTERM, seconds the running jobs may take to finish."),
    ] = 30.0,
    board: Annotated[
        list[str] | None,
        typer.Option(
            help="An emulated board NAME=TARGET instead of the three default ones (one per "
            "emulated target, named after it); repeat it, e.g. two boards of one target."
        ),
    ] = None,
    health_interval: HealthInterval = 3600.0,
    health_failures: HealthFailures = 3,
    health_clean: HealthClean = 2,
    health_recheck: HealthRecheck = 60.0,
    health_band: HealthBand = 0.10,
    health_checks: HealthOn = True,
) -> None:
    """Coordinator + service + one local agent with the three emulated boards, all state
    under --data-dir, supervised (a child that dies is started again). SIGTERM or Ctrl-C
    stops every process it started; it exits non-zero only when a child cannot be kept
    alive."""
    from aidge_deploy.farm.up import parse_boards, run_up

    try:
        boards = parse_boards(board or [])
        health = [
            f"--health-interval={health_interval}",
            f"--health-failures={health_failures}",
            f"--health-clean={health_clean}",
            f"--health-recheck={health_recheck}",
            f"--health-band={health_band}",
            "--health-checks" if health_checks else "--no-health-checks",
        ]
        run_up(
            _data(data_dir),
            host=host,
            port=port,
            stop_grace=stop_grace,
            boards=boards,
            serve_args=health,
        )
    except DeployError as exc:
        _fail(exc)
