"""Where hwmon and RAPL read sysfs: this machine, or a Linux board over SSH.

Both monitors only ever read small text files under a sysfs root (``/sys`` by default,
``DeployConfig.power_sysfs_root`` otherwise: a container's bind mount, or a stand-in tree in
the tests). ``LocalSysfs`` reads them with ``open``; ``SshSysfs`` with one ``head`` per
poll over the board's SSH connection, so a poll costs one round trip whatever the number of
files. ``make_reader`` picks the reader from the backend: a run on an SSH board measures
the board, a local run this machine.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.errors import CaptureError
from aidge_deploy.metrics import Provenance

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.connections.ssh import SshConnection

DEFAULT_ROOT = "/sys"


class SysfsReader(ABC):
    """Read-only access to a sysfs tree (paths are relative to its root)."""

    #: measured on this machine (host) or on the board (silicon)
    provenance: Provenance
    where: str

    @abstractmethod
    def read(self, paths: Sequence[str]) -> list[str]:
        """The first line of each file, in order; ``CaptureError`` if one is unreadable."""

    def read_ints(self, paths: Sequence[str]) -> list[int]:
        """Each file's value as an integer (sensor and counter files hold one); a value that
        is not one (an empty read, a driver error text) is a ``CaptureError`` naming it."""
        out = []
        for path, text in zip(paths, self.read(paths), strict=True):
            try:
                out.append(int(text))
            except ValueError:
                raise CaptureError(
                    f"{path} on {self.where} read {text!r}, not an integer",
                    hint="The sensor's driver returned no value: check it with `cat` on the "
                    "machine; a busy I2C bus can fail a read.",
                ) from None
        return out

    @abstractmethod
    def list(self, directory: str) -> list[str]:
        """Names in ``directory`` (empty when it does not exist)."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release the connection, if any."""


class LocalSysfs(SysfsReader):
    provenance = Provenance.HOST

    def __init__(self, root: Path | str = DEFAULT_ROOT) -> None:
        self.root = Path(root)
        self.where = f"this machine ({self.root})"

    def read(self, paths: Sequence[str]) -> list[str]:
        out = []
        for rel in paths:
            try:
                with (self.root / rel).open(encoding="ascii") as fh:
                    out.append(fh.readline().strip())
            except OSError as exc:
                raise CaptureError(
                    f"cannot read {self.root / rel}: {exc.strerror}",
                    hint="Since Linux 5.10 RAPL energy is root-only (CVE-2020-8694): run as "
                    "root or grant read access; hwmon needs its driver loaded.",
                ) from exc
        return out

    def list(self, directory: str) -> list[str]:
        try:
            return sorted(p.name for p in (self.root / directory).iterdir())
        except OSError:
            return []


class SshSysfs(SysfsReader):
    provenance = Provenance.SILICON

    def __init__(self, connection: SshConnection, root: str = DEFAULT_ROOT) -> None:
        self.conn = connection
        self.root = root.rstrip("/") or "/"
        self.where = f"{connection.target}:{self.root}"

    def _run(self, command: str) -> Any:
        return self.conn.run(command, timeout_s=10.0)

    def read(self, paths: Sequence[str]) -> list[str]:
        files = " ".join(shlex.quote(f"{self.root}/{p}") for p in paths)
        result = self._run(f"head -q -n 1 -- {files}")
        lines = result.stdout.splitlines()
        if result.exit_status != 0 or len(lines) != len(paths):
            raise CaptureError(
                f"cannot read sysfs on {self.where}: {result.stderr.strip() or 'short read'}",
                hint="RAPL energy is root-only since Linux 5.10; hwmon needs its driver "
                "loaded on the board.",
            )
        return [line.strip() for line in lines]

    def list(self, directory: str) -> list[str]:
        path = shlex.quote(f"{self.root}/{directory}")
        result = self._run(f"ls -1 -- {path} 2>/dev/null || true")
        return sorted(n for n in result.stdout.split() if n)

    def close(self) -> None:
        self.conn.close()


def make_reader(config: DeployConfig, *, ssh: bool) -> SysfsReader:
    """The board's sysfs over SSH when the target's backend reaches it so (``ssh``), else
    this machine's."""
    root = config.power_sysfs_root
    if ssh:
        from aidge_deploy.connections.ssh import SshConnection
        from aidge_deploy.connections.ssh_settings import ssh_settings_from_config

        conn = SshConnection(ssh_settings_from_config(config)).connect()
        return SshSysfs(conn, str(root) if root is not None else DEFAULT_ROOT)
    return LocalSysfs(root if root is not None else DEFAULT_ROOT)


__all__ = [
    "LocalSysfs",
    "SshSysfs",
    "SysfsReader",
    "make_reader",
]
