"""The README is a guide that works: short, every page it leads to exists, every docs page is
reachable from it, and every command it shows runs, in its order, from a fresh folder.

The commands run as a user runs them (``bash -c`` per line, in a scratch copy of ``examples/``
and the test model helpers, the package's ``.venv`` on ``PATH``), each expected to exit 0.
Two things differ from a user's terminal, both said here: ``farm up`` is started in the
background on a free port (``--port 8000`` becomes ``--port 0``; the service's URL replaces
``http://127.0.0.1:8000`` in the commands after it) and stopped with SIGTERM at the end; the
first block (``./run.sh demo`` / ``./run.sh test``) is not run again inside the suite that
``./run.sh test`` runs — its demo's commands are checked to be the README's own first commands,
which this test runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from envparts import needs
from farmkit import needs_farm, qemu_available, stop

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FARM_URL = "http://127.0.0.1:8000"
#: commands whose exit code says something of this machine: doctor exits 1 while a way of
#: running some target is not ready here (no probe tools in CI), as its README line says
EXIT_CODES = {"aidge-deploy doctor": {0, 1}}


def _blocks(text: str, language: str) -> list[list[str]]:
    """The fenced blocks of one language, continuation lines joined, comments dropped."""
    blocks = re.findall(rf"(?ms)^```{language}\n(.*?)^```", text)
    out = []
    for block in blocks:
        lines = [
            re.sub(r"\s+#.*$", "", line).strip() for line in block.replace("\\\n", " ").splitlines()
        ]
        out.append([line for line in lines if line and not line.startswith("#")])
    return out


def _commands() -> list[str]:
    first, *rest = _blocks(README.read_text(encoding="utf-8"), "sh")
    assert first == ["./run.sh demo", "./run.sh test"], first
    return [line for block in rest for line in block]


def test_the_readme_is_a_short_guide_whose_links_all_lead_somewhere() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    links = set(re.findall(r"\]\(((?!https?:)[^)#]+)\)", text))
    assert links, "the README links its pages"
    for link in links:
        assert (ROOT / link).exists(), f"the README links {link}, which does not exist"
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages - links == set(), f"docs pages the README does not lead to: {pages - links}"
    for command in _commands():
        assert "..." not in command and "<" not in command, f"not a runnable command: {command}"


def test_the_demo_runs_the_readmes_first_commands() -> None:
    """``./run.sh demo`` is what the README's first workflow starts with (run below)."""
    script = (ROOT / "run.sh").read_text()
    demo = re.search(r"(?ms)^\s*demo\)\n(.*?);;", script)
    assert demo
    lines = [line.strip() for line in demo.group(1).splitlines() if line.strip()]
    commands = _commands()
    assert lines and all(line in commands for line in lines), (lines, commands[:4])


def _scratch(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", work / "examples")
    (work / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "modelzoo.py", work / "tests")
    return work


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["AIDGE_DEPLOY_CACHE_DIR"] = str(tmp_path / "cache")
    env["COLUMNS"] = "120"
    env.pop("AIDGE_DEPLOY_API_PASSWORD", None)
    return env


def _farm_user(commands: list[str]) -> tuple[str, str]:
    """The user the README adds last, with the password its command line sets."""
    found = [
        re.match(r"AIDGE_DEPLOY_API_PASSWORD=(\S+) aidge-deploy farm user add (\S+)", c)
        for c in commands
    ]
    (password, name) = [m.groups() for m in found if m][-1]
    return name, password


class _FarmUp:
    """The README's ``farm up`` line, run in the background on a free port."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str], user: tuple[str, str]) -> None:
        self.user = user  # the README's own user, to see the boards
        argv = shlex.split(command.replace("--port 8000", "--port 0"))
        self.data = cwd / argv[argv.index("--data-dir") + 1]
        self.log = cwd / "farm-up.out"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.url = self._wait_ready(300)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text(errors="replace")[-3000:]
            try:
                state = json.loads((self.data / "farm-up.json").read_text())
                url = str(state["service_url"])
                if len(state["children"]) >= 3 and self._boards_idle(url):
                    return url
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            time.sleep(0.5)
        raise AssertionError("farm up: not ready\n" + self.log.read_text(errors="replace")[-3000:])

    def _boards_idle(self, url: str) -> bool:
        """Every board registered and idle: the README's job then finds its target."""
        login = {"username": self.user[0], "password": self.user[1]}
        token = httpx.post(url + "/api/token", json=login, timeout=30).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        boards = httpx.get(url + "/api/boards", headers=headers, timeout=30).json()
        return len(boards) >= 3 and all(b["state"] == "idle" for b in boards)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(300)
            except subprocess.TimeoutExpired:
                stop(self.proc, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.qemu
@needs_farm()
@needs(qemu_available(), "QEMU or the Arm toolchain is missing")
def test_every_command_of_the_readme_runs_in_its_order(tmp_path: Path) -> None:
    cwd = _scratch(tmp_path)
    env = _env(tmp_path)
    farm: _FarmUp | None = None
    try:
        for command in _commands():
            if command.startswith("aidge-deploy farm up"):
                farm = _FarmUp(command, cwd, env, _farm_user(_commands()))
                continue
            if farm is not None:
                command = command.replace(FARM_URL, farm.url)
            done = subprocess.run(
                ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                timeout=1800,
            )  # fmt: skip
            assert done.returncode in EXIT_CODES.get(command, {0}), (
                f"`{command}` exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )
        assert farm is not None, "the README's farm workflow starts a farm"
    finally:
        if farm is not None:
            farm.stop()
    # what the commands said they would leave
    for bundle in ("out/host", "out/mps2-an386", "out/mps2-an386-int8", "out/validate"):
        assert any((cwd / bundle).rglob("summary.json")), bundle
    assert (cwd / "out" / "campaign" / "report.html").exists()
    assert (cwd / "results.db").exists()
