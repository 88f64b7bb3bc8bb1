"""``aidge-deploy mcp``: serve the tools to an agent over stdio (Model Context Protocol).

The options are the session's rules (``mcpserver.policy``, ``mcpserver.budget``): a
read-only mode, allowlists of targets and farm boards, a budget of runs and board-minutes.
The farm's password or token come from the environment, never from an option.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from aidge_deploy.cli.render import print_error
from aidge_deploy.errors import ConfigError


def mcp(
    read_only: Annotated[
        bool,
        typer.Option("--read-only", help="Refuse every tool that runs, queues or cancels."),
    ] = False,
    allow_target: Annotated[
        list[str] | None,
        typer.Option("--allow-target", help="Only this target (repeatable; default: any)."),
    ] = None,
    allow_board: Annotated[
        list[str] | None,
        typer.Option("--allow-board", help="Only this farm board (repeatable; default: any)."),
    ] = None,
    max_runs: Annotated[
        int | None, typer.Option(min=0, help="Runs the session may start (default: no limit).")
    ] = None,
    max_board_minutes: Annotated[
        float | None,
        typer.Option(min=0.0, help="Board-minutes the session may use (default: no limit)."),
    ] = None,
    max_timeout: Annotated[
        float, typer.Option(min=1.0, help="Longest timeout a tool may ask per program run, s.")
    ] = 600.0,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            envvar="AIDGE_DEPLOY_HISTORY",
            help="Record every run in this results history (and query it by default).",
        ),
    ] = None,
    farm_url: Annotated[
        str | None, typer.Option(help="The board farm's address, for the farm tools.")
    ] = None,
    farm_user: Annotated[
        str | None,
        typer.Option(help="The farm user (password in AIDGE_DEPLOY_API_PASSWORD, or a token)."),
    ] = None,
) -> None:
    """Serve aidge-deploy's tools to an agent over stdio (the Model Context Protocol)."""
    try:
        from aidge_deploy.mcpserver.budget import Limits
        from aidge_deploy.mcpserver.policy import SessionPolicy
        from aidge_deploy.mcpserver.server import run_stdio
        from aidge_deploy.mcpserver.session import FarmAccess, SessionSettings
    except ImportError as exc:  # the optional extra
        print_error(
            ConfigError(
                f"the MCP server needs the mcp package ({exc.name} is missing)",
                hint="pip install 'aidge-deploy[mcp]'",
            )
        )
        raise typer.Exit(code=2) from None
    settings = SessionSettings(
        policy=SessionPolicy.of(read_only=read_only, targets=allow_target, boards=allow_board),
        limits=Limits(max_runs=max_runs, max_board_minutes=max_board_minutes),
        history=history,
        farm=None if farm_url is None else FarmAccess(farm_url, farm_user),
        max_run_timeout_s=max_timeout,
    )
    sys.exit(run_stdio(settings))


__all__ = ["mcp"]
