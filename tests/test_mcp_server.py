"""``aidge-deploy mcp`` driven by the MCP SDK's own client (issue 31, the agent's door).

In memory (``Client(server)``: the SDK's in-process transport) for the session's rules, and
over stdio against ``aidge-deploy mcp`` as a subprocess (``Client(StdioServerParameters)``)
for a real profile of a model on the emulated mps2-an386. Nothing is faked: the model is
exported with Aidge, built with arm-none-eabi-gcc and run in QEMU. The process tree of the
test is watched (psutil) where a run is stopped: a cancelled call, a closed session and a
spent budget must leave no QEMU and no compiler behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from envparts import missing, needs
from proctree import TreeWatch, assert_nothing_left, named

try:
    from mcp import Client, StdioServerParameters
except ImportError:
    missing("the mcp package is not installed (the mcp extra, in dev)")

from aidge_deploy.mcpserver.budget import Limits
from aidge_deploy.mcpserver.policy import SessionPolicy
from aidge_deploy.mcpserver.server import build_server
from aidge_deploy.mcpserver.session import FarmAccess, SessionSettings

READ_ONLY_TOOLS = {"targets", "doctor", "compare", "history", "budget", "farm_status"}
DESTRUCTIVE_TOOLS = {"profile", "validate", "farm_submit", "farm_cancel"}
BOARD = "mps2-an386"
qemu = needs(shutil.which("qemu-system-arm") is not None, "needs qemu-system-arm")


@asynccontextmanager
async def session(**settings: Any) -> AsyncIterator[Client]:
    server, _ = build_server(SessionSettings(**settings))
    async with Client(server) as client:
        yield client


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_the_tools_are_listed_each_read_only_or_destructive() -> None:
    async def go() -> None:
        async with session() as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == READ_ONLY_TOOLS | DESTRUCTIVE_TOOLS
            for name in READ_ONLY_TOOLS:
                assert tools[name].annotations.read_only_hint is True, name
            for name in DESTRUCTIVE_TOOLS:
                hints = tools[name].annotations
                assert hints.read_only_hint is False and hints.destructive_hint is True, name
            # figures come back structured: the output schemas are published
            figure = tools["profile"].output_schema["$defs"]["Figure"]["properties"]
            assert {"value", "unit", "provenance", "resolution", "unavailable_reason"} <= set(
                figure
            )

    anyio.run(go)


def test_a_read_only_session_refuses_every_destructive_tool() -> None:
    async def go() -> None:
        async with session(policy=SessionPolicy.of(read_only=True)) as client:
            calls = {
                "profile": {"model": "/nonexistent.onnx", "target": BOARD},
                "validate": {"model": "/nonexistent.onnx", "targets": [BOARD]},
                "farm_submit": {"model": "/nonexistent.onnx", "target": BOARD},
                "farm_cancel": {"job": 1},
            }
            for name, arguments in calls.items():
                result = await client.call_tool(name, arguments)
                assert result.is_error, name
                text = _text(result)
                assert f"refused: {name} is a destructive tool" in text, text
                assert "read-only" in text
            targets = await client.call_tool("targets", {})
            assert not targets.is_error
            assert targets.structured_content["policy"]["read_only"] is True
            budget = (await client.call_tool("budget", {})).structured_content
            assert budget["runs_used"] == 0
            doctor = await client.call_tool("doctor", {})
            assert not doctor.is_error, _text(doctor)
            ways = {row["subject"]: row for row in doctor.structured_content["targets"]}
            assert any("host" in subject for subject in ways)

    anyio.run(go)


def test_targets_and_boards_outside_the_allowlist_are_refused(tiny_cnn: Path) -> None:
    policy = SessionPolicy.of(targets=[BOARD], boards=["an386-1"])

    async def go() -> None:
        async with session(policy=policy) as client:
            result = await client.call_tool("profile", {"model": str(tiny_cnn), "target": "host"})
            assert result.is_error
            assert "refused: target 'host' is not in this session's allowlist" in _text(result)
            assert "Allowed targets: mps2-an386" in _text(result)
            result = await client.call_tool(
                "validate", {"model": str(tiny_cnn), "targets": [BOARD, "mps3-an547"]}
            )
            assert result.is_error and "'mps3-an547' is not in" in _text(result)
            result = await client.call_tool(
                "farm_submit", {"model": str(tiny_cnn), "target": BOARD, "board": "an386-2"}
            )
            assert result.is_error
            assert "refused: board 'an386-2' is not in this session's allowlist" in _text(result)
            result = await client.call_tool(
                "farm_submit", {"model": str(tiny_cnn), "target": BOARD}
            )
            assert result.is_error and "name one" in _text(result)
            listed = (await client.call_tool("targets", {})).structured_content["targets"]
            allowed = {t["target"] for t in listed if t["allowed"]}
            assert allowed == {BOARD}
            budget = (await client.call_tool("budget", {})).structured_content
            assert budget["runs_used"] == 0, "a refused call takes nothing from the budget"

    anyio.run(go)


def _server(*args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "aidge_deploy.cli.main", "mcp", *args],
        env=dict(os.environ),
    )


@pytest.mark.qemu
@pytest.mark.slow
@qemu
def test_profile_on_an_emulated_board_over_stdio_then_the_budget_stops(
    tiny_cnn: Path, tmp_path: Path
) -> None:
    history = tmp_path / "history.db"
    params = _server("--allow-target", BOARD, "--max-runs", "1", "--history", str(history))

    async def go() -> None:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == READ_ONLY_TOOLS | DESTRUCTIVE_TOOLS
            result = await client.call_tool(
                "profile", {"model": str(tiny_cnn), "target": BOARD, "iterations": 3}
            )
            assert not result.is_error, _text(result)
            out = result.structured_content
            run = out["run"]
            assert run["source"]["target"] == BOARD and run["source"]["provenance"] == "emulated"
            figures = run["figures"]
            instructions = figures["emulated_instructions"]
            assert instructions["value"] > 0 and instructions["provenance"] == "emulated"
            assert instructions["unit"] == "instructions"
            latency = figures["latency"]
            assert latency["unit"] == "ms" and latency["provenance"] == "estimated"
            assert latency["resolution"] is not None
            flash = figures["flash_bytes"]
            assert flash["unit"] == "B" and flash["provenance"] == "static"
            for name, figure in figures.items():  # a figure that does not exist says why
                assert figure["value"] is not None or figure["unavailable_reason"], name
            assert run["layers"] and all(layer["figures"] for layer in run["layers"])
            assert Path(run["source"]["bundle"], "summary.json").is_file()
            assert run["source"]["history_record"] is not None
            assert out["budget"]["runs_used"] == 1 and out["budget"]["runs_left"] == 0
            # the budget: a second run is refused, with what was spent
            again = await client.call_tool("profile", {"model": str(tiny_cnn), "target": BOARD})
            assert again.is_error
            assert "session budget exhausted: 1 of 1 runs used" in _text(again)
            # its bundle compared with itself: comparable, nothing changed
            bundle = run["source"]["bundle"]
            same = await client.call_tool("compare", {"base": bundle, "candidate": bundle})
            assert not same.is_error, _text(same)
            assert (
                same.structured_content["comparable"] and same.structured_content["exit_code"] == 0
            )
            # the run is in the history, with its figures
            listed = await client.call_tool("history", {"target": BOARD})
            (record,) = listed.structured_content["runs"]
            assert record["source"] == "mcp"
            assert record["figures"]["emulated_instructions"]["value"] == instructions["value"]

    anyio.run(go)


async def _watched(watch: TreeWatch, call: Any) -> Any:
    """Await ``call`` while recording every process under the test (every 50 ms)."""
    outcome: list[Any] = []

    async def poll() -> None:
        while not outcome:
            await anyio.to_thread.run_sync(watch.poll)
            await anyio.sleep(0.05)

    async def wait() -> None:
        outcome.append(await call)

    async with anyio.create_task_group() as group:
        group.start_soon(poll)
        group.start_soon(wait)
    return outcome[0]


def _long_profile(model: Path) -> dict[str, Any]:
    """A profile whose run lasts (many inferences): stopped before its end."""
    return {"model": str(model), "target": BOARD, "iterations": 20000, "warmup": 0}


@pytest.mark.qemu
@pytest.mark.slow
@qemu
def test_a_cancelled_call_stops_its_run_and_leaves_no_process(tiny_cnn: Path) -> None:
    watch = TreeWatch(os.getpid(), ignore_existing=True)

    async def go() -> None:
        async with session() as client:
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "profile", _long_profile(tiny_cnn))
                await anyio.to_thread.run_sync(watch.wait_for, named("qemu-system"), "QEMU")
                group.cancel_scope.cancel()  # the client gives up on the call
            budget = (await client.call_tool("budget", {})).structured_content
            assert budget["runs_in_progress"] == 0 and budget["runs_used"] == 1

    anyio.run(go)
    assert_nothing_left(watch)


@pytest.mark.qemu
@pytest.mark.slow
@qemu
def test_board_minutes_stop_a_run_with_a_clear_message(tiny_cnn: Path) -> None:
    watch = TreeWatch(os.getpid(), ignore_existing=True)
    limits = Limits(max_board_minutes=0.05)  # 3 s of board time

    async def go() -> None:
        async with session(limits=limits) as client:
            result = await _watched(watch, client.call_tool("profile", _long_profile(tiny_cnn)))
            assert result.is_error
            text = _text(result)
            assert "stopped by the session budget: its 0.05 board-minutes are spent" in text
            assert "none of its processes is left running" in text
            budget = (await client.call_tool("budget", {})).structured_content
            assert budget["board_minutes_left"] == 0.0 and budget["runs_in_progress"] == 0
            again = await client.call_tool("profile", _long_profile(tiny_cnn))
            assert again.is_error and "session budget exhausted" in _text(again)
            assert "board-minutes used" in _text(again)

    anyio.run(go)
    assert_nothing_left(watch)


@pytest.mark.qemu
@pytest.mark.slow
@qemu
def test_a_closed_session_leaves_no_process(tiny_cnn: Path) -> None:
    watch = TreeWatch(os.getpid(), ignore_existing=True)

    async def go() -> None:
        async with Client(_server()) as client, anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "profile", _long_profile(tiny_cnn))
            await anyio.to_thread.run_sync(watch.wait_for, named("qemu-system"), "QEMU")
            group.cancel_scope.cancel()
        # leaving the client closes the server's stdin: the session ends

    anyio.run(go)
    assert_nothing_left(watch)


@pytest.mark.qemu
@pytest.mark.slow
@qemu
def test_sigterm_stops_the_server_and_every_process_of_its_run(tiny_cnn: Path) -> None:
    watch = TreeWatch(os.getpid(), ignore_existing=True)
    servers: list[psutil.Process] = []

    async def call(client: Client) -> None:
        with contextlib.suppress(Exception):  # the connection ends with the server
            await client.call_tool("profile", _long_profile(tiny_cnn))

    async def go() -> None:
        async with Client(_server()) as client, anyio.create_task_group() as group:
            group.start_soon(call, client)
            await anyio.to_thread.run_sync(watch.wait_for, named("qemu-system"), "QEMU")
            (server,) = [
                p
                for p in psutil.Process().children()
                if "mcp" in p.cmdline() and "aidge_deploy.cli.main" in p.cmdline()
            ]
            servers.append(server)
            server.send_signal(signal.SIGTERM)
            # it stops its run and exits by itself, well before the client would kill it
            await anyio.to_thread.run_sync(server.wait, 30)

    anyio.run(go)
    assert not servers[0].is_running()
    assert_nothing_left(watch)


@pytest.mark.qemu
@pytest.mark.slow
@qemu
def test_validate_runs_each_target_and_takes_one_run_each(tiny_cnn: Path) -> None:
    async def go() -> None:
        async with session(limits=Limits(max_runs=1)) as client:
            too_many = await client.call_tool(
                "validate", {"model": str(tiny_cnn), "targets": [BOARD, "mps3-an547"]}
            )
            assert too_many.is_error and "1 of 1 runs used" in _text(too_many)
            budget = (await client.call_tool("budget", {})).structured_content
            assert budget["runs_used"] == 0, "all or none: the runs taken are given back"
            result = await client.call_tool(
                "validate", {"model": str(tiny_cnn), "targets": [BOARD]}
            )
            assert not result.is_error, _text(result)
            out = result.structured_content
            assert out["passed"] and out["failures"] == []
            (check,) = [c for c in out["report"]["matrix"] if c["target"] == BOARD]
            assert check["passed"]
            assert out["budget"]["runs_used"] == 1

    anyio.run(go)


def test_no_secret_reaches_an_output(tiny_cnn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The farm's password (environment) and the credentials of its URL are masked in what
    the tools return, error messages included (a farm that is not there: refused)."""
    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AIDGE_DEPLOY_API_PASSWORD", "env-secret-4242")
    farm = FarmAccess(f"http://bob:url-secret-4242@127.0.0.1:{port}/api", "bob")

    async def go() -> list[str]:
        async with session(farm=farm) as client:
            texts = []
            result = await client.call_tool(
                "farm_submit", {"model": str(tiny_cnn), "target": BOARD, "iterations": 2}
            )
            assert result.is_error
            texts.append(_text(result))
            texts.append(str((await client.call_tool("budget", {})).structured_content))
            return texts

    texts = anyio.run(go)
    assert "cannot reach the board farm" in texts[0], texts[0]
    for text in texts:
        assert "env-secret-4242" not in text and "url-secret-4242" not in text, text
