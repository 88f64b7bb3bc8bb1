"""The SSH connection layer against real sshd/dockerd boards started by the tests (boards.py)."""

from __future__ import annotations

import logging
import os
import platform
import secrets
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from aidge_deploy.connections.ssh import SshConnection
from aidge_deploy.connections.ssh_exec import wrap_command
from aidge_deploy.connections.ssh_settings import SshSettings
from aidge_deploy.connections.ssh_transfer import MANIFEST_NAME
from aidge_deploy.errors import (
    AuthenticationError,
    ConfigError,
    ConnectError,
    ExecutionError,
    HostKeyError,
    TransferError,
)
from boards import Aarch64Board, DockerBoard, SshBoard
from envparts import missing, not_applicable

# ----------------------------------------------------------------------------- helpers


@pytest.fixture
def conn(ssh_board: SshBoard) -> Iterator[SshConnection]:
    with SshConnection(ssh_board.settings()) as connection:
        yield connection


@pytest.fixture
def remote_dir(conn: SshConnection) -> Iterator[str]:
    """A unique directory under the board user's home, removed afterwards."""
    path = f"{conn.home()}/t-{uuid.uuid4().hex[:8]}"
    yield path
    conn.run(f"chmod -R u+w {path} 2>/dev/null; rm -rf {path}", timeout_s=10)


def live_processes(board: SshBoard, pattern: str) -> list[str]:
    """Non-zombie processes of the board user whose command line contains ``pattern``,
    seen through a fresh SSH connection."""
    with SshConnection(board.settings()) as fresh:
        out = fresh.run('ps -u "$(id -un)" -o stat=,args=', timeout_s=10).stdout
    return [
        line
        for line in out.splitlines()
        if pattern in line and not line.lstrip().startswith("Z") and "ps -u" not in line
    ]


def unique_sleep() -> str:
    """A ``sleep`` command line no other test (or earlier run) uses: leftovers are per user."""
    return f"sleep {30 + secrets.randbelow(10_000) / 1000:.3f}"


