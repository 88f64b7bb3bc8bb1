"""The benchmarks still import and build their configs against today's API.

The benchmarks run outside the suite (``python benchmarks/bench_*.py``), so an API change that
refuses an option they pass (``extra["ssh_settings"]`` once) shows only when somebody runs them.
Importing each module and building the configs that do not need a board running keeps them honest.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidge_deploy.backendoptions import SshOptions

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
MODULES = sorted(p.stem for p in BENCHMARKS.glob("*.py"))


@pytest.fixture
def benchmarks_on_path() -> Iterator[None]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_imports(name: str, benchmarks_on_path: None) -> None:
    module = importlib.import_module(name)
    assert module.__doc__, f"benchmarks/{name}.py says what it measures in its docstring"


def test_ssh_benchmark_config_is_accepted(benchmarks_on_path: None, tmp_path: Path) -> None:
    from boards import SshBoard

    bench = importlib.import_module("bench_ssh_deploy")
    board = SshBoard(
        host="127.0.0.1",
        port=2222,
        user="pi",
        key_path=tmp_path / "id_ed25519",
        known_hosts_path=tmp_path / "known_hosts",
        host_pubkey="ssh-ed25519 AAAA",
        sshd_pid=0,
        sshd_log=tmp_path / "sshd.log",
        workdir=tmp_path,
    )
    config = bench.deploy_config(board)
    (options,) = [r for r in config.backend_options if isinstance(r, SshOptions)]
    assert options.config_path is None and options.allow_agent is False
    assert config.ssh_host == "127.0.0.1" and config.ssh_port == 2222
