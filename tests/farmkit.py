"""Farm test kit: the real farm pieces on loopback, started by the tests and stopped by PID.

A pytest plugin (``pytest_plugins`` in ``conftest.py``). Nothing is faked: a real
``labgrid-coordinator`` (``127.0.0.1:0``, its own temporary working folder, as labgrid's
own tests run it), the farm service (``aidge-deploy farm serve --port 0``) and agents
(``aidge-deploy farm agent``), each a separate process with its own folders, the agents
serving emulated (QEMU) boards. ``Farm`` starts and restarts them; teardown sends SIGTERM
then SIGKILL to every process group it started.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from envparts import needs

ADMIN = ("admin", "admin-pass-123")
ALICE = ("alice", "alice-pass-123")
BOB = ("bob", "bob-pass-1234")
BIN = Path(sys.executable).parent


def farm_available() -> str | None:
    """Why the farm cannot run here, or None."""
    try:
        import fastapi  # noqa: F401
        import labgrid  # noqa: F401
    except ImportError as exc:
        return f"the farm extra is not installed ({exc.name})"
    if not (BIN / "labgrid-coordinator").exists():
        return "labgrid-coordinator is not installed"
    return None


def _preload_farm_libraries() -> None:
    """Import the farm's database and password libraries when this plugin loads.

    ``pytester`` restores ``sys.modules`` after each test that uses it, dropping what was
    first imported during that test (``test_testing_plugin`` starts a farm there).
    SQLAlchemy's Python modules were then imported a second time while its compiled
    (Cython) parts stayed loaded with the first import's classes, and the next query in
    that worker failed with "TypeError: 'InternalTraversal' object is not callable".
    Imported here, before any test, they are in every snapshot and never dropped.
    """
    if farm_available() is None:
        for name in ("aidge_deploy.farm.db", "aidge_deploy.farm.auth"):  # SQLAlchemy, bcrypt
            importlib.import_module(name)


def needs_farm() -> pytest.MarkDecorator:
    """Skip here, fail in CI (tests/envparts.py) when the farm's parts are missing."""
    reason = farm_available()
    return needs(reason is None, reason or "")


