"""No secret on any process command line during a run (``ps`` shows every user's).

The run is the CLI, in its own process, deploying to the real sshd board with an encrypted key
whose passphrase comes from the environment (the only way the tool takes it). While it runs,
every process's ``/proc/<pid>/cmdline`` is read over and over — ours, the board's sshd sessions
and what they run (cmake, the launcher, the program) — and none may hold the passphrase or a
line of the private key.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from aidge_deploy.connections.ssh_settings import PASSPHRASE_ENV
from boards import SshBoard

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


class CmdlineWatch:
    """Reads every process's command line until stopped; keeps what it saw."""

    def __init__(self, needles: list[str]) -> None:
        self.needles = [n.encode() for n in needles]
        self.leaks: list[tuple[int, str]] = []
        self.seen: set[str] = set()
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    raw = (entry / "cmdline").read_bytes()
                except OSError:  # the process ended meanwhile
                    continue
                if not raw:
                    continue
                self.seen.add(raw.replace(b"\0", b" ").decode(errors="replace"))
                if any(needle in raw for needle in self.needles):
                    self.leaks.append((int(entry.name), raw.decode(errors="replace")))
            self.scans += 1
            self._stop.wait(0.02)

    def __enter__(self) -> CmdlineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_no_secret_on_any_command_line_during_an_ssh_run(
    ssh_board: SshBoard,
    export_factory: Callable[..., Any],
    tmp_path: Path,
) -> None:
    passphrase = f"pp-{secrets.token_hex(12)}"
    encrypted = tmp_path / "id_encrypted"
    key = asyncssh.read_private_key(str(ssh_board.key_path))
    key.write_private_key(str(encrypted), passphrase=passphrase, rounds=16)
    key_lines = [
        line
        for line in encrypted.read_text().splitlines()
        if len(line) > 20 and not line.startswith("-----")
    ]
    export = export_factory("benchmark", target="raspberrypi", nb_iterations=20)
    argv = [
        "run", str(export.path), "--target", "raspberrypi", "--backend", "ssh",
        "--ssh-host", ssh_board.host, "--ssh-port", str(ssh_board.port),
        "--ssh-user", ssh_board.user, "--ssh-key-path", str(encrypted),
        "--ssh-known-hosts-path", str(ssh_board.known_hosts_path),
        "--counters", "task-clock",
    ]  # fmt: skip
    cli = Path(sys.executable).parent / "aidge-deploy"
    with CmdlineWatch([passphrase, *key_lines]) as watch:
        done = subprocess.run(
            [str(cli), *argv],
            env={**os.environ, PASSPHRASE_ENV: passphrase},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    # the watch really saw the run: the CLI itself, and work done on the board over SSH
    assert watch.scans > 10
    assert any(str(encrypted) in line for line in watch.seen), "the CLI process was not seen"
    assert any("perf_run" in line or "cmake" in line for line in watch.seen), (
        "no board-side process of the run was seen"
    )
    assert watch.leaks == []


def test_the_watch_catches_a_secret_on_a_command_line() -> None:
    """The check above can fail: a process started with the secret in its argv is caught."""
    secret = f"pp-{secrets.token_hex(12)}"
    with CmdlineWatch([secret]) as watch:
        subprocess.run(
            [sys.executable, "-c", "import time; time.sleep(1)", f"--password={secret}"],
            check=True,
            timeout=30,
        )
    assert [pid for pid, _ in watch.leaks] and all(secret in line for _, line in watch.leaks)
