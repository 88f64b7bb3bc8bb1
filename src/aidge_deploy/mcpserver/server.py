"""The server: the tools on an ``MCPServer``, served over stdio until the session ends.

Why this module exists: it is the one place the session's tools are put together
(``lab``: read-only; ``runs``: profile and validate; ``farmtools``: the farm's jobs) and
served. Over stdio (what ``aidge-deploy mcp`` does) the SDK keeps fd 1 for the protocol
(what the exporter and the builds print goes to stderr) and cancels every call in flight
when the client closes the session; SIGTERM, SIGHUP and SIGINT do the same here, so a run
in progress is stopped with every process of it before the server exits, and the
session's farm jobs still running are cancelled.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

import anyio
import anyio.to_thread
from mcp.server import MCPServer

from aidge_deploy.mcpserver import farmtools, lab, runs
from aidge_deploy.mcpserver.session import Session, SessionSettings

#: the signals that end the session (as ``runcontrol.STOP_SIGNALS`` end a CLI run)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

INSTRUCTIONS = (
    "aidge-deploy: deploy and profile Aidge exports of ONNX models on the host, emulated "
    "Cortex-M boards and a board farm. Read first (targets, doctor, history, compare, "
    "budget: read-only); runs (profile, validate, farm_submit) take from the session's "
    "budget of runs and board-minutes. Every figure has a unit and a provenance: 'emulated' "
    "counts are QEMU instructions, never cycles of real hardware; an unavailable figure says "
    "why."
)


def build_server(settings: SessionSettings) -> tuple[MCPServer, Session]:
    """The server of one session and its state."""
    session = Session(settings)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(farmtools.close_jobs, session)

    server: MCPServer = MCPServer(
        "aidge-deploy",
        title="aidge-deploy",
        instructions=INSTRUCTIONS,
        version=version("aidge-deploy"),
        lifespan=lifespan,
    )
    lab.register(server, session)
    runs.register(server, session)
    farmtools.register(server, session)
    return server, session


async def serve_stdio(server: MCPServer, session: Session) -> None:
    """Serve over stdio until the client leaves; a stop signal ends the process (below)."""
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_on_signals, session)
        await server.run_stdio_async()
        group.cancel_scope.cancel()


async def _stop_on_signals(session: Session) -> None:
    """On SIGTERM, SIGHUP or SIGINT: stop every run in progress (every process of it) and
    cancel the session's farm jobs, then exit with 128 + the signal. The process exits
    from here: the SDK's reader of stdin cannot be interrupted, and nothing of the session
    is left to wind down."""
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(session.stop_runs, f"the server got {name}")
                await anyio.to_thread.run_sync(farmtools.close_jobs, session)
            sys.stderr.flush()
            os._exit(128 + signum)


def run_stdio(settings: SessionSettings) -> int:
    """``aidge-deploy mcp``: serve one session over stdio; its exit status."""
    server, session = build_server(settings)
    anyio.run(serve_stdio, server, session)
    return 0


__all__ = ["INSTRUCTIONS", "STOP_SIGNALS", "build_server", "run_stdio", "serve_stdio"]
