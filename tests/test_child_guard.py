"""child_guard: a child that dies with its parent and runs without huge pages (LD_PRELOAD)."""

from __future__ import annotations

import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from aidge_deploy.connections import child_guard
from aidge_deploy.connections.child_guard import child_guard_path, guarded_launch


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)


def test_a_dynamic_program_is_guarded_without_huge_pages_and_without_the_preload() -> None:
    """The guard is loaded into the child (no launcher exec in between), turns huge pages
    off, and leaves LD_PRELOAD as it was for the child's own children."""
    launch = guarded_launch("sh")
    assert launch.prefix == ()
    assert launch.environment["LD_PRELOAD"] == str(child_guard_path())
    script = 'grep THP_enabled /proc/self/status; echo "[$LD_PRELOAD][$AIDGE_DEPLOY_PARENT_PID]"'
    done = _run(launch.argv(["sh", "-c", script]), launch.env())
    assert done.returncode == 0, done.stderr
    assert re.search(r"^THP_enabled:\s+0$", done.stdout, re.M), done.stdout
    assert done.stdout.rstrip().endswith("[][]")


def test_a_preload_of_the_callers_own_is_kept(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LD_PRELOAD", "libc.so.6")
    launch = guarded_launch("sh")
    assert launch.environment["LD_PRELOAD"] == f"{child_guard_path()}:libc.so.6"
    done = _run(launch.argv(["sh", "-c", 'echo "[$LD_PRELOAD]"']), launch.env())
    assert done.returncode == 0 and done.stdout.strip() == "[libc.so.6]", done.stderr


def test_a_parent_already_gone_leaves_no_orphan() -> None:
    """The signal is armed in the child: if its parent died before, it exits 125 at once."""
    env = {**guarded_launch("sh").env(), "AIDGE_DEPLOY_PARENT_PID": "1"}
    done = _run(["sh", "-c", "echo still here"], env)
    assert done.returncode == 125 and done.stdout == ""


def test_the_child_is_killed_when_its_parent_is_sigkilled(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "from aidge_deploy.connections.child_guard import guarded_launch\n"
        "launch = guarded_launch('sleep')\n"
        "child = subprocess.Popen(launch.argv(['sleep', '60']), env=launch.env())\n"
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


def test_a_static_program_gets_setpriv_instead(tmp_path: Path) -> None:
    """LD_PRELOAD never reaches a program without a dynamic loader (no PT_INTERP)."""

    def elf(types: list[int]) -> Path:
        header = bytearray(64)
        header[:6] = b"\x7fELF\x02\x01"
        struct.pack_into("<Q", header, 32, 64)  # e_phoff
        struct.pack_into("<HH", header, 54, 56, len(types))  # e_phentsize, e_phnum
        table = b"".join(struct.pack("<I", t) + bytes(52) for t in types)
        path = tmp_path / f"prog-{'-'.join(map(str, types))}"
        path.write_bytes(bytes(header) + table)
        path.chmod(0o755)
        return path

    assert child_guard._dynamically_linked(str(elf([6, 3, 1])), None)
    static = elf([1, 1, 4])
    assert not child_guard._dynamically_linked(str(static), None)
    launch = guarded_launch(static)
    assert launch.environment == {} and launch.prefix[1:] == ("--pdeathsig", "KILL")
    assert not child_guard._dynamically_linked(str(tmp_path / "missing"), None)


def _alive(pid: int) -> bool:
    """Running or sleeping (a zombie waiting to be reaped by init counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
