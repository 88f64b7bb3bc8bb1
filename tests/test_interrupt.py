"""Stopping a run leaves nothing behind: SIGTERM and SIGHUP to the CLI, cancel() from a thread.

Checked by process tree, not by name: while the run goes, every descendant of the CLI (and,
for SSH, every process the board's sshd started for it) is recorded with psutil; after the
signal, none of them may be alive. Docker containers are not descendants of the CLI (they
are the daemon's): the test dockerd must hold none afterwards. The programs are real
exports patched to sleep (or to spin) so the signal lands mid-run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

import aidge_deploy
from aidge_deploy import DeployConfig, RunControl, RunInterrupted
from aidge_deploy.backendoptions import SshOptions
from aidge_deploy.connections.local_process import run_process
from boards import DockerBoard, SshBoard
from envparts import missing
from proctree import START_TIMEOUT_S, TreeWatch, assert_nothing_left, interrupt, named, patch_main

pytestmark = [pytest.mark.slow]

SIGNALS = [signal.SIGTERM, signal.SIGHUP]


@pytest.fixture(scope="module")
def sleeper_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sleepers")


def sleeper(export_factory: Callable[..., Any], root: Path, target: str = "host") -> Path:
    """A copy of a real export whose program prints, then sleeps 10 minutes (built once)."""
    dest = root / f"sleeper-{target}"
    if not dest.exists():
        kind = "output" if target != "host" else "benchmark"
        shutil.copytree(Path(export_factory(kind, target=target).path), dest)
        patch_main(dest, 'std::printf("started\\n"); std::fflush(stdout); sleep(600);')
    return dest


# --------------------------------------------------------------------------- host


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_signal_during_a_host_run_leaves_no_process(
    sig: signal.Signals, export_factory: Any, sleeper_dir: Path, cli: Any
) -> None:
    export = sleeper(export_factory, sleeper_dir)
    proc = cli("run", str(export))
    watch = TreeWatch(proc.pid)
    watch.wait_for(named("run_export"), "the program started")
    assert named("perf_run")(watch.poll()), "the launcher is part of the tree"
    interrupt(proc, sig, watch)
    assert_nothing_left(watch)


def test_sigint_prints_interrupted_and_the_log_too(
    export_factory: Any, sleeper_dir: Path, cli: Any
) -> None:
    proc = cli("run", str(sleeper(export_factory, sleeper_dir)))
    watch = TreeWatch(proc.pid)
    watch.wait_for(named("run_export"), "the program started")
    interrupt(proc, signal.SIGINT, watch)
    assert_nothing_left(watch)


def test_signal_during_the_build_stops_the_compilers(
    export_factory: Any, tmp_path: Path, cli: Any
) -> None:
    export = tmp_path / "fresh"
    shutil.copytree(Path(export_factory("benchmark").path), export)
    (export / "main.cpp").write_text(
        (export / "main.cpp").read_text() + "\n// unique build\n"
    )  # new content: a real build, not a cache hit
    proc = cli("run", str(export))
    watch = TreeWatch(proc.pid)
    watch.wait_for(lambda ps: named("cc1plus")(ps) or named("make")(ps), "the build started")
    interrupt(proc, signal.SIGTERM, watch)
    assert_nothing_left(watch)
    builds = Path(os.environ["AIDGE_DEPLOY_CACHE_DIR"]) / "builds"
    assert not [p for p in builds.glob(".tmp-fresh-*")], "the private build folder was removed"


# --------------------------------------------------------------------------- docker


@pytest.mark.docker
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_signal_during_a_docker_run_leaves_no_process_and_no_container(
    sig: signal.Signals,
    docker_board: DockerBoard,
    export_factory: Any,
    sleeper_dir: Path,
    cli: Any,
) -> None:
    env = {"DOCKER_HOST": docker_board.docker_host}
    proc = cli("run", str(sleeper(export_factory, sleeper_dir)), "--docker-image",
               docker_board.image, env=env)  # fmt: skip
    watch = TreeWatch(proc.pid)

    def container_running(procs: list[psutil.Process]) -> bool:
        ps = docker_board.docker("ps", "--format", "{{.Names}}").stdout
        return "aidge-deploy-" in ps and named("docker")(procs)

    watch.wait_for(container_running, "the container started")
    time.sleep(0.5)  # the program inside printed and sleeps
    interrupt(proc, sig, watch)
    assert_nothing_left(watch)
    assert "aidge-deploy-" not in docker_board.docker("ps", "-a").stdout


# --------------------------------------------------------------------------- ssh


def board_side(board: SshBoard) -> Callable[[], list[psutil.Process]]:
    """The processes the board's sshd runs for clients (its sessions and their programs)."""
    return lambda: [psutil.Process(board.sshd_pid)]


