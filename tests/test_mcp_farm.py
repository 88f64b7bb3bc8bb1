"""The MCP server's farm tools against a real farm (``farmkit``: labgrid coordinator, the
farm service and an agent serving an emulated mps2-an386, each a process on loopback).

Through the SDK's in-process client: ``farm_submit`` queues a profile job and returns at
once; ``farm_status`` follows it to its figures (units, provenance, the board); the job's
time on its board is charged to the budget; ``farm_cancel`` stops a second job; a job of
another session is refused; the farm's password never appears in any output.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from envparts import missing, needs
from farmkit import ALICE, Farm, make_farm, needs_farm, qemu_available

try:
    from mcp import Client
except ImportError:
    missing("the mcp package is not installed (the mcp extra, in dev)")

from aidge_deploy.mcpserver.policy import SessionPolicy
from aidge_deploy.mcpserver.server import build_server
from aidge_deploy.mcpserver.session import FarmAccess, SessionSettings

pytestmark = [
    needs_farm(),
    pytest.mark.slow,
    pytest.mark.qemu,
    needs(qemu_available(), "QEMU or the Arm toolchain is missing"),
]
BOARD = "an386-m"


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = make_farm(tmp_path_factory.mktemp("farm-mcp"), agent_timeout=6.0)
    try:
        farm.start_agent("host-m", {BOARD: "mps2-an386"})
        yield farm
    finally:
        farm.stop_all()


@asynccontextmanager
async def farm_session(farm: Farm, **settings: Any) -> AsyncIterator[Client]:
    server, _ = build_server(
        SessionSettings(farm=FarmAccess(farm.url + "/api", ALICE[0]), **settings)
    )
    async with Client(server) as client:
        yield client


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def _until(client: Client, job: int, done: Any, timeout_s: float = 600.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        result = await client.call_tool("farm_status", {"job": job})
        assert not result.is_error, _text(result)
        status = result.structured_content
        if done(status):
            return status
        assert time.monotonic() < deadline, status
        await anyio.sleep(0.5)


def test_submit_follow_and_cancel_farm_jobs(
    farm: Farm, tiny_cnn: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIDGE_DEPLOY_API_PASSWORD", ALICE[1])
    policy = SessionPolicy.of(boards=[BOARD])
    seen: list[str] = []

    async def go() -> None:
        async with farm_session(farm, policy=policy) as client:
            submitted = await client.call_tool(
                "farm_submit",
                {"model": str(tiny_cnn), "target": "mps2-an386", "board": BOARD, "iterations": 3},
            )
            assert not submitted.is_error, _text(submitted)
            job = submitted.structured_content
            seen.append(json.dumps(job))
            assert job["state"] in ("queued", "reserved", "building", "flashing", "running")
            assert job["budget"]["runs_used"] == 1
            final = await _until(client, job["job"], lambda s: s["state"] == "done")
            seen.append(json.dumps(final))
            run = final["run"]
            assert run["source"]["farm_board"] == BOARD and run["source"]["farm_job"] == job["job"]
            instructions = run["figures"]["emulated_instructions"]
            assert instructions["value"] > 0 and instructions["provenance"] == "emulated"
            assert final["board_seconds"] > 0
            budget = (await client.call_tool("budget", {})).structured_content
            assert budget["runs_in_progress"] == 0
            assert budget["board_minutes_used"] * 60 == pytest.approx(
                final["board_seconds"], abs=0.01
            )
            # a second job, cancelled while it waits or runs
            second = await client.call_tool(
                "farm_submit",
                {"model": str(tiny_cnn), "target": "mps2-an386", "board": BOARD, "iterations": 3},
            )
            assert not second.is_error, _text(second)
            cancelled = await client.call_tool(
                "farm_cancel", {"job": second.structured_content["job"]}
            )
            assert not cancelled.is_error, _text(cancelled)
            seen.append(_text(cancelled))
            end = await _until(
                client,
                second.structured_content["job"],
                lambda s: s["state"] in ("cancelled", "done", "failed"),
            )
            assert end["state"] == "cancelled"
        async with farm_session(farm, policy=policy) as other:
            refused = await other.call_tool("farm_cancel", {"job": job["job"]})
            assert refused.is_error
            assert f"farm job {job['job']} was not submitted by this session" in _text(refused)

    anyio.run(go)
    assert all(ALICE[1] not in text for text in seen), "the farm password was shown"
