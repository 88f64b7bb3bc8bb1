"""Opening an authenticated, host-verified asyncssh connection, with retries.

Why this module exists: connecting is the one SSH operation that is always safe to retry (a board
that is still booting refuses, a flaky link resets), while a wrong key, an unknown or changed host
key or an unknown host name must fail at once with a hint the user can act on. This module owns
that distinction and the translation of asyncssh/OS exceptions into ``ConnectError``,
``AuthenticationError`` and ``HostKeyError``. It never logs or reports key material or the
passphrase: messages name the key *file* only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

import asyncssh

from aidge_deploy.connections.ssh_hostkeys import BoardClient, KnownHostsVerifier
from aidge_deploy.connections.ssh_settings import SshSettings
from aidge_deploy.errors import AuthenticationError, ConnectError

_log = logging.getLogger(__name__)

# Failures where another attempt may succeed: refused/reset (board booting), timeouts, drops.
_TRANSIENT = (OSError, asyncio.TimeoutError, asyncssh.ConnectionLost, asyncssh.DisconnectError)


def _check_key_file(settings: SshSettings) -> None:
    key = settings.resolved_key()
    if key is None:
        return
    if not key.is_file():
        raise AuthenticationError(
            f"SSH private key {key} does not exist (connecting to {settings.label})",
            "Give the path of the private key (not the .pub) whose public half is in the "
            "board user's ~/.ssh/authorized_keys, e.g. ~/.ssh/id_ed25519.",
            stage="connect",
        )
    if not os.access(key, os.R_OK):
        raise AuthenticationError(
            f"SSH private key {key} is not readable by this user",
            f"Fix its permissions: chmod 600 {key} (and check the owner).",
            stage="connect",
        )


def _auth_hint(settings: SshSettings) -> str:
    key = settings.resolved_key()
    key_text = f"the key {key}" if key else "your default keys or SSH agent"
    pub = f"{key}.pub" if key else "~/.ssh/id_ed25519.pub"
    user = settings.user or "<user>"
    return (
        f"The board refused {key_text}. Install the public key on the board with "
        f"`ssh-copy-id -i {pub} {user}@{settings.host}` (or append it to "
        "~/.ssh/authorized_keys of that user), check the user name, and that the account is "
        "not locked (usermod -p '*' <user> for key-only accounts)."
    )


def _connect_kwargs(settings: SshSettings, verifier: KnownHostsVerifier) -> dict[str, Any]:
    key = settings.resolved_key()
    config = settings.resolved_config()
    kwargs: dict[str, Any] = {
        "known_hosts": verifier.match,
        "client_factory": lambda: BoardClient(verifier),
        "connect_timeout": settings.connect_timeout_s,
        "keepalive_interval": settings.keepalive_interval_s,
        "keepalive_count_max": settings.keepalive_count_max,
        # None disables ssh_config entirely; otherwise only the file we resolved.
        "config": [str(config)] if config is not None else None,
    }
    if settings.port is not None:
        kwargs["port"] = settings.port
    if settings.user is not None:
        kwargs["username"] = settings.user
    if key is not None:
        kwargs["client_keys"] = [str(key)]
    if settings.key_passphrase is not None:
        kwargs["passphrase"] = settings.key_passphrase
    if not settings.allow_agent:
        kwargs["agent_path"] = None
    return kwargs


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text


async def open_connection(settings: SshSettings) -> asyncssh.SSHClientConnection:
    """Connect, verify the host key and authenticate; retry only transient failures.

    Raises ``HostKeyError``, ``AuthenticationError`` (never retried) or ``ConnectError``
    after ``settings.connect_attempts`` attempts.
    """
    _check_key_file(settings)
    last: BaseException | None = None
    for attempt in range(1, settings.connect_attempts + 1):
        verifier = KnownHostsVerifier(
            settings.resolved_known_hosts(), trust_on_first_use=settings.trust_on_first_use
        )
        _log.debug(
            "Connecting to %s (attempt %d/%d)", settings.label, attempt, settings.connect_attempts
        )
        try:
            conn = await asyncssh.connect(settings.host, **_connect_kwargs(settings, verifier))
        except asyncssh.HostKeyNotVerifiable:
            raise verifier.error(settings.label) from None
        except asyncssh.KeyExchangeFailed as exc:
            # With entries for the host, asyncssh offers only their key types: a board whose
            # key type changed fails the key exchange instead of the key check.
            if verifier.host_had_entries or verifier.load_error is not None:
                raise verifier.error(settings.label) from None
            raise ConnectError(
                f"SSH key exchange with {settings.label} failed: {exc}",
                "The board's sshd offers no algorithm in common with this client; update "
                "OpenSSH on the board or check KexAlgorithms/HostKeyAlgorithms in ssh_config.",
                stage="connect",
            ) from None
        except asyncssh.PermissionDenied:
            raise AuthenticationError(
                f"Authentication to {settings.label} failed (public key refused)",
                _auth_hint(settings),
                stage="connect",
            ) from None
        except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
            # The exception text names the problem ("passphrase", "format"), never the key.
            raise AuthenticationError(
                f"Cannot load SSH private key {settings.resolved_key()}: {exc}",
                "Give the right key_passphrase for an encrypted key, or check that the file is "
                "an OpenSSH/PEM private key.",
                stage="connect",
            ) from None
        except socket.gaierror as exc:
            raise ConnectError(
                f"Cannot resolve SSH host {settings.host!r}: {exc}",
                "Check the host name or IP address, or the HostName of this alias in "
                "~/.ssh/config.",
                stage="connect",
            ) from None
        except _TRANSIENT as exc:
            last = exc
            _log.info(
                "Connection to %s failed (attempt %d/%d): %s",
                settings.label,
                attempt,
                settings.connect_attempts,
                _describe(exc),
            )
            if attempt < settings.connect_attempts:
                await asyncio.sleep(settings.retry_backoff_s * 2 ** (attempt - 1))
            continue
        verifier.record_first_use()
        return conn
    port = settings.port or "22 (or the ssh_config Port)"
    raise ConnectError(
        f"Cannot connect to {settings.label} after {settings.connect_attempts} attempt(s) "
        f"({settings.connect_timeout_s:g} s each): {_describe(last) if last else 'unknown'}",
        f"Check that the board is powered and on the network (ping {settings.host}), that "
        f"sshd listens on port {port} (nc -vz {settings.host} <port>) and that no firewall "
        "drops it; raise connect_timeout_s for a slow link.",
        stage="connect",
    )


__all__ = ["open_connection"]
