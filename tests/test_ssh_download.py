"""Downloads from a board never write outside their destination.

The board is a real sshd (tests/boards.py). For names no honest SFTP server sends (``..``,
absolute, ``a/../..``), its SFTP subsystem is OpenSSH's sftp-server behind a proxy that renames
directory entries (``hostile_ssh_board``); local symlinks that lead out are set up in the
destination itself; remote symlinks are made on the board.
"""

from __future__ import annotations

import os
import pwd
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidge_deploy.connections.ssh import SshConnection
from aidge_deploy.connections.ssh_transfer import UnsafeRemotePath
from aidge_deploy.errors import TransferError
from boards import HOSTILE_NAMES, SshBoard

pytestmark = pytest.mark.ssh


def _tree_on_board(
    board: SshBoard, files: dict[str, str], links: dict[str, str] | None = None
) -> str:
    """Make a directory of ``files`` (and symlinks ``links``) in the board user's home."""
    remote = f"{pwd.getpwnam(board.user).pw_dir}/dl-{uuid.uuid4().hex[:8]}"
    script = [f"mkdir -p {remote}"]
    for rel, text in files.items():
        script.append(f"mkdir -p $(dirname {remote}/{rel}) && printf %s '{text}' > {remote}/{rel}")
    for rel, target in (links or {}).items():
        script.append(f"ln -s {target} {remote}/{rel}")
    done = board.run_as_user(" && ".join(script))
    assert done.returncode == 0, done.stderr
    return remote


@pytest.fixture
def conn(ssh_board: SshBoard) -> Iterator[SshConnection]:
    with SshConnection(ssh_board.settings()) as connection:
        yield connection


@pytest.fixture
def hostile(hostile_ssh_board: SshBoard) -> Iterator[SshConnection]:
    with SshConnection(hostile_ssh_board.settings()) as connection:
        yield connection


def _everything_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("bait", sorted(HOSTILE_NAMES))
def test_hostile_names_are_refused_before_anything_is_written(
    hostile: SshConnection, hostile_ssh_board: SshBoard, tmp_path: Path, bait: str
) -> None:
    remote = _tree_on_board(
        hostile_ssh_board, {"a-first.txt": "fine", bait: "payload", "z-last.txt": "fine"}
    )
    sandbox = tmp_path / "sandbox"
    dest = sandbox / "deep" / "dest"
    dest.mkdir(parents=True)
    with pytest.raises(UnsafeRemotePath) as info:
        hostile.download(remote, dest)
    error = info.value
    assert isinstance(error, TransferError)
    assert HOSTILE_NAMES[bait] in error.message and "Refusing to download" in error.message
    assert error.hint and "Nothing was written outside" in error.hint
    # nothing anywhere: not outside, and not the honest files either (checked first)
    assert _everything_under(sandbox) == {"deep", "deep/dest"}
    assert not Path(HOSTILE_NAMES["bait-absolute"]).exists()


def test_the_proxy_lies_only_about_listings(
    hostile: SshConnection, hostile_ssh_board: SshBoard, tmp_path: Path
) -> None:
    """Control: the same board serves an honest tree normally, so the refusal above is the
    name check and not a broken server."""
    remote = _tree_on_board(hostile_ssh_board, {"x.txt": "one", "sub/y.txt": "two"})
    report = hostile.download(remote, tmp_path / "got")
    assert report.files_sent == 2
    assert (tmp_path / "got" / "sub" / "y.txt").read_text() == "two"


def test_local_symlinked_directory_leading_out_is_refused(
    conn: SshConnection, ssh_board: SshBoard, tmp_path: Path
) -> None:
    remote = _tree_on_board(ssh_board, {"logs/run.log": "remote log", "ok.txt": "ok"})
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "logs").symlink_to(outside)
    with pytest.raises(UnsafeRemotePath, match="symlink that leads out"):
        conn.download(remote, dest)
    assert list(outside.iterdir()) == []
    assert not (dest / "ok.txt").exists()


def test_local_symlinked_file_leading_out_is_refused_and_left_alone(
    conn: SshConnection, ssh_board: SshBoard, tmp_path: Path
) -> None:
    remote = _tree_on_board(ssh_board, {"result.json": "from the board"})
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "result.json").symlink_to(victim)
    with pytest.raises(UnsafeRemotePath, match="local symlink to"):
        conn.download(remote, dest)
    assert victim.read_text() == "precious"


def test_symlinks_inside_the_destination_are_replaced_not_written_through(
    conn: SshConnection, ssh_board: SshBoard, tmp_path: Path
) -> None:
    remote = _tree_on_board(ssh_board, {"a.txt": "new a", "b.txt": "new b"})
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "b.txt").write_text("old b")
    (dest / "a.txt").symlink_to(dest / "b.txt")  # inside: allowed, but never followed
    conn.download(remote, dest)
    assert not (dest / "a.txt").is_symlink()
    assert (dest / "a.txt").read_text() == "new a" and (dest / "b.txt").read_text() == "new b"
    assert not [p for p in dest.iterdir() if p.name.endswith(".aidge-part")]


def test_remote_symlinks_leading_out_are_not_followed(
    conn: SshConnection, ssh_board: SshBoard, tmp_path: Path
) -> None:
    secret_dir = ssh_board.run_as_user("mktemp -d").stdout.strip()
    ssh_board.run_as_user(f"printf secret > {secret_dir}/key")
    try:
        remote = _tree_on_board(
            ssh_board,
            {"ok.txt": "ok"},
            links={"key": f"{secret_dir}/key", "etc": "/etc", "loop": "."},
        )
        conn.download(remote, tmp_path / "got")
        assert _everything_under(tmp_path / "got") == {"ok.txt"}
    finally:
        ssh_board.run_as_user(f"rm -rf {secret_dir}")


def test_single_file_download_into_a_folder(
    conn: SshConnection, ssh_board: SshBoard, tmp_path: Path
) -> None:
    remote = _tree_on_board(ssh_board, {"one.txt": "1"})
    (tmp_path / "into").mkdir()
    conn.download(f"{remote}/one.txt", tmp_path / "into")
    assert (tmp_path / "into" / "one.txt").read_text() == "1"
    assert os.listdir(tmp_path / "into") == ["one.txt"]
