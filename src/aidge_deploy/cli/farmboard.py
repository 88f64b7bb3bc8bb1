"""``aidge-deploy farm board ...``: drain, admit, health-check a farm's boards and show
their health history, through the service's REST API (admins for the changes).

Credentials as for every farm client: ``AIDGE_DEPLOY_API_TOKEN``, or ``--username`` with
``AIDGE_DEPLOY_API_PASSWORD`` (never an option). The service re-publishes a changed board
to labgrid at once, which a change written to its database from outside would not do.
Output is one tab-separated line per board or run (plain text, for scripts).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer

from aidge_deploy.cli.render import error_exit
from aidge_deploy.errors import AuthenticationError, DeployError

if TYPE_CHECKING:
    from aidge_deploy.farm.client import FarmClient

app = typer.Typer(
    help="A farm's boards: drain, admit, health checks (admins), health history.",
    no_args_is_help=True,
)

Url = Annotated[
    str, typer.Option("--url", envvar="AIDGE_DEPLOY_FARM_URL", help="Farm service URL.")
]
Username = Annotated[
    str | None,
    typer.Option("--username", help="Log in as this user (password: AIDGE_DEPLOY_API_PASSWORD)."),
]


def _client(url: str, username: str | None) -> FarmClient:
    from aidge_deploy.farm.client import FarmClient, credentials_from_env

    creds = credentials_from_env()
    client = FarmClient(url, token=creds.token if not username else None)
    if username:
        if not creds.password:
            raise AuthenticationError(
                f"no password for {username}", hint="Set AIDGE_DEPLOY_API_PASSWORD."
            )
        client.login(username, creds.password)
    elif not creds.token:
        raise AuthenticationError(
            "no credentials for the farm",
            hint="Set AIDGE_DEPLOY_API_TOKEN, or pass --username with AIDGE_DEPLOY_API_PASSWORD.",
        )
    return client


def _show(view: dict[str, object]) -> None:
    state = view["state"]
    reason = (
        f" ({view['drain_reason']}, by {view['drained_by']})" if view.get("drain_reason") else ""
    )
    typer.echo(f"{view['name']}\t{view['target']}\t{state}{reason}")


def _post(url: str, username: str | None, path: str, body: dict[str, str] | None = None) -> None:
    try:
        with _client(url, username) as c:
            r = c.request("POST", path, json=body) if body is not None else c.request("POST", path)
            _show(r.json())
    except DeployError as exc:
        raise error_exit(exc) from None


@app.command("drain")
def drain(
    name: str,
    url: Url,
    reason: Annotated[
        str, typer.Option(help="Why (shown on the boards page).")
    ] = "drained by an admin",
    username: Username = None,
) -> None:
    """Take board NAME out of service (admins): its running job finishes, no new one lands."""
    _post(url, username, f"/boards/{name}/drain", {"reason": reason})


@app.command("admit")
def admit(name: str, url: Url, username: Username = None) -> None:
    """Return board NAME to service (admins)."""
    _post(url, username, f"/boards/{name}/admit")


@app.command("check")
def check(name: str, url: Url, username: Username = None) -> None:
    """Run board NAME's golden jobs now (admins); `farm board health` shows the outcome."""
    _post(url, username, f"/boards/{name}/health-check")


@app.command("health")
def health(
    name: str,
    url: Url,
    username: Username = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many runs.")] = 20,
) -> None:
    """Board NAME's health checks, newest first: time, trigger, outcome, figure, reason."""
    try:
        with _client(url, username) as c:
            runs = c.request("GET", f"/boards/{name}/health", params={"limit": limit}).json()
    except DeployError as exc:
        raise error_exit(exc) from None
    for run in runs:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["created_at"]))
        figure = (
            f"{run['figure']:g} {run['figure_unit']}" if run["figure"] is not None else "no figure"
        )
        action = f" [{run['action']}]" if run["action"] else ""
        typer.echo(f"{at}\t{run['trigger']}\t{run['outcome']}\t{figure}\t{run['reason']}{action}")


__all__ = ["app"]
