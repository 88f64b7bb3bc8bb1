"""Reading a user's YAML file (a lab, a campaign) with errors a user can act on.

Why this module exists: every YAML file the user hands over fails the same ways — a folder
given for the file, a missing file, an unreadable one, broken YAML — and each must say so in
one line with a hint, never as a traceback. The file's own schema is its reader's business.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from aidge_deploy.errors import ConfigError


def read_yaml(path: Path, what: str, error: type[ConfigError], missing_hint: str) -> Any:
    """The data of the YAML file ``path`` (a ``what``: "lab file", "campaign file").

    Raises ``error`` for a folder, a missing or unreadable file and invalid YAML.
    """
    if path.is_dir():
        raise error(f"{path} is a folder, not a {what}", hint="Pass the YAML file.")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{what} {path} not found", hint=missing_hint) from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}", hint="Check indentation.") from None


__all__ = ["read_yaml"]
