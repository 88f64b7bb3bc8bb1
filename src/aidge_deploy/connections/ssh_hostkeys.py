"""Host-key verification against a known_hosts file, with opt-in trust-on-first-use.

Why this module exists: asyncssh reports every host-key failure as one ``HostKeyNotVerifiable``,
but a user must be told two very different things: "this board is unknown, here is how to add
it" versus "this board's key CHANGED, refusing". This module feeds asyncssh the matching
known_hosts entries itself (so it knows whether any existed), records the key the board
presented, and builds the corresponding ``HostKeyError`` with an actionable hint. With
trust-on-first-use it accepts a board that has *no* entry at all and appends its key to the
known_hosts file after the connection succeeded; a changed key is never accepted.
"""

from __future__ import annotations

import logging
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from aidge_deploy.connections.ssh_settings import DEFAULT_SSH_PORT
from aidge_deploy.errors import HostKeyError

_log = logging.getLogger(__name__)

# ssh-keyscan's -t names for the key algorithms a board may present.
_KEYSCAN_TYPES = {
    "ssh-ed25519": "ed25519",
    "ssh-rsa": "rsa",
    "ecdsa-sha2-nistp256": "ecdsa",
    "ecdsa-sha2-nistp384": "ecdsa",
    "ecdsa-sha2-nistp521": "ecdsa",
}


@dataclass(frozen=True)
class PresentedKey:
    """The public host key a board presented during the key exchange."""

    algorithm: str
    fingerprint: str
    openssh_line: str  # "<algorithm> <base64>", no comment


def known_hosts_name(host: str, port: int | None) -> str:
    """The host field of a known_hosts line, as OpenSSH writes it."""
    if port is None or port == DEFAULT_SSH_PORT:
        return host
    return f"[{host}]:{port}"


def keyscan_command(host: str, port: int | None, algorithm: str | None, known_hosts: Path) -> str:
    """The ``ssh-keyscan`` command that appends the board's key to ``known_hosts``."""
    parts = ["ssh-keyscan"]
    if port is not None and port != DEFAULT_SSH_PORT:
        parts += ["-p", str(port)]
    key_type = _KEYSCAN_TYPES.get(algorithm or "")
    if key_type:
        parts += ["-t", key_type]
    parts.append(host)
    return f"{shlex.join(parts)} >> {shlex.quote(str(known_hosts))}"


class KnownHostsVerifier:
    """One connection attempt's view of known_hosts (not thread-safe, not reusable).

    ``match`` is passed to asyncssh as its ``known_hosts`` callable and ``on_untrusted_key``
    is called by ``BoardClient.validate_host_public_key`` when the presented key is not
    among the trusted ones.
    """

    def __init__(self, path: Path, *, trust_on_first_use: bool) -> None:
        self.path = path
        self.trust_on_first_use = trust_on_first_use
        self.host: str | None = None
        self.port: int | None = None
        self.trusted_fingerprints: list[str] = []
        self.presented: PresentedKey | None = None
        self.accepted_on_first_use = False
        self.load_error: HostKeyError | None = None

    def match(self, host: str, addr: str, port: int | None) -> Any:
        """Return the known_hosts entries for this host (asyncssh's callable contract)."""
        self.host, self.port = host, port
        known = asyncssh.SSHKnownHosts()
        if self.path.is_file():
            try:
                known.load(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError, asyncssh.KeyImportError) as exc:
                # Raising inside asyncssh's callback would be wrapped; keep it for the caller.
                self.load_error = HostKeyError(
                    f"Cannot read known_hosts file {self.path}: {exc}",
                    "Fix or remove the malformed line (each line: host keytype base64).",
                    stage="connect",
                )
                return ([], [], [])
        host_keys, ca_keys, revoked = known.match(host, addr, port)[:3]
        self.trusted_fingerprints = [k.get_fingerprint("sha256") for k in [*host_keys, *ca_keys]]
        # Only keys, CA keys and revocations: X.509 host certificates are not supported.
        return (list(host_keys), list(ca_keys), list(revoked))

    def on_untrusted_key(self, key: asyncssh.SSHKey) -> bool:
        """Record the presented key; accept it only for TOFU on a host with no entry."""
        base64_part = key.export_public_key("openssh").decode("ascii").split()[1]
        algorithm = key.get_algorithm()
        self.presented = PresentedKey(
            algorithm=algorithm,
            fingerprint=key.get_fingerprint("sha256"),
            openssh_line=f"{algorithm} {base64_part}",
        )
        if self.trust_on_first_use and not self.trusted_fingerprints:
            self.accepted_on_first_use = True
            return True
        return False

    @property
    def host_had_entries(self) -> bool:
        return bool(self.trusted_fingerprints)

    def record_first_use(self) -> None:
        """Append the key accepted on first use to the known_hosts file."""
        if not self.accepted_on_first_use or self.presented is None or self.host is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = f"{known_hosts_name(self.host, self.port)} {self.presented.openssh_line}\n"
        prefix = ""
        if self.path.is_file() and self.path.stat().st_size > 0:
            with self.path.open("rb") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    prefix = "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(prefix + line)
        _log.warning(
            "Trusted %s on first use: added %s %s to %s",
            known_hosts_name(self.host, self.port),
            self.presented.algorithm,
            self.presented.fingerprint,
            self.path,
        )

    def error(self, target: str) -> HostKeyError:
        """The ``HostKeyError`` explaining why verification failed."""
        if self.load_error is not None:
            return self.load_error
        host = self.host or target
        name = known_hosts_name(host, self.port)
        presented = (
            f"{self.presented.algorithm} {self.presented.fingerprint}"
            if self.presented
            else "a key of a type known_hosts has no entry for"
        )
        scan = keyscan_command(
            host, self.port, self.presented.algorithm if self.presented else None, self.path
        )
        if self.host_had_entries:
            trusted = ", ".join(self.trusted_fingerprints)
            remove = f"ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(str(self.path))}"
            return HostKeyError(
                f"HOST KEY CHANGED for {name} ({target}): the board presented {presented} but "
                f"{self.path} trusts {trusted}. Refusing to connect: this is either a "
                "re-installed board or someone intercepting the connection.",
                f"Check the key on the board's console (ssh-keygen -lf "
                f"/etc/ssh/ssh_host_*_key.pub). If the board was re-flashed, remove the stale "
                f"entry with `{remove}` and add the new key with `{scan}`.",
                stage="connect",
            )
        tofu = "" if self.trust_on_first_use else " or enable trust_on_first_use to record it once"
        return HostKeyError(
            f"Unknown host key for {name} ({target}): it is not in {self.path}; the board "
            f"presented {presented}. Refusing to connect to an unverified board.",
            f"If this is your board, add its key with `{scan}` after comparing the fingerprint "
            f"with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on the board{tofu}.",
            stage="connect",
        )


class BoardClient(asyncssh.SSHClient):
    """asyncssh client callbacks: route untrusted host keys to the verifier."""

    def __init__(self, verifier: KnownHostsVerifier) -> None:
        self._verifier = verifier

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        return self._verifier.on_untrusted_key(key)


__all__ = [
    "BoardClient",
    "KnownHostsVerifier",
    "PresentedKey",
    "keyscan_command",
    "known_hosts_name",
]