@pytest.mark.ssh
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_signal_during_an_ssh_run_leaves_nothing_on_the_board(
    sig: signal.Signals,
    fresh_ssh_board: SshBoard,
    export_factory: Any,
    sleeper_dir: Path,
    cli: Any,
) -> None:
    board = fresh_ssh_board
    export = sleeper(export_factory, sleeper_dir, target="raspberrypi")
    proc = cli(
        "run", str(export), "--target", "raspberrypi", "--backend", "ssh",
        "--ssh-host", board.host, "--ssh-port", str(board.port), "--ssh-user", board.user,
        "--ssh-key-path", str(board.key_path),
        "--ssh-known-hosts-path", str(board.known_hosts_path),
    )  # fmt: skip
    # the CLI has no local child here: the tree to watch is the board's sshd
    watch = TreeWatch(proc.pid, board_side(board))
    watch.wait_for(named("run_export"), "the program started on the board")
    time.sleep(0.3)
    watch.seen = {k: p for k, p in watch.seen.items() if p.pid != board.sshd_pid}
    interrupt(proc, sig, watch)
    # remote processes are stopped by the run's token; sshd then ends the sessions
    assert_nothing_left(watch, grace_s=10.0)


# --------------------------------------------------------------------------- qemu


def spinning_mcu_export(export_factory: Any, root: Path) -> Path:
    dest = root / "spinner-mps2-an386"
    if not dest.exists():
        shutil.copytree(Path(export_factory("output", target="mps2-an386").path), dest)
        main = dest / "main.cpp"
        patched, n = re.subn(
            r"(int main\s*\([^)]*\)\s*\{)",
            r'\1\n    printf("spinning\\r\\n"); for (;;) { __asm volatile("nop"); }',
            main.read_text(),
            count=1,
        )
        assert n == 1
        main.write_text(patched)
    return dest


@pytest.mark.qemu
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_signal_during_a_qemu_run_leaves_no_emulator(
    sig: signal.Signals, export_factory: Any, sleeper_dir: Path, cli: Any
) -> None:
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        missing("qemu-system-arm or the Arm cross toolchain is not installed")
    proc = cli("run", str(spinning_mcu_export(export_factory, sleeper_dir)))
    watch = TreeWatch(proc.pid)
    watch.wait_for(named("qemu-system-arm"), "QEMU started")
    time.sleep(1.0)  # flashed and running
    interrupt(proc, sig, watch)
    assert_nothing_left(watch)


# --------------------------------------------------------------------------- cancel() from a thread


def _own_descendants() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def cancel_when(
    control: RunControl, predicate: Callable[[list[psutil.Process]], bool], seen: list[Any]
) -> threading.Thread:
    """Cancel ``control`` once ``predicate`` holds for this process's new descendants (session
    fixtures such as dockerd or sshd are children of the test process too: not counted)."""
    before = {p.pid for p in _own_descendants()}

    def new_descendants() -> list[psutil.Process]:
        return [p for p in _own_descendants() if p.pid not in before]

    def watcher() -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            procs = new_descendants()
            seen.extend(procs)
            if predicate(procs):
                time.sleep(0.3)
                seen.extend(new_descendants())
                control.cancel("job cancelled by its owner")
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    return thread


