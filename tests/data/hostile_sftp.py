"""A hostile board's SFTP subsystem: the real OpenSSH sftp-server, with directory listings lied about.

Run by the test sshd as ``Subsystem sftp python3 hostile_sftp.py SFTP_SERVER BAIT=NAME ...``.
Every packet passes through unchanged, except the names of a READDIR answer: an entry called
BAIT is sent as NAME (``../escaped``, ``/tmp/x``, ``a/../../x``...), which no honest server
sends. Standard library only: it runs with the board's system Python, as the board user.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
from typing import BinaryIO

FXP_READDIR = 12
FXP_NAME = 104
ATTR_SIZE, ATTR_UIDGID, ATTR_PERMISSIONS, ATTR_ACMODTIME, ATTR_EXTENDED = 1, 2, 4, 8, 0x80000000


def read_packet(stream: BinaryIO) -> bytes | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    (length,) = struct.unpack(">I", header)
    body = stream.read(length)
    return body if len(body) == length else None


def write_packet(stream: BinaryIO, body: bytes) -> None:
    stream.write(struct.pack(">I", len(body)) + body)
    stream.flush()


def _string(data: bytes, at: int) -> tuple[bytes, int]:
    (length,) = struct.unpack_from(">I", data, at)
    return data[at + 4 : at + 4 + length], at + 4 + length


def _attrs_end(data: bytes, at: int) -> int:
    (flags,) = struct.unpack_from(">I", data, at)
    at += 4
    at += 8 if flags & ATTR_SIZE else 0
    at += 8 if flags & ATTR_UIDGID else 0
    at += 4 if flags & ATTR_PERMISSIONS else 0
    at += 8 if flags & ATTR_ACMODTIME else 0
    if flags & ATTR_EXTENDED:
        (count,) = struct.unpack_from(">I", data, at)
        at += 4
        for _ in range(2 * count):
            _, at = _string(data, at)
    return at


def rewrite_names(body: bytes, renames: dict[bytes, bytes]) -> bytes:
    """A NAME packet (type, id, count, entries) with the bait names replaced."""
    (count,) = struct.unpack_from(">I", body, 5)
    out = [body[:9]]
    at = 9
    for _ in range(count):
        name, at = _string(body, at)
        _, after_long = _string(body, at)  # the longname, kept as is
        end = _attrs_end(body, after_long)
        name = renames.get(name, name)
        out.append(struct.pack(">I", len(name)) + name)
        out.append(body[at:end])
        at = end
    return b"".join(out)


def main() -> None:
    server, *pairs = sys.argv[1:]
    renames = {}
    for pair in pairs:
        bait, _, name = pair.partition("=")
        renames[bait.encode()] = name.encode()
    child = subprocess.Popen([server], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    readdir_ids: set[int] = set()
    lock = threading.Lock()

    def client_to_server() -> None:
        while (body := read_packet(sys.stdin.buffer)) is not None:
            if body[0] == FXP_READDIR:
                with lock:
                    readdir_ids.add(struct.unpack_from(">I", body, 1)[0])
            write_packet(child.stdin, body)  # type: ignore[arg-type]
        child.stdin.close()  # type: ignore[union-attr]

    threading.Thread(target=client_to_server, daemon=True).start()
    while (body := read_packet(child.stdout)) is not None:
        if body[0] == FXP_NAME:
            (request,) = struct.unpack_from(">I", body, 1)
            with lock:
                is_listing = request in readdir_ids
                readdir_ids.discard(request)
            if is_listing:
                body = rewrite_names(body, renames)
        write_packet(sys.stdout.buffer, body)
    child.wait()


if __name__ == "__main__":
    main()
