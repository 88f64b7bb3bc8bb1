"""``aidge-deploy farm ...``: run a board farm (service, agents, one-machine ``up``) and
manage its users and agent tokens.

Passwords come from ``AIDGE_DEPLOY_API_PASSWORD`` or a prompt, never from an option
(options are visible in ``ps``). Agent tokens are printed once, or written to a file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

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


def _data(path: Path) -> Path:
    return Path(os.path.expanduser(str(path)))


def _fail(exc: DeployError) -> None:
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
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Database(settings.db_url)


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
        db = _db(data_dir, database_url)
        with db.session() as s:
            add_user(s, name, password, Role.ADMIN if admin else Role.USER)
        db.dispose()
    except DeployError as exc:
        _fail(exc)
    console.print(f"user {name} added ({'admin' if admin else 'user'})")


@user_app.command("passwd")
def user_passwd(
    name: str, data_dir: DataDir = DEFAULT_DATA, database_url: DatabaseUrl = None
) -> None:
    """Reset a user's password (their tokens end)."""
    from aidge_deploy.farm.auth import set_password

    try:
        password = read_password(confirm=True)
        db = _db(data_dir, database_url)
        with db.session() as s:
            set_password(s, name, password)
        db.dispose()
    except DeployError as exc:
        _fail(exc)
    console.print(f"password of {name} changed")


@user_app.command("list")
def user_list(data_dir: DataDir = DEFAULT_DATA, database_url: DatabaseUrl = None) -> None:
    from sqlalchemy import select

    from aidge_deploy.farm.db import User

    db = _db(data_dir, database_url)
    with db.session() as s:
        for u in s.scalars(select(User).order_by(User.name)):
            console.print(f"{u.name}\t{u.role}{'\tdisabled' if u.disabled else ''}")
    db.dispose()


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

    try:
        db = _db(data_dir, database_url)
        with db.session() as s:
            token = issue_agent_token(s, name)
        db.dispose()
    except DeployError as exc:
        _fail(exc)
        return
    if write is not None:
        write_secret(write, token)
        console.print(f"token of agent {name} written to {write}")
    else:
        sys.stdout.write(token + "\n")


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
    max_upload_mb: Annotated[int, typer.Option(help="Largest export upload.")] = 200,
) -> None:
    """Run the farm service (REST API under /api)."""
    from aidge_deploy.farm.server import serve as run_server
    from aidge_deploy.farm.settings import FarmSettings

    settings = FarmSettings(
        data_dir=_data(data_dir),
        coordinator=coordinator,
        database_url=database_url,
        farm_name=farm_name,
        agent_timeout=agent_timeout,
        max_upload_bytes=max_upload_mb * 1024 * 1024,
    )
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
) -> None:
    """Coordinator + service + one local agent with the three emulated boards, all state
    under --data-dir. SIGTERM or Ctrl-C stops every process it started."""
    from aidge_deploy.farm.up import run_up

    try:
        run_up(_data(data_dir), host=host, port=port)
    except DeployError as exc:
        _fail(exc)