def test_cancel_from_another_thread_stops_a_host_run(
    export_factory: Any, sleeper_dir: Path, tmp_path: Path
) -> None:
    control = RunControl()
    seen: list[psutil.Process] = []
    watcher = cancel_when(control, named("run_export"), seen)
    started = time.monotonic()
    with pytest.raises(RunInterrupted) as info:
        aidge_deploy.deploy(
            sleeper(export_factory, sleeper_dir), DeployConfig(), control=control,
            work_dir=tmp_path / "run",
        )  # fmt: skip
    watcher.join(5)
    assert info.value.reason == "job cancelled by its owner"
    assert info.value.log_path == tmp_path / "run" and info.value.exit_status == 130
    # the program's own output is kept (after the firmware identity line it prints first)
    assert "started" in (tmp_path / "run" / "run.log").read_text().splitlines()
    assert time.monotonic() - started < START_TIMEOUT_S
    assert seen and not [p for p in seen if p.is_running() and p.status() != "zombie"]


@pytest.mark.qemu
def test_cancel_from_another_thread_stops_qemu(
    export_factory: Any, sleeper_dir: Path, tmp_path: Path
) -> None:
    control = RunControl()
    seen: list[psutil.Process] = []
    watcher = cancel_when(control, named("qemu-system-arm"), seen)
    with pytest.raises(RunInterrupted):
        aidge_deploy.deploy(
            spinning_mcu_export(export_factory, sleeper_dir), DeployConfig(), control=control
        )
    watcher.join(5)
    assert seen and not [p for p in seen if p.is_running() and p.status() != "zombie"]


@pytest.mark.ssh
def test_cancel_from_another_thread_stops_the_remote_program(
    fresh_ssh_board: SshBoard, export_factory: Any, sleeper_dir: Path
) -> None:
    board = fresh_ssh_board
    control = RunControl()
    on_board: list[psutil.Process] = []
    names: set[str] = set()

    def watcher() -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            procs = psutil.Process(board.sshd_pid).children(recursive=True)
            for proc in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    name = proc.name()
                    if name != "sshd":  # the sessions end with the connection
                        on_board.append(proc)
                        names.add(name)
            if "run_export" in names:
                time.sleep(0.3)
                control.cancel("job cancelled")
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    config = DeployConfig(
        target="raspberrypi", backend="ssh", ssh_host=board.host, ssh_port=board.port,
        ssh_user=board.user, ssh_key_path=board.key_path,
        ssh_known_hosts_path=board.known_hosts_path,
        backend_options=(SshOptions(config_path=None, allow_agent=False),),
    )  # fmt: skip
    with pytest.raises(RunInterrupted):
        aidge_deploy.deploy(
            sleeper(export_factory, sleeper_dir, "raspberrypi"), config, control=control
        )
    thread.join(5)
    programs = on_board
    assert "run_export" in names, "the program was seen on the board"
    deadline = time.monotonic() + 10
    while [p for p in programs if p.is_running() and p.status() != "zombie"]:
        assert time.monotonic() < deadline, "the remote program outlived the cancellation"
        time.sleep(0.1)


# --------------------------------------------------------------------------- building blocks


def test_cancel_kills_a_local_process_group_and_raises(tmp_path: Path) -> None:
    control = RunControl()
    timer = threading.Timer(0.5, control.cancel, kwargs={"reason": "stop"})
    timer.start()
    started = time.monotonic()
    with control.activate(), pytest.raises(RunInterrupted, match="stop"):
        # a shell whose child would outlive it if only the shell were killed
        run_process(
            ["/bin/sh", "-c", "sleep 300 & sleep 300"],
            cwd=tmp_path,
            timeout_s=60,
            stdout_path=tmp_path / "o",
            stderr_path=tmp_path / "e",
        )
    assert time.monotonic() - started < 10
    assert [p for p in _own_descendants() if "sleep" in p.name()] == []


def test_a_run_cancelled_before_it_starts_starts_nothing(tmp_path: Path) -> None:
    control = RunControl()
    control.cancel("too late")
    with control.activate(), pytest.raises(RunInterrupted):
        run_process(
            ["/bin/sh", "-c", "sleep 300"],
            cwd=tmp_path,
            timeout_s=60,
            stdout_path=tmp_path / "o",
            stderr_path=tmp_path / "e",
        )
    assert [p for p in _own_descendants() if "sleep" in p.name()] == []
