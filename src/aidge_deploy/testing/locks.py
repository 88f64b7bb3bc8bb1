"""Exclusive use of a lab's physical boards across processes (pytest-xdist workers, CI jobs).

A probe-flashed MCU or an SSH board can run one firmware at a time. Each such board has a
lock file named after its physical identity (the probe's unique id, the SSH host), taken
with ``filelock`` (an OS-level ``flock``: released by the kernel if the holder dies, so a
killed CI job leaves no stale lock). Emulated boards and the host need no lock; farm
boards are reserved by the farm itself.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from aidge_deploy.errors import DeployError
from aidge_deploy.lab import LabBoard, Reach

LOCK_DIR_ENV = "AIDGE_DEPLOY_LOCK_DIR"
#: how often the boards of a target are tried while all are busy
POLL_S = 0.2


class BoardBusyError(DeployError):
    """Every board that could run the test stayed locked past the timeout."""


def lock_dir() -> Path:
    """Machine-wide folder of the board locks (``$AIDGE_DEPLOY_LOCK_DIR`` overrides it)."""
    env = os.environ.get(LOCK_DIR_ENV)
    path = Path(env) if env else Path(tempfile.gettempdir()) / "aidge-deploy-locks"
    path.mkdir(parents=True, exist_ok=True)
    return path


def needs_lock(board: LabBoard) -> bool:
    return board.reach in (Reach.PROBE, Reach.SSH)


def lock_key(board: LabBoard) -> str:
    """The physical identity of a board: two lab files naming it share its lock."""
    if board.probe is not None:
        key = f"probe-{board.probe.unique_id}"
    elif board.ssh is not None:
        key = f"ssh-{board.ssh.host}-{board.ssh.port or 22}"
    else:
        key = f"board-{board.name}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


@dataclass
class BoardLease:
    """A board held for a test; ``release()`` lets the next test have it."""

    board: LabBoard
    lock: FileLock | None = None
    waited_s: float = 0.0

    def release(self) -> None:
        if self.lock is not None and self.lock.is_locked:
            self.lock.release(force=True)
        self.lock = None


def lease(boards: Sequence[LabBoard], timeout_s: float) -> BoardLease:
    """Hold the first of ``boards`` that is free, waiting up to ``timeout_s`` for one."""
    if not boards:
        raise ValueError("no board to lease")
    free = [b for b in boards if not needs_lock(b)]
    if free:
        return BoardLease(free[0])
    root = lock_dir()
    locks = [(b, FileLock(root / f"{lock_key(b)}.lock")) for b in boards]
    started = time.monotonic()
    while True:
        for board, lock in locks:
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            return BoardLease(board, lock, time.monotonic() - started)
        if time.monotonic() - started >= timeout_s:
            names = ", ".join(b.name for b in boards)
            raise BoardBusyError(
                f"every board for this test stayed in use for {timeout_s:.0f} s: {names}",
                hint=f"Another test or CI job holds them (locks in {root}); raise "
                "--aidge-lock-timeout or add boards to the lab.",
            )
        time.sleep(POLL_S)
