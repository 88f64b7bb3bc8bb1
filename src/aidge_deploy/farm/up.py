"""``aidge-deploy farm up``: a whole farm on one machine, for a small lab or a demo.

It starts a labgrid coordinator (working folder ``DIR/coordinator``), the farm service
(state in ``DIR``) and one local agent (``DIR/agent``) serving the three emulated boards
under their target names, each in its own process group. SIGTERM, SIGINT or SIGHUP — or
any of them dying — stops all of them (TERM, then KILL after a grace period).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aidge_deploy.errors import DeployError

EMULATED_BOARDS = ("mps2-an386", "mps3-an547", "netduinoplus2")
AGENT_NAME = "local"


class _Stop(Exception):
    pass


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def run_up(data_dir: Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    from aidge_deploy.farm.auth import has_admin, issue_agent_token
    from aidge_deploy.farm.db import Database
    from aidge_deploy.farm.service import NoAdminError
    from aidge_deploy.farm.settings import FarmSettings

    settings = FarmSettings(data_dir=data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.db_url)
    with db.session() as s:
        if not has_admin(s):
            raise NoAdminError(
                "the farm has no admin user yet (there is no default password)",
                hint=f"AIDGE_DEPLOY_API_PASSWORD=... aidge-deploy farm user add NAME --admin "
                f"--data-dir {data_dir}",
            )
        token = issue_agent_token(s, AGENT_NAME)
    db.dispose()
    agent_dir = data_dir / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    token_file = agent_dir / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    lab = agent_dir / "lab.yaml"
    lab.write_text(
        "version: 1\nname: farm-up\nboards:\n"
        + "".join(f"  {b}: {{target: {b}, emulated: true}}\n" for b in EMULATED_BOARDS),
        encoding="utf-8",
    )
    procs: list[subprocess.Popen[Any]] = []
    names: dict[int, str] = {}

    def stop_all(*_: Any) -> None:
        raise _Stop

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop_all)
    try:
        coord_dir = data_dir / "coordinator"
        coord_dir.mkdir(exist_ok=True)
        coord_log = data_dir / "coordinator.log"
        coord = _spawn([_bin("labgrid-coordinator"), "-l", "127.0.0.1:0"], coord_dir, coord_log)
        procs.append(coord)
        names[coord.pid] = "labgrid-coordinator"
        address = _wait_for(
            lambda: _match(r"listening on (\S+:\d+)", coord_log), coord, "labgrid-coordinator"
        )
        url_file = data_dir / "service.url"
        url_file.unlink(missing_ok=True)
        service = _spawn(
            [
                _bin("aidge-deploy"),
                "farm",
                "serve",
                "--data-dir",
                str(data_dir),
                "--host",
                host,
                "--port",
                str(port),
                "--coordinator",
                address,
            ],
            data_dir,
            data_dir / "service.log",
        )
        procs.append(service)
        names[service.pid] = "the farm service"
        url = _wait_for(
            lambda: url_file.read_text().strip() if url_file.exists() else None, service, "service"
        )
        agent = _spawn(
            [
                _bin("aidge-deploy"),
                "farm",
                "agent",
                "--config",
                str(lab),
                "--url",
                url,
                "--token-file",
                str(token_file),
                "--work-dir",
                str(agent_dir / "work"),
            ],
            agent_dir,
            data_dir / "agent.log",
        )
        procs.append(agent)
        names[agent.pid] = "the local agent"
        print(f"farm up: API {url}/api, boards {', '.join(EMULATED_BOARDS)}", flush=True)
        print(f"logs and state in {data_dir}; SIGTERM or Ctrl-C stops it", flush=True)
        while True:
            for p in procs:
                if p.poll() is not None:
                    raise DeployError(
                        f"{names.get(p.pid, 'a farm process')} exited with status "
                        f"{p.returncode}; stopping the farm",
                        hint=f"See the logs in {data_dir}.",
                    )
            time.sleep(0.5)
    except _Stop:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        _stop(reversed(procs))


def _spawn(args: list[str], cwd: Path, log: Path) -> subprocess.Popen[Any]:
    from aidge_deploy.cpupriority import share_priority

    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    share_priority(proc.pid)  # `nice aidge-deploy farm up` holds for all it starts
    return proc


def _match(pattern: str, path: Path) -> str | None:
    if not path.exists():
        return None
    m = re.findall(pattern, path.read_text(errors="replace"))
    return m[-1] if m else None


def _wait_for(probe: Any, proc: subprocess.Popen[Any], what: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return str(value)
        if proc.poll() is not None:
            raise DeployError(f"{what} exited with status {proc.returncode} while starting")
        time.sleep(0.1)
    raise DeployError(f"{what} did not start in {timeout:.0f} s")


def _stop(procs: Any, grace: float = 15.0) -> None:
    procs = list(procs)
    for p in procs:  # agent first: it cancels its jobs and releases its boards
        if p.poll() is None:
            _signal(p, signal.SIGTERM)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                _signal(p, signal.SIGKILL)
                p.wait(5)
        _signal(p, signal.SIGKILL)  # whatever is left in its process group


def _signal(p: subprocess.Popen[Any], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, sig)


__all__ = ["EMULATED_BOARDS", "run_up"]