def _wait(
    predicate: Any, timeout: float, what: str, proc: subprocess.Popen[Any] | None = None
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {proc.returncode}")
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not ready after {timeout} s")


def stop(
    proc: subprocess.Popen[Any] | None, sig: int = signal.SIGTERM, grace: float = 10.0
) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


_preload_farm_libraries()


@dataclass
class Farm:
    root: Path
    procs: dict[str, subprocess.Popen[Any]] = field(default_factory=dict)
    coordinator: str = ""
    url: str = ""
    agent_timeout: float = 6.0
    #: the PID of every agent this farm started: the mark its jobs' processes carry
    agent_pids: list[int] = field(default_factory=list)
    #: the service's database (default: SQLite in its data folder); given to the service
    #: in AIDGE_FARM_DATABASE_URL, as a URL with a password should be
    db_url: str | None = None
    #: options every start of the service gets (``start_service`` adds its own); without a
    #: ``--health-...`` option among them the boards' health checks are off
    #: (``--no-health-checks``): golden runs after each agent restart would queue before
    #: the jobs of tests about other things (``test_farm_health.py`` tests them)
    service_args: list[str] = field(default_factory=list)

    # --- processes -------------------------------------------------------------------

    def _spawn(
        self, name: str, args: list[str], cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[Any]:
        cwd.mkdir(parents=True, exist_ok=True)
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        full_env = {**os.environ, "GRPC_ENABLE_FORK_SUPPORT": "0", **(env or {})}
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_coordinator(self) -> str:
        cwd = self.root / "coordinator"
        before = len(self.log("coordinator"))
        proc = self._spawn(
            "coordinator",
            [str(BIN / "labgrid-coordinator"), "-l", self.coordinator or "127.0.0.1:0"],
            cwd,
        )

        def listening() -> str | None:
            m = re.search(r"listening on (\S+:\d+)", self.log("coordinator")[before:])
            return m.group(1) if m else None

        self.coordinator = _wait(listening, 30, "labgrid-coordinator", proc)
        return self.coordinator

    def setup_users(self) -> None:
        from aidge_deploy.farm.auth import add_user
        from aidge_deploy.farm.db import Database
        from aidge_deploy.farm.states import Role

        (self.root / "service").mkdir(parents=True, exist_ok=True)
        db = Database(self.database_url)
        with db.session() as s:
            add_user(s, *ADMIN, role=Role.ADMIN)
            add_user(s, *ALICE)
            add_user(s, *BOB)
        db.dispose()

    def agent_token(self, name: str) -> str:
        from aidge_deploy.farm.auth import issue_agent_token
        from aidge_deploy.farm.db import Database

        db = Database(self.database_url)
        with db.session() as s:
            token = issue_agent_token(s, name)
        db.dispose()
        return token

    @property
    def database_url(self) -> str:
        return self.db_url or f"sqlite:///{self.root / 'service' / 'farm.db'}"

    def start_service(self, extra: list[str] | None = None) -> str:
        data = self.root / "service"
        url_file = data / "service.url"
        url_file.unlink(missing_ok=True)
        port = self.url.rsplit(":", 1)[1] if self.url else "0"
        proc = self._spawn(
            "service",
            [
                str(BIN / "aidge-deploy"),
                "farm",
                "serve",
                "--data-dir",
                str(data),
                "--port",
                port,
                "--coordinator",
                self.coordinator,
                "--agent-timeout",
                str(self.agent_timeout),
                *self.service_args,
                *(
                    []
                    if any(a.startswith("--health") for a in self.service_args + (extra or []))
                    else ["--no-health-checks"]
                ),
                *(extra or []),
            ],
            data,
            env={"AIDGE_FARM_DATABASE_URL": self.db_url} if self.db_url else None,
        )
        self.url = _wait(
            lambda: url_file.read_text().strip() if url_file.exists() else None,
            60,
            "farm service",
            proc,
        )
        _wait(lambda: self._health(), 30, "farm service health", proc)
        return self.url

    def _health(self) -> bool:
        try:
            r = httpx.get(self.url + "/api/health", timeout=2)
            return r.status_code == 200 and r.json()["coordinator"]
        except httpx.HTTPError:
            return False

    def start_agent(
        self,
        name: str,
        boards: dict[str, str],
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[Any]:
        """An agent ``name`` in its own folder serving emulated ``boards`` (name -> target),
        with ``extra`` options and ``env`` added to its environment."""
        home = self.root / f"agent-{name}"
        home.mkdir(parents=True, exist_ok=True)
        lab = home / "lab.yaml"
        lines = ["version: 1", "boards:"]
        lines += [f"  {b}: {{target: {t}, emulated: true}}" for b, t in boards.items()]
        lab.write_text("\n".join(lines) + "\n")
        token_file = home / "token"
        if not token_file.exists():
            token_file.write_text(self.agent_token(name) + "\n")
        proc = self._spawn(
            f"agent-{name}",
            [
                str(BIN / "aidge-deploy"),
                "farm",
                "agent",
                "--config",
                str(lab),
                "--url",
                self.url,
                "--token-file",
                str(token_file),
                "--work-dir",
                str(home / "work"),
                *(extra or []),
            ],
            home,
            env={"AIDGE_DEPLOY_CACHE_DIR": str(home / "cache"), **(env or {})},
        )
        self.agent_pids.append(proc.pid)
        _wait(lambda: self._boards_online(boards), 60, f"agent {name}", proc)
        return proc

    def job_processes(self, job_id: int) -> list[int]:
        """Live processes of this farm's job ``job_id``: marked with the job's id and one of
        this farm's agents (another farm on the machine, e.g. another test worker's, has
        job ids of its own, starting at 1 too)."""
        from aidge_deploy.farm.reaper import job_processes

        return [p for a in self.agent_pids for p in job_processes(str(job_id), agent=str(a))]

    def end_job_processes(self, job_id: int) -> None:
        """End what is left of this farm's job ``job_id`` (its agent was killed)."""
        from aidge_deploy.farm.reaper import end_job_processes

        for a in self.agent_pids:
            end_job_processes(str(job_id), agent=str(a))

    def _boards_online(self, boards: dict[str, str]) -> bool:
        with self.client(*ADMIN) as c:
            states = {b["name"]: b["state"] for b in c.get("/api/boards").json()}
        return all(states.get(b) not in (None, "offline") for b in boards)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        stop(self.procs.get(name), sig)

    def stop_all(self) -> None:
        for name in reversed(list(self.procs)):
            stop(self.procs[name])

    # --- HTTP ------------------------------------------------------------------------

    def token(self, user: str, password: str, **extra: Any) -> str:
        r = httpx.post(
            self.url + "/api/token", json={"username": user, "password": password, **extra}
        )
        r.raise_for_status()
        return str(r.json()["access_token"])

    def client(self, user: str, password: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token(user, password)}"},
            timeout=60,
        )


@pytest.fixture
def farm_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("farm")


def make_farm(
    root: Path,
    agent_timeout: float = 6.0,
    db_url: str | None = None,
    service_args: list[str] | None = None,
) -> Farm:
    farm = Farm(root=root, agent_timeout=agent_timeout, db_url=db_url)
    farm.service_args = list(service_args or [])
    farm.start_coordinator()
    farm.setup_users()
    farm.start_service()
    return farm


@pytest.fixture
def service_farm(farm_root: Path) -> Iterator[Farm]:
    """Coordinator + service, no agent."""
    farm = make_farm(farm_root)
    try:
        yield farm
    finally:
        farm.stop_all()


@dataclass(frozen=True)
class StalledExport:
    """A copy of an emulated board's export whose firmware holds its board for a while."""

    path: str


STALL_MARK = 'DEMO EXPORT ARM ******************\\r\\n");'


def stalled_export(export: Any, root: Path, seconds: int) -> StalledExport:
    """Copy ``export`` (a QEMU board's) under ``root``: its firmware prints its start banner,
    then waits ``seconds`` of the host's wall-clock time (semihosting ``SYS_TIME``, read
    through QEMU) before its inference, so a job on it is "running" for that long whatever
    the machine's speed, and an orphaned QEMU of it still ends on its own."""
    stall = (
        "\n    {  /* test stall: hold the board, in host wall-clock seconds */\n"
        "        fflush(stdout);\n"
        "        aidge_qemu_uart_flush();\n"
        "        auto host_seconds = []() -> unsigned long {\n"
        "            unsigned long t;\n"
        '            __asm volatile("movs r0, #0x11\\n\\tmovs r1, #0\\n\\tbkpt 0xab\\n\\tmov %0, r0"\n'
        '                           : "=r"(t) : : "r0", "r1", "memory");\n'
        "            return t;\n"
        "        };\n"
        f"        const unsigned long until = host_seconds() + {int(seconds)}UL;\n"
        "        while (host_seconds() < until) {\n"
        "        }\n"
        "    }\n"
    )
    return _after_banner(export, root / f"{Path(export.path).name}-stalled-{seconds}s", stall)


def crashing_export(export: Any, root: Path) -> StalledExport:
    """Copy ``export`` (a QEMU board's) under ``root``: its firmware prints its start banner,
    then executes an undefined instruction (``__builtin_trap``): the model's run crashes
    (a HardFault, which the firmware reports and exits 1 on) — the user's failure."""
    crash = "\n    fflush(stdout);\n    aidge_qemu_uart_flush();\n    __builtin_trap();\n"
    return _after_banner(export, root / f"{Path(export.path).name}-crashing", crash)


def _after_banner(export: Any, dst: Path, code: str) -> StalledExport:
    """A copy of ``export`` at ``dst`` (made once, atomically) whose firmware runs ``code``
    right after its start banner."""
    if not dst.exists():
        tmp = dst.parent / f".{dst.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(export.path, tmp)
        main = tmp / "main.cpp"
        text = main.read_text()
        assert text.count(STALL_MARK) == 1, "the QEMU boards' start banner is not in main.cpp"
        main.write_text(text.replace(STALL_MARK, STALL_MARK + code))
        tmp.rename(dst)
    return StalledExport(str(dst))


def qemu_available() -> bool:
    return (
        shutil.which("qemu-system-arm") is not None
        and shutil.which("arm-none-eabi-g++") is not None
    )
