"""A plug-in distribution made in a test: a wheel built from sources (PEP 427) and installed
by pip into a folder of its own, seen by the commands run with the returned environment.

Shared by the tests of third-party plug-ins (``test_plugin_distribution``, a target class,
protocol and monitor; ``test_board_records``, boards as records only): what they check is
what the installed entry points do, so the wheel is a real one and pip installs it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path


def build_wheel(
    folder: Path, name: str, version: str, sources: Mapping[str, str], entry_points: str
) -> Path:
    """The plug-in as a wheel: its files, METADATA, WHEEL, entry points, RECORD."""
    info = f"{name}-{version}.dist-info"
    files = {
        **sources,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": entry_points,
    }
    records = []
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            records.append(f"{path},sha256={digest.decode()},{len(data)}")
            archive.writestr(path, data)
        records.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return wheel


def installed_env(
    root: Path, name: str, version: str, sources: Mapping[str, str], entry_points: str
) -> dict[str, str]:
    """The environment of a command that sees the plug-in, installed under ``root/site``."""
    site = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
         "--target", str(site), str(build_wheel(root, name, version, sources, entry_points))],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert (site / f"{name}-{version}.dist-info" / "entry_points.txt").is_file()
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}


def cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``aidge-deploy ARGS`` in its own process, with ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "aidge_deploy.cli.main", *args],
        capture_output=True, text=True, env=dict(env), timeout=900,
    )  # fmt: skip


def flat(text: str) -> str:
    """Rich's table output as words: borders gone, whitespace normalised."""
    return " ".join(text.replace("│", " ").replace("┃", " ").split())