def make_tree(root: Path) -> dict[str, bytes]:
    files = {
        "main.cpp": b"int main() { return 0; }\n",
        "include/model.h": b"#pragma once\n" * 50,
        "data/weights.bin": os.urandom(200_000),
        "run.sh": b"#!/bin/sh\necho run-ok\n",
        "__pycache__/junk.pyc": b"ignored",
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (root / "run.sh").chmod(0o755)
    return files


# ----------------------------------------------------------------------------- pure units


def test_wrap_command_quotes_and_bounds_the_command() -> None:
    line = wrap_command(
        'echo "it\'s" | cat', timeout_s=2.5, kill_after_s=5, token="aidge-run-x", cwd="my dir"
    )
    assert line.startswith("exec timeout --signal=TERM --kill-after=5 2.5 sh -c ")
    assert line.endswith(" aidge-run-x")
    assert "'my dir'" in line
    with pytest.raises(ValueError, match="invalid environment"):
        wrap_command("true", timeout_s=1, kill_after_s=1, token="t", env={"A B": "1"})


def test_settings_validation_and_secret_free_repr() -> None:
    with pytest.raises(ConfigError):
        SshSettings(host="board", port=70000)
    with pytest.raises(ConfigError):
        SshSettings(host="board", connect_timeout_s=0)
    with pytest.raises(ConfigError):
        SshSettings(host="two words")
    settings = SshSettings(host="board", user="pi", key_passphrase="hunter2-secret")
    assert "hunter2-secret" not in repr(settings)
    assert settings.label == "pi@board"


# ----------------------------------------------------------------------------- run


@pytest.mark.ssh
def test_key_login_and_exit_status(conn: SshConnection, ssh_board: SshBoard) -> None:
    result = conn.run('echo "$(id -un)"; echo oops >&2; exit 3', timeout_s=10)
    assert result.exit_status == 3
    assert result.stdout == f"{ssh_board.user}\n"
    assert result.stderr == "oops\n"
    assert not result.timed_out and not result.ok
    assert conn.run("true", timeout_s=10).ok
    assert conn.home().startswith("/")
    quoted = conn.run("printf '%s\\n' \"it's\" 'a \"b\"'", timeout_s=10)
    assert quoted.stdout == 'it\'s\na "b"\n'


@pytest.mark.ssh
def test_env_and_cwd(conn: SshConnection, remote_dir: str) -> None:
    conn.run(f"mkdir -p {remote_dir}", timeout_s=10)
    result = conn.run(
        'echo "$GREETING"; pwd', timeout_s=10, cwd=remote_dir, env={"GREETING": "hello world"}
    )
    assert result.stdout == f"hello world\n{remote_dir}\n"


@pytest.mark.ssh
def test_output_streams_while_running_and_is_logged(conn: SshConnection, tmp_path: Path) -> None:
    seen: list[tuple[float, str, str]] = []
    start = time.monotonic()
    log = tmp_path / "logs" / "run.log"
    result = conn.run(
        "echo one; sleep 0.6; echo two >&2; sleep 0.6; echo three",
        timeout_s=10,
        stdout_sink=lambda line: seen.append((time.monotonic() - start, "out", line)),
        stderr_sink=lambda line: seen.append((time.monotonic() - start, "err", line)),
        log_path=log,
    )
    assert [(s, line) for _, s, line in seen] == [("out", "one"), ("err", "two"), ("out", "three")]
    assert seen[0][0] < result.duration_s - 0.9, "first line must arrive long before the end"
    assert seen[1][0] < result.duration_s - 0.3
    lines = log.read_text().splitlines()
    assert lines[0].startswith("# ssh ") and lines[1] == "# $ " + result.command
    assert lines[2:5] == ["one", "[stderr] two", "three"]
    assert "exit_status=0" in lines[5]


@pytest.mark.ssh
def test_remote_timeout_stops_the_program(conn: SshConnection, ssh_board: SshBoard) -> None:
    sleep = unique_sleep()
    result = conn.run(f"echo started; {sleep}", timeout_s=1.0)
    assert result.timed_out and result.exit_status == 124
    assert result.stdout == "started\n"
    assert 1.0 <= result.duration_s < 4.0
    assert live_processes(ssh_board, sleep) == []


@pytest.mark.ssh
def test_program_ignoring_term_is_killed_after_grace(ssh_board: SshBoard) -> None:
    sleep = unique_sleep()
    with SshConnection(ssh_board.settings(kill_after_s=1.0)) as connection:
        result = connection.run(f"trap '' TERM; {sleep}", timeout_s=1.0)
    assert result.timed_out
    assert result.exit_status == 137 or result.signal == "KILL"
    assert result.duration_s < 5.0
    assert live_processes(ssh_board, sleep) == []


FAKE_TIMEOUT = """#!/bin/sh
# A `timeout` that ignores its limit, as on a board where it is broken.
shift 3
exec "$@"
"""


@pytest.mark.ssh
def test_client_side_timeout_stops_the_whole_remote_tree(
    ssh_board: SshBoard, remote_dir: str, tmp_path: Path
) -> None:
    sleep = unique_sleep()
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "timeout").write_text(FAKE_TIMEOUT)
    (fake / "timeout").chmod(0o755)
    settings = ssh_board.settings(kill_after_s=0.5)
    with SshConnection(settings) as connection:
        connection.upload_dir(fake, f"{remote_dir}/bin")
        result = connection.run(
            f"echo started; {sleep}; echo never",
            timeout_s=0.5,
            env={"PATH": f"{remote_dir}/bin:/usr/bin:/bin"},
        )
    assert result.timed_out and result.stdout == "started\n"
    assert result.duration_s < 8.0
    assert live_processes(ssh_board, sleep) == []


@pytest.mark.ssh
def test_missing_timeout_on_the_board_is_explained(conn: SshConnection) -> None:
    with pytest.raises(ExecutionError) as info:
        conn.run("true", timeout_s=5, env={"PATH": "/nonexistent"})
    assert "no `timeout` command" in info.value.message
    assert "coreutils" in (info.value.hint or "")


