"""Process trees of the CLI under test, and stopping it by signal (shared by the tests of
``run``/``profile`` in test_interrupt.py and of ``validate`` in test_validate.py).

Checked by process tree, not by name: while the run goes, every descendant of the CLI is
recorded with psutil; after the signal, none of them may be alive. ``cli`` starts the
command in a process of its own (``python -m aidge_deploy.cli.main``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

START_TIMEOUT_S = 240.0  # the first run builds the export (a cross build on a busy machine)


def patch_main(export_dir: Path, statement: str) -> None:
    """Insert ``statement`` at the start of the export's ``main()``."""
    main = export_dir / "main.cpp"
    text = main.read_text()
    patched, n = re.subn(
        r"(int main\s*\([^)]*\)\s*\{)", lambda m: m.group(1) + "\n    " + statement, text, count=1
    )
    assert n == 1, "main() not found in the export"
    main.write_text("#include <unistd.h>\n#include <cstdio>\n" + patched)


class TreeWatch:
    """Records every descendant of ``root`` (and of ``extra_roots``) seen while polling.

    With ``ignore_existing`` the descendants already alive when the watch starts are not
    the run's: a test that watches its own pytest process (the MCP server is its child)
    would otherwise count the session's sshd and dockerd fixtures as left-overs.
    """

    def __init__(
        self,
        root: int,
        extra_roots: Callable[[], list[psutil.Process]] = list,
        *,
        ignore_existing: bool = False,
    ) -> None:
        self.root = psutil.Process(root)
        self.extra_roots = extra_roots
        self.seen: dict[tuple[int, float], psutil.Process] = {}
        self.before: set[tuple[int, float]] = set()
        if ignore_existing:
            self.poll()
            self.before = set(self.seen)
            self.seen.clear()

    def poll(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        with_roots = [self.root, *self.extra_roots()]
        for parent in with_roots:
            try:
                found += parent.children(recursive=True)
            except psutil.NoSuchProcess:
                continue
        fresh: list[psutil.Process] = []
        for proc in found:
            try:
                key = (proc.pid, proc.create_time())
            except psutil.NoSuchProcess:
                continue
            if key not in self.before:
                self.seen[key] = proc
                fresh.append(proc)
        return fresh

    def wait_for(self, predicate: Callable[[list[psutil.Process]], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            procs = self.poll()
            if predicate(procs):
                return
            if self.root.status() == psutil.STATUS_ZOMBIE or not self.root.is_running():
                pytest.fail(f"the CLI ended before {what}")
            assert time.monotonic() < deadline, f"{what} never happened"
            time.sleep(0.05)

    def alive(self) -> list[str]:
        left = []
        for proc in self.seen.values():
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{proc.pid} {proc.name()} {' '.join(proc.cmdline())[:120]}")
            except psutil.NoSuchProcess:
                continue
        return left


def named(name: str) -> Callable[[list[psutil.Process]], bool]:
    def check(procs: list[psutil.Process]) -> bool:
        for proc in procs:
            try:
                if proc.name().startswith(name):
                    return True
            except psutil.NoSuchProcess:
                continue
        return False

    return check


@pytest.fixture
def cli() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aidge_deploy.cli.main", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def interrupt(proc: subprocess.Popen[str], sig: signal.Signals, watch: TreeWatch) -> str:
    """Send ``sig`` to the CLI, wait for it, check the exit and the message; its stderr."""
    watch.poll()
    proc.send_signal(sig)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        pytest.fail(f"the CLI did not stop within 60 s of {sig.name}:\n{stderr[-2000:]}")
    assert proc.returncode == 128 + sig, (proc.returncode, stderr[-2000:])
    assert "Interrupted" in stderr and sig.name in stderr, stderr[-2000:]
    match = re.search(r"Log: (\S+)", stderr)
    assert match, stderr[-2000:]
    assert Path(match.group(1)).is_dir(), "the printed log folder exists"
    return stderr


def assert_nothing_left(watch: TreeWatch, grace_s: float = 5.0) -> None:
    assert watch.seen, "no process of the run was observed"
    deadline = time.monotonic() + grace_s
    while watch.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert watch.alive() == [], "processes of the run outlived the CLI"
