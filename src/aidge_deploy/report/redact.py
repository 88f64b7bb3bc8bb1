"""Keep secrets out of result bundles.

``DeployConfig.snapshot()`` already masks the fields declared secret, but a bundle also
holds free-form material: the ``extra`` dict, URLs that may carry credentials, and the raw
log of the run (a board may echo what it was sent). So the bundle writer collects every
secret value the config holds and scrubs those bytes from *every* file it writes, and
structured data is masked by key name as a second line of defence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from aidge_deploy.config import SECRET_FIELDS, DeployConfig

MASK = "***"
#: key names whose values are treated as secrets wherever they appear
SECRET_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|api[_-]?key|credential|private[_-]?key",
    re.IGNORECASE,
)
#: shorter secrets are masked in structured data but not scrubbed from free text, where
#: replacing every occurrence of one or two characters would destroy the content
MIN_SCRUB_LENGTH = 4


def _strip_userinfo(url: str) -> tuple[str, str | None]:
    """``https://user:pw@host/x`` -> (``https://host/x``, ``pw``); other strings unchanged."""
    if "://" not in url or "@" not in url:
        return url, None
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    if parts.password is None and parts.username is None:
        return url, None
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), (
        parts.password or parts.username
    )


def _collect(value: Any, key: str | None, out: list[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _collect(v, str(k), out)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect(v, key, out)
    elif isinstance(value, str) and value:
        if key is not None and SECRET_KEY.search(key):
            out.append(value)
        _, credential = _strip_userinfo(value)
        if credential:
            out.append(credential)


def secret_values(config: DeployConfig) -> tuple[str, ...]:
    """Every secret string the config holds: declared secret fields, secret-named keys of
    ``extra``, and credentials embedded in URLs."""
    found: list[str] = []
    for name in SECRET_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, str) and value:
            found.append(value)
    for name, value in vars(config).items():
        if name not in SECRET_FIELDS:
            _collect(value, name, found)
    # longest first, so a secret that contains another is replaced whole
    return tuple(sorted(set(found), key=len, reverse=True))


def sanitize(value: Any, key: str | None = None) -> Any:
    """A copy of JSON-like data with secret-named keys masked and URL credentials removed."""
    if isinstance(value, dict):
        return {str(k): sanitize(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(v, key) for v in value]
    if isinstance(value, str):
        if key is not None and SECRET_KEY.search(key) and value and value != MASK:
            return MASK
        return _strip_userinfo(value)[0]
    return value


class Scrubber:
    """Replaces known secret values in bytes about to be written."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._needles = [s.encode() for s in secrets if len(s) >= MIN_SCRUB_LENGTH]

    def __call__(self, data: bytes) -> bytes:
        for needle in self._needles:
            data = data.replace(needle, MASK.encode())
        return data