@pytest.mark.ssh
def test_ctrl_c_stops_the_remote_program(
    conn: SshConnection, ssh_board: SshBoard, tmp_path: Path, ctrl_c: None
) -> None:
    sleep = unique_sleep()
    if threading.current_thread() is not threading.main_thread():
        not_applicable("SIGINT is only delivered to the main thread")
    timer = threading.Timer(0.7, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    log = tmp_path / "interrupted.log"
    try:
        with pytest.raises(KeyboardInterrupt):
            conn.run(f"echo started; {sleep}", timeout_s=20, log_path=log)
    finally:
        timer.cancel()
    assert "started" in log.read_text() and "interrupted" in log.read_text()
    assert live_processes(ssh_board, sleep) == []
    assert conn.run("echo still-usable", timeout_s=10).stdout == "still-usable\n"


@pytest.mark.ssh
def test_sink_error_stops_the_remote_program(conn: SshConnection, ssh_board: SshBoard) -> None:
    sleep = unique_sleep()

    def sink(line: str) -> None:
        raise RuntimeError(f"parser rejected {line!r}")

    with pytest.raises(RuntimeError, match="parser rejected"):
        conn.run(f"echo bad; {sleep}", timeout_s=20, stdout_sink=sink)
    assert live_processes(ssh_board, sleep) == []


# ----------------------------------------------------------------------------- connect


@pytest.mark.ssh
def test_wrong_key_is_an_authentication_error(ssh_board: SshBoard, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519")
    other.write_private_key(str(tmp_path / "other_key"))
    with pytest.raises(AuthenticationError) as info:
        SshConnection(ssh_board.settings(key_path=tmp_path / "other_key")).connect()
    assert "refused" in str(info.value)
    assert info.value.hint is not None and "ssh-copy-id" in info.value.hint
    with pytest.raises(AuthenticationError, match="does not exist"):
        SshConnection(ssh_board.settings(key_path=tmp_path / "missing")).connect()


@pytest.mark.ssh
def test_unknown_host_key_is_refused_with_keyscan_hint(ssh_board: SshBoard, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as info:
        SshConnection(ssh_board.settings(known_hosts_path=empty)).connect()
    fingerprint = asyncssh.import_public_key(ssh_board.host_pubkey).get_fingerprint()
    assert "Unknown host key" in info.value.message and fingerprint in info.value.message
    hint = info.value.hint or ""
    assert f"ssh-keyscan -p {ssh_board.port} -t ed25519 {ssh_board.host} >> {empty}" in hint
    assert empty.read_text() == "", "a refused key must not be recorded"


@pytest.mark.ssh
def test_changed_host_key_is_refused_even_with_tofu(ssh_board: SshBoard, tmp_path: Path) -> None:
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    stale = tmp_path / "known_hosts"
    line = " ".join(impostor.export_public_key().decode().split()[:2])
    stale.write_text(f"[{ssh_board.host}]:{ssh_board.port} {line}\n")
    for tofu in (False, True):
        with pytest.raises(HostKeyError) as info:
            settings = ssh_board.settings(known_hosts_path=stale, trust_on_first_use=tofu)
            SshConnection(settings).connect()
        assert "HOST KEY CHANGED" in info.value.message
        assert impostor.get_fingerprint() in info.value.message
        assert "ssh-keygen -R" in (info.value.hint or "")
    assert stale.read_text().count("\n") == 1


@pytest.mark.ssh
def test_trust_on_first_use_records_the_key(ssh_board: SshBoard, tmp_path: Path) -> None:
    known = tmp_path / "sub" / "known_hosts"
    with SshConnection(ssh_board.settings(known_hosts_path=known, trust_on_first_use=True)) as c:
        assert c.run("echo ok", timeout_s=10).stdout == "ok\n"
    assert known.read_text() == f"[{ssh_board.host}]:{ssh_board.port} {ssh_board.host_pubkey}\n"
    with SshConnection(ssh_board.settings(known_hosts_path=known)) as strict:
        assert strict.run("true", timeout_s=10).ok
    assert known.read_text().count("\n") == 1


@pytest.mark.ssh
def test_ssh_config_alias_is_applied(ssh_board: SshBoard, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host myboard\n  HostName {ssh_board.host}\n  Port {ssh_board.port}\n"
        f"  User {ssh_board.user}\n  IdentityFile {ssh_board.key_path}\n"
    )
    settings = SshSettings(
        host="myboard",
        config_path=config,
        known_hosts_path=ssh_board.known_hosts_path,
        allow_agent=False,
        connect_timeout_s=5,
        connect_attempts=1,
    )
    with SshConnection(settings) as connection:
        assert connection.run("id -un", timeout_s=10).stdout.strip() == ssh_board.user
        assert connection.target == f"{ssh_board.user}@{ssh_board.host}:{ssh_board.port}"


@pytest.mark.ssh
def test_closed_port_fails_fast_after_retries(ssh_board: SshBoard) -> None:
    from boards import _free_port

    settings = ssh_board.settings(port=_free_port(), connect_attempts=3, retry_backoff_s=0.1)
    start = time.monotonic()
    with pytest.raises(ConnectError) as info:
        SshConnection(settings).connect()
    elapsed = time.monotonic() - start
    assert 0.3 <= elapsed < 3.0  # two backoffs (0.1 + 0.2 s), no long wait on a refusal
    assert "after 3 attempt(s)" in info.value.message
    assert "nc -vz" in (info.value.hint or "")


@pytest.mark.ssh
def test_silent_board_times_out(fresh_ssh_board: SshBoard) -> None:
    settings = fresh_ssh_board.settings(connect_timeout_s=1.0)
    with fresh_ssh_board.stopped():
        start = time.monotonic()
        with pytest.raises(ConnectError, match="timed out"):
            SshConnection(settings).connect()
        assert 0.9 <= time.monotonic() - start < 3.0


@pytest.mark.ssh
def test_netns_board_has_its_own_address_and_can_be_black_holed(netns_board: SshBoard) -> None:
    with SshConnection(netns_board.settings()) as connection:
        words = connection.run("echo $SSH_CONNECTION", timeout_s=10).stdout.split()
    assert words[2:] == [netns_board.host, "22"]
    assert words[0] == netns_board.host.rsplit(".", 1)[0] + ".1"
    with netns_board.black_hole() as how:
        start = time.monotonic()
        with pytest.raises(ConnectError, match="timed out"):
            SshConnection(netns_board.settings(connect_timeout_s=1.0)).connect()
        assert 0.9 <= time.monotonic() - start < 3.0
    assert how in ("iptables", "sigstop")
    with SshConnection(netns_board.settings()) as again:
        assert again.run("true", timeout_s=10).ok


# ----------------------------------------------------------------------------- drops


@pytest.mark.ssh
@pytest.mark.parametrize("board_timeout", ["gnu", "broken"])
def test_connection_drop_mid_run(
    fresh_ssh_board: SshBoard, tmp_path: Path, board_timeout: str
) -> None:
    """With a broken board `timeout` the program's children lack the run token on their
    command line: only killing the whole process group stops them."""
    sleep = unique_sleep()
    log = tmp_path / "run.log"

    def kill_on_start(line: str) -> None:
        if line == "started":
            assert fresh_ssh_board.kill_sessions() > 0

    with SshConnection(fresh_ssh_board.settings()) as connection:
        env = None
        if board_timeout == "broken":
            fake = tmp_path / "fakebin"
            fake.mkdir()
            (fake / "timeout").write_text(FAKE_TIMEOUT)
            (fake / "timeout").chmod(0o755)
            remote_bin = f"{connection.home()}/fakebin-{uuid.uuid4().hex[:6]}"
            connection.upload_dir(fake, remote_bin)
            env = {"PATH": f"{remote_bin}:/usr/bin:/bin"}
        with pytest.raises(ExecutionError) as info:
            connection.run(
                f"echo started; {sleep}; echo never",
                timeout_s=30,
                stdout_sink=kill_on_start,
                log_path=log,
                env=env,
            )
        assert info.value.log_path == log
        assert "Connection lost" in info.value.message
        assert "were stopped after reconnecting" in info.value.message
        body = log.read_text().splitlines()[2:]  # after the header (which shows the command)
        assert body == ["started", "# connection lost before the exit status arrived"]
        assert live_processes(fresh_ssh_board, sleep) == []
        # The connection reconnects by itself for the next command.
        assert connection.run("echo back", timeout_s=10).stdout == "back\n"


@pytest.mark.ssh
def test_connection_dropped_while_idle_is_reopened(
    fresh_ssh_board: SshBoard, tmp_path: Path
) -> None:
    """Nothing had started, so reopening is safe for a run, an upload and a read."""
    local = tmp_path / "tree"
    make_tree(local)
    with SshConnection(fresh_ssh_board.settings()) as connection:
        assert connection.run("true", timeout_s=10).ok
        assert fresh_ssh_board.kill_sessions() > 0
        assert connection.run("echo again", timeout_s=10).stdout == "again\n"
        fresh_ssh_board.kill_sessions()
        home = connection.home()
        fresh_ssh_board.kill_sessions()
        assert connection.upload_dir(local, f"{home}/idle-drop").files_sent == 4
        assert connection.remove_tree(f"{home}/idle-drop")


@pytest.mark.ssh
def test_drop_with_board_unreachable_leaves_only_the_remote_timeout(
    fresh_ssh_board: SshBoard, tmp_path: Path
) -> None:
    sleep = unique_sleep()
    board = fresh_ssh_board

    def cut_off(line: str) -> None:
        if line == "started":
            os.kill(board.sshd_pid, signal.SIGSTOP)  # no reconnect possible
            board.kill_sessions()

    settings = board.settings(connect_timeout_s=1.0)
    try:
        with SshConnection(settings) as connection, pytest.raises(ExecutionError) as info:
            connection.run(f"echo started; {sleep}", timeout_s=2.5, stdout_sink=cut_off)
        assert "could not be stopped" in info.value.message
        assert "pgrep -af aidge-run-" in info.value.message
        # The board-side `timeout` still ends the orphan (checked locally: sshd is stopped).
        deadline = time.monotonic() + 6.0
        while sleep in board.run_as_user('ps -u "$(id -un)" -o args=').stdout:
            assert time.monotonic() < deadline, "orphan outlived its remote timeout"
            time.sleep(0.2)
    finally:
        os.kill(board.sshd_pid, signal.SIGCONT)


@pytest.mark.ssh
def test_connection_drop_mid_upload(fresh_ssh_board: SshBoard, tmp_path: Path) -> None:
    local = tmp_path / "big"
    for i in range(12):
        (local / f"part{i:02}.bin").parent.mkdir(parents=True, exist_ok=True)
        (local / f"part{i:02}.bin").write_bytes(os.urandom(1_000_000))
    sent: list[str] = []

    def kill_after_first(rel: str, size: int) -> None:
        sent.append(rel)
        if len(sent) == 1:
            fresh_ssh_board.kill_sessions()

    with SshConnection(fresh_ssh_board.settings()) as connection:
        remote = f"{connection.home()}/upload-drop"
        with pytest.raises(TransferError) as info:
            connection.upload_dir(local, remote, on_file=kill_after_first)
        assert "Connection lost while uploading" in info.value.message
        # No session of this board's own sshd is left (its process tree, not every `pi`
        # session on the machine: other tests' boards run as the same user).
        assert fresh_ssh_board.session_pids() == []
        report = connection.upload_dir(local, remote)
        assert report.files_sent + report.files_unchanged == 12
        listing = connection.run(f"ls -A {remote}", timeout_s=10).stdout.split()
        assert not [name for name in listing if name.endswith(".aidge-part")]
        assert connection.upload_dir(local, remote).files_sent == 0
        connection.remove_tree(remote)


# ----------------------------------------------------------------------------- transfers


@pytest.mark.ssh
def test_upload_sends_only_changed_files(
    conn: SshConnection, remote_dir: str, tmp_path: Path
) -> None:
    local = tmp_path / "export"
    files = make_tree(local)
    first = conn.upload_dir(local, remote_dir)
    assert first.files_sent == 4  # __pycache__ excluded
    assert first.bytes_sent == sum(len(v) for k, v in files.items() if "__pycache__" not in k)
    check = conn.run(
        "sha256sum main.cpp include/model.h data/weights.bin", cwd=remote_dir, timeout_s=10
    )
    import hashlib

    for rel in ("main.cpp", "include/model.h", "data/weights.bin"):
        assert f"{hashlib.sha256(files[rel]).hexdigest()}  {rel}" in check.stdout
    assert conn.run("./run.sh", cwd=remote_dir, timeout_s=10).stdout == "run-ok\n"
    assert conn.run("test -e __pycache__", cwd=remote_dir, timeout_s=10).exit_status == 1

    again = conn.upload_dir(local, remote_dir)
    assert (again.files_sent, again.bytes_sent, again.files_unchanged) == (0, 0, 4)

    (local / "main.cpp").write_bytes(b"int main() { return 1; }\n")
    (local / "data" / "weights.bin").unlink()
    changed = conn.upload_dir(local, remote_dir)
    assert (changed.files_sent, changed.files_deleted) == (1, 1)
    assert conn.run("test -e data/weights.bin", cwd=remote_dir, timeout_s=10).exit_status == 1

    # A file modified on the board no longer matches the manifest: it is sent again.
    conn.run("echo tampered >> include/model.h", cwd=remote_dir, timeout_s=10)
    repaired = conn.upload_dir(local, remote_dir)
    assert repaired.files_sent == 1
    assert conn.run("cat include/model.h", cwd=remote_dir, timeout_s=10).stdout == (
        files["include/model.h"].decode()
    )
    assert conn.run(f"test -f {MANIFEST_NAME}", cwd=remote_dir, timeout_s=10).ok


@pytest.mark.ssh
def test_upload_into_read_only_dir_is_a_transfer_error(
    conn: SshConnection, remote_dir: str, tmp_path: Path
) -> None:
    conn.run(f"mkdir -p {remote_dir}/ro && chmod 555 {remote_dir}/ro", timeout_s=10)
    local = tmp_path / "export"
    make_tree(local)
    with pytest.raises(TransferError) as info:
        conn.upload_dir(local, f"{remote_dir}/ro/sub")
    assert "Permission denied" in info.value.message
    assert "ls -ld" in (info.value.hint or "")


@pytest.mark.ssh
def test_download_and_remove_tree(conn: SshConnection, remote_dir: str, tmp_path: Path) -> None:
    conn.run(
        f"mkdir -p {remote_dir}/out/sub && echo a > {remote_dir}/out/a.txt "
        f"&& echo b > {remote_dir}/out/sub/b.txt",
        timeout_s=10,
    )
    tree = conn.download(f"{remote_dir}/out", tmp_path / "got")
    assert tree.files_sent == 2
    assert (tmp_path / "got" / "sub" / "b.txt").read_text() == "b\n"
    (tmp_path / "single").mkdir()
    conn.download(f"{remote_dir}/out/a.txt", tmp_path / "single")
    assert (tmp_path / "single" / "a.txt").read_text() == "a\n"
    with pytest.raises(TransferError, match="No such file"):
        conn.download(f"{remote_dir}/missing", tmp_path / "x")
    with pytest.raises(TransferError, match="Refusing"):
        conn.remove_tree(conn.home())
    with pytest.raises(TransferError, match="Refusing"):
        conn.remove_tree("/")
    assert conn.remove_tree(f"{remote_dir}/out") is True
    assert conn.remove_tree(f"{remote_dir}/out") is False


# ----------------------------------------------------------------------------- secrets


@pytest.mark.ssh
def test_no_key_material_in_logs_errors_or_reprs(
    ssh_board: SshBoard, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    passphrase = "correct-horse-battery-staple-42"
    key = asyncssh.read_private_key(str(ssh_board.key_path))
    encrypted = tmp_path / "id_encrypted"
    key.write_private_key(str(encrypted), passphrase=passphrase, rounds=64)
    secret_lines = [
        line
        for path in (ssh_board.key_path, encrypted)
        for line in path.read_text().splitlines()
        if line and not line.startswith("-----")
    ]
    texts: list[str] = []
    asyncssh.set_debug_level(2)
    caplog.set_level(logging.DEBUG)
    try:
        good = ssh_board.settings(key_path=encrypted, key_passphrase=passphrase)
        with SshConnection(good) as connection:
            texts += [repr(good), repr(connection), str(good)]
            texts.append(connection.run("echo ok", timeout_s=10).stdout)
        for settings in (
            ssh_board.settings(key_path=encrypted, key_passphrase="wrong-passphrase-1"),
            ssh_board.settings(key_path=encrypted),
        ):
            with pytest.raises(AuthenticationError) as info:
                SshConnection(settings).connect()
            texts += [str(info.value), repr(info.value), repr(settings)]
    finally:
        asyncssh.set_debug_level(1)
    texts += [record.getMessage() for record in caplog.records]
    blob = "\n".join(texts)
    assert "Auth for user" in blob  # the logs were really captured
    assert passphrase not in blob and "wrong-passphrase-1" not in blob
    for line in secret_lines:
        assert line not in blob


# ----------------------------------------------------------------------------- docker


@pytest.mark.ssh
@pytest.mark.docker
def test_docker_run_through_ssh_preserves_exit_code(docker_board: DockerBoard) -> None:
    with SshConnection(docker_board.ssh.settings()) as connection:
        result = connection.run(
            f"docker run --rm --pull never --network none {docker_board.image} "
            "sh -c 'echo in-container; uname -s; exit 7'",
            timeout_s=60,
        )
    assert result.exit_status == 7, result.stderr
    assert result.stdout == "in-container\nLinux\n"


@pytest.mark.ssh
@pytest.mark.docker
def test_docker_runs_a_host_built_cpp_program(docker_board: DockerBoard, tmp_path: Path) -> None:
    if shutil.which("g++") is None:
        missing("g++ not installed")
    job = tmp_path / "job"
    job.mkdir()
    (job / "hello.cpp").write_text(
        "#include <iostream>\n#include <vector>\nint main() {\n"
        '  std::vector<int> v{1, 2, 3};\n  std::cout << "sum=" << v[0] + v[1] + v[2]'
        " << std::endl;\n  return 5;\n}\n"
    )
    subprocess.run(["g++", "-O1", "-o", str(job / "hello"), str(job / "hello.cpp")], check=True)
    with SshConnection(docker_board.ssh.settings()) as connection:
        remote = f"{connection.home()}/docker-job"
        connection.upload_dir(job, remote)
        result = connection.run(
            f"docker run --rm --pull never --network none -v {remote}:/work -w /work "
            f"{docker_board.image} ./hello",
            timeout_s=60,
        )
        connection.remove_tree(remote)
    assert (result.exit_status, result.stdout) == (5, "sum=6\n"), result.stderr


@pytest.mark.ssh
@pytest.mark.docker
def test_docker_missing_image_is_reported(docker_board: DockerBoard) -> None:
    with SshConnection(docker_board.ssh.settings()) as connection:
        result = connection.run(
            "docker run --rm --pull never --network none localhost/no-such-image:0 true",
            timeout_s=60,
        )
    assert result.exit_status == 125
    assert "no-such-image" in result.stderr and "No such image" in result.stderr


# ----------------------------------------------------------------------------- aarch64

UNAME_CPP = r"""
#include <sys/utsname.h>
#include <cstdio>
int main() {
    struct utsname u;
    if (uname(&u) != 0) return 2;
    std::printf("machine=%s\n", u.machine);
    return 0;
}
"""


@pytest.mark.ssh
@pytest.mark.aarch64
def test_aarch64_binaries_run_on_the_board(aarch64_board: Aarch64Board, tmp_path: Path) -> None:
    src = tmp_path / "uname.cpp"
    src.write_text(UNAME_CPP)
    job = tmp_path / "job"
    job.mkdir()
    runner = aarch64_board.runner
    runner.compile(src, job / "uname-static", static=True)
    runner.compile(src, job / "uname-dynamic", static=False)
    assert runner.run([str(job / "uname-static")]).stdout == "machine=aarch64\n"
    with SshConnection(aarch64_board.ssh.settings()) as connection:
        remote = f"{connection.home()}/arm-job"
        connection.upload_dir(job, remote)
        static = connection.run("./uname-static", cwd=remote, timeout_s=60)
        dynamic = connection.run(
            "./uname-dynamic", cwd=remote, timeout_s=60, env=aarch64_board.remote_env
        )
        host = connection.run("uname -m", timeout_s=10)
        connection.remove_tree(remote)
    assert host.stdout.strip() == platform.machine()  # the board's shell is the host's
    assert (static.exit_status, static.stdout) == (0, "machine=aarch64\n"), static.stderr
    assert (dynamic.exit_status, dynamic.stdout) == (0, "machine=aarch64\n"), dynamic.stderr
