"""child_exec: the launcher that gives a child a parent-death signal (and no huge pages)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from aidge_deploy.connections.child_exec import child_exec_path, child_exec_prefix


def test_the_program_becomes_the_child_and_keeps_its_exit_status() -> None:
    prefix = child_exec_prefix(no_thp=True)
    assert prefix[0] == str(child_exec_path())  # built here: a C compiler is installed
    proc = subprocess.run(
        [*prefix, sys.executable, "-c",
         "import os, sys; print(os.getpid(), open('/proc/self/status').read()); sys.exit(7)"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 7
    assert re.search(r"^THP_enabled:\s+0$", proc.stdout, re.M), proc.stdout


def test_without_no_thp_huge_pages_are_left_as_they_are() -> None:
    proc = subprocess.run(
        [*child_exec_prefix(), "grep", "THP_enabled", "/proc/self/status"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    mine = re.search(r"^THP_enabled:.*$", Path("/proc/self/status").read_text(), re.M)
    assert mine is not None and proc.stdout.strip() == mine.group(0)


def test_a_parent_already_gone_is_not_left_an_orphan_and_bad_usage_is_refused() -> None:
    launcher = str(child_exec_path())
    # "parent" 1 is not our pid: as if the parent had died before the signal was armed
    assert subprocess.run([launcher, "1", "--", "true"], timeout=30).returncode == 125
    usage = subprocess.run([launcher, "x", "true"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 126 and "bad parent pid" in usage.stderr
    missing = subprocess.run(
        [launcher, str(os.getpid()), "--", "/no/such/program"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert missing.returncode == 127 and "cannot execute" in missing.stderr


def test_the_child_is_killed_when_its_parent_is_sigkilled(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "from aidge_deploy.connections.child_exec import child_exec_prefix\n"
        "child = subprocess.Popen([*child_exec_prefix(), 'sleep', '60'])\n"
        "open(sys.argv[1], 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, str(pid_file)])
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.02)
        child = int(pid_file.read_text())
        assert _alive(child)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Running or sleeping (a zombie waiting to be reaped by init counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
