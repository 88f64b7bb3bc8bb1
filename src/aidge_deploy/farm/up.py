"""``aidge-deploy farm up``: a whole farm on one machine, for a small lab or a demo.

It starts a labgrid coordinator (working folder ``DIR/coordinator``), the farm service
(state in ``DIR``) and one local agent (``DIR/agent``) serving the three emulated boards
under their target names, each in its own process group, and supervises them: a child
that dies is started again (after 1, 2, 4 ... up to 30 s, each restart logged), the others
keep running — the coordinator on the address it had, the service on its port, so the
agent and the service find them again. A child that dies ``GIVE_UP_AFTER`` times within
``GIVE_UP_WINDOW_S`` cannot be kept alive: then everything stops and ``farm up`` exits
non-zero, so systemd (``contrib/farm/systemd/aidge-farm-up.service``) restarts it.

Started again on the same data folder, it comes back as it was: the same users, boards,
queued jobs and history (the service reconciles the jobs of the previous run). What this
run learnt about its children is in ``DIR/farm-up.json``, written for this run: the
coordinator's address comes from what *this* coordinator printed, never from an older
line of its log. SIGTERM, SIGINT or SIGHUP stop all of them, the agent first (it lets its
running jobs finish for ``--stop-grace`` seconds), then the service and the coordinator.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aidge_deploy.errors import DeployError

EMULATED_BOARDS = ("mps2-an386", "mps3-an547", "netduinoplus2")
AGENT_NAME = "local"
#: a child that dies this many times within the window cannot be kept alive
GIVE_UP_AFTER = 5
GIVE_UP_WINDOW_S = 300.0
#: waits between two starts of a child that keeps dying
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
STATE_FILE = "farm-up.json"


class _Stop(Exception):
    pass


class ChildLost(DeployError):
    """A child of ``farm up`` kept dying: the farm cannot be kept alive."""


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def say(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} farm up: {message}", flush=True)


@dataclass
class Child:
    """One supervised process: how to start it and how to tell it is ready."""

    name: str
    argv: Callable[[], list[str]]
    cwd: Path
    log: Path
    #: what the child's readiness gives (an address, a URL), or None while starting
    ready: Callable[[Child], str | None]
    proc: subprocess.Popen[Any] | None = None
    #: where this start's output begins in its log
    log_offset: int = 0
    deaths: list[float] = field(default_factory=list)
    restart_at: float | None = None
    #: run before each start (e.g. remove what the previous start left)
    before_start: Callable[[], None] = lambda: None

    def start(self) -> None:
        from aidge_deploy.cpupriority import share_priority

        self.before_start()
        self.log_offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv(),
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        share_priority(self.proc.pid)  # `nice aidge-deploy farm up` holds for all it starts

    def output(self) -> str:
        """What this start of the child printed (not its earlier starts)."""
        if not self.log.exists():
            return ""
        with open(self.log, "rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        proc = self.proc
        while time.monotonic() < deadline:
            value = self.ready(self)
            if value:
                return value
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise DeployError(
                    f"{self.name} exited with status {code} while starting",
                    hint=f"See {self.log}.",
                )
            time.sleep(0.1)
        raise DeployError(f"{self.name} did not start in {timeout:.0f} s", hint=f"See {self.log}.")

    def died(self) -> int | None:
        """Its exit status if it has ended (its process group is ended with it)."""
        if self.proc is None or self.proc.poll() is None:
            return None
        _signal(self.proc, signal.SIGKILL)  # whatever it left in its process group
        return self.proc.returncode


def parse_boards(specs: list[str]) -> dict[str, str]:
    """``NAME=TARGET`` options as board name -> emulated target (empty: the default ones)."""
    from aidge_deploy.errors import ConfigError

    boards: dict[str, str] = {}
    for spec in specs:
        name, sep, target = spec.partition("=")
        if not sep or not name or not target:
            raise ConfigError(
                f"--board {spec!r}: expected NAME=TARGET",
                hint=f"e.g. --board an386-a=mps2-an386 (emulated targets: {', '.join(EMULATED_BOARDS)})",
            )
        if target not in EMULATED_BOARDS:
            raise ConfigError(
                f"--board {spec!r}: {target!r} is not an emulated target",
                hint=f"farm up serves emulated boards: {', '.join(EMULATED_BOARDS)}.",
            )
        if name in boards:
            raise ConfigError(f"--board: {name!r} is named twice", hint="Board names are unique.")
        boards[name] = target
    return boards


def run_up(
    data_dir: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    stop_grace: float = 30.0,
    boards: dict[str, str] | None = None,
    serve_args: list[str] | None = None,
) -> None:
    """``serve_args``: more options of ``farm serve`` (the health checks')."""
    from aidge_deploy.farm.auth import has_admin, issue_agent_token
    from aidge_deploy.farm.db import Database
    from aidge_deploy.farm.settings import FarmSettings, private_data_dir
    from aidge_deploy.farm.state import NoAdminError

    data_dir = Path(data_dir).resolve()  # its children run in folders of their own
    settings = FarmSettings(data_dir=data_dir)
    private_data_dir(data_dir)
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
    agent_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    token_file = agent_dir / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    lab = agent_dir / "lab.yaml"
    lab.write_text(
        "version: 1\nname: farm-up\nboards:\n"
        + "".join(
            f"  {name}: {{target: {target}, emulated: true}}\n"
            for name, target in (boards or {b: b for b in EMULATED_BOARDS}).items()
        ),
        encoding="utf-8",
    )
    farm = _UpFarm(data_dir, host, port, lab, token_file, stop_grace, serve_args or [])
    farm.board_names = tuple(boards or EMULATED_BOARDS)
    farm.run()


class Supervisor:
    """Keeps children alive: one that dies is started again after a back-off (logged),
    the others keep running; one that dies ``give_up_after`` times within ``window_s``
    cannot be kept alive (``ChildLost``)."""

    def __init__(
        self,
        children: list[Child],
        *,
        backoff: tuple[float, ...] = BACKOFF_S,
        give_up_after: int = GIVE_UP_AFTER,
        window_s: float = GIVE_UP_WINDOW_S,
        started: Callable[[Child, str], None] = lambda child, value: None,
    ) -> None:
        self.children = children
        self.backoff = backoff
        self.give_up_after = give_up_after
        self.window_s = window_s
        self.started = started

    def start(self, child: Child) -> None:
        child.start()
        self.started(child, child.wait_ready())

    def start_all(self) -> None:
        for child in self.children:
            self.start(child)

    def supervise(self) -> None:
        """One look at every child: start again those whose wait is over, schedule those
        that died."""
        t = time.monotonic()
        for child in self.children:
            if child.restart_at is not None:
                if t >= child.restart_at:
                    child.restart_at = None
                    try:
                        self.start(child)
                        pid = child.proc.pid if child.proc else "?"
                        say(f"{child.name} is running again (pid {pid})")
                    except DeployError as exc:
                        say(f"{child.name} did not start again: {exc.message}")
                        self._schedule(child, t)
                continue
            code = child.died()
            if code is not None:
                self._schedule(child, t, code)

    def _schedule(self, child: Child, t: float, code: int | None = None) -> None:
        child.deaths = [d for d in child.deaths if t - d < self.window_s] + [t]
        if len(child.deaths) >= self.give_up_after:
            raise ChildLost(
                f"{child.name} died {len(child.deaths)} times in {self.window_s:.0f} s: it "
                "cannot be kept alive; stopping the farm",
                hint=f"See {child.log}.",
            )
        wait = self.backoff[min(len(child.deaths) - 1, len(self.backoff) - 1)]
        how = f"exited with status {code}" if code is not None else "failed to start"
        say(f"{child.name} {how}; starting it again in {wait:g} s (log: {child.log})")
        child.restart_at = t + wait

    def stop_all(self, grace: float) -> None:
        """The last child first (it depends on the others), TERM then KILL."""
        _stop(reversed([c.proc for c in self.children if c.proc is not None]), grace)


class _UpFarm:
    """The one-machine farm: its three children and the state file of this run."""

    def __init__(
        self,
        data_dir: Path,
        host: str,
        port: int,
        lab: Path,
        token_file: Path,
        grace: float,
        serve_args: list[str],
    ) -> None:
        self.data_dir = data_dir
        self.board_names: tuple[str, ...] = EMULATED_BOARDS
        self.port = port
        self.grace = grace
        self.coordinator = ""
        self.url = ""
        self.started_at = time.time()
        coord_dir = data_dir / "coordinator"
        coord_dir.mkdir(mode=0o700, exist_ok=True)
        self.url_file = url_file = data_dir / "service.url"

        def service_ready(child: Child) -> str | None:
            return url_file.read_text().strip() if url_file.exists() else None

        self.children = [
            Child(
                "labgrid-coordinator",
                lambda: [_bin("labgrid-coordinator"), "-l", self.coordinator or "127.0.0.1:0"],
                coord_dir,
                data_dir / "coordinator.log",
                lambda c: _last(r"listening on (\S+:\d+)", c.output()),
            ),
            Child(
                "the farm service",
                lambda: [
                    _bin("aidge-deploy"),
                    "farm",
                    "serve",
                    "--data-dir",
                    str(data_dir),
                    "--host",
                    host,
                    "--port",
                    str(self.port),
                    "--coordinator",
                    self.coordinator,
                    *serve_args,
                ],
                data_dir,
                data_dir / "service.log",
                service_ready,
                before_start=lambda: url_file.unlink(missing_ok=True),
            ),
            Child(
                "the local agent",
                lambda: [
                    _bin("aidge-deploy"),
                    "farm",
                    "agent",
                    "--config",
                    str(lab),
                    "--url",
                    self.url,
                    "--token-file",
                    str(token_file),
                    "--work-dir",
                    str(data_dir / "agent" / "work"),
                    "--stop-grace",
                    str(grace),
                ],
                data_dir / "agent",
                data_dir / "agent.log",
                lambda c: "started",
            ),
        ]
        self.supervisor = Supervisor(self.children, started=self._started)

    def _started(self, child: Child, value: str) -> None:
        if child.name == "labgrid-coordinator":
            self.coordinator = value  # started again on this same address
        elif child.name == "the farm service":
            self.url = value
            self.port = int(value.rsplit(":", 1)[1])  # started again on this same port
        self._write_state()

    def _write_state(self) -> None:
        state = {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "coordinator": self.coordinator,
            "service_url": self.url,
            "children": {
                c.name: c.proc.pid
                for c in self.children
                if c.proc is not None and c.proc.poll() is None
            },
        }
        path = self.data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    def run(self) -> None:
        def stop_all(*_: Any) -> None:
            raise _Stop

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, stop_all)
        try:
            self.supervisor.start_all()
            say(f"API {self.url}/api, boards {', '.join(self.board_names)}")
            say(f"logs and state in {self.data_dir}; SIGTERM or Ctrl-C stops it")
            while True:
                self.supervisor.supervise()
                time.sleep(0.5)
        except _Stop:
            pass
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            self.supervisor.stop_all(self.grace + 15)
            (self.data_dir / STATE_FILE).unlink(missing_ok=True)


def _last(pattern: str, text: str) -> str | None:
    found = re.findall(pattern, text)
    return found[-1] if found else None


def _stop(procs: Any, grace: float = 15.0) -> None:
    """TERM to each child itself (not its process group: the agent's fork server must
    outlive the jobs it lets finish), then KILL to whatever is left in its group."""
    procs = list(procs)
    for p in procs:  # agent first: it ends its jobs and releases its boards
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                _signal(p, signal.SIGKILL)
                p.wait(5)
        _signal(p, signal.SIGKILL)  # whatever is left in its process group


def _signal(p: subprocess.Popen[Any], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, sig)


__all__ = ["EMULATED_BOARDS", "Child", "ChildLost", "Supervisor", "run_up"]
