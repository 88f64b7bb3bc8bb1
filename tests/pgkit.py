"""A real PostgreSQL server for the tests that need one (the farm service, the results
history): a pytest plugin (``pytest_plugins`` in ``conftest.py``) with the ``postgres``
fixture. The server is started by the test itself, on loopback, and stopped after it."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envparts import missing


def _postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return found[-1].parent if found else None


@pytest.fixture
def postgres() -> Iterator[str]:
    """A real PostgreSQL server of its own on loopback (initdb in a temporary folder, run
    as the ``postgres`` system user: the server refuses root); yields its SQLAlchemy URL."""
    with running_postgres() as url:
        yield url


@pytest.fixture(scope="module")
def postgres_module() -> Iterator[str]:
    """``postgres``, one server for a whole test module."""
    with running_postgres() as url:
        yield url


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    import pwd
    import shutil
    import socket

    bin_dir = _postgres_bin()
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        owner = None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing("psycopg is not installed (the postgres extra)")
    if bin_dir is None or owner is None or shutil.which("runuser") is None:
        missing("PostgreSQL (package postgresql) or runuser is missing")
    assert bin_dir is not None and owner is not None
    import tempfile

    # not under pytest's folder: the server's user cannot enter root's 0700 folders
    root = Path(tempfile.mkdtemp(prefix="aidge-farm-pg-"))
    os.chown(root, owner.pw_uid, owner.pw_gid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def as_postgres(*args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *args],
            cwd=root,
            check=True,
            capture_output=True,
            timeout=120,
        )

    data = root / "data"
    as_postgres(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "farm")
    opts = f"-h 127.0.0.1 -p {port} -k {root}"
    as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o", opts, "start")  # fmt: skip
    try:
        as_postgres(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "farm", "farm")  # fmt: skip
        yield f"postgresql+psycopg://farm@127.0.0.1:{port}/farm"
    finally:
        as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
