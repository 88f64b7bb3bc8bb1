"""Keep secrets out of result bundles.

``DeployConfig.snapshot()`` already masks the fields declared secret, but a bundle also
holds free-form material: the ``extra`` dict, URLs that may carry credentials, and the raw
log of the run (a board may echo what it was sent). So the bundle writer collects every
secret value the config holds and scrubs it where text can carry it: the raw log as text,
and the string values of the JSON documents (the config snapshot, notices, reasons, names).
Numbers are never touched (a secret "1234" must not rewrite a latency of 1234), nor are the
identifiers and vocabulary the tool itself generates (digests, run ids, units, provenance):
no secret can be in them and masking a chance match would corrupt the bundle. Files derived
from those documents (CSV, HTML, overlays, the file manifest) are built after scrubbing.
Structured data is also masked by key name as a second line of defence (``sanitize``).
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


#: JSON keys whose string values the tool generates (vocabulary, digests, ids, times)
_GENERATED_KEYS = frozenset(
    {
        "schema",
        "run_id",
        "timestamp",
        "created",
        "provenance",
        "unit",
        "aggregation",
        "method",
        "method_used",
        "status",
        "severity",
        "code",
        "role",
        "media_type",
        "sha256",
        "io_signature",
    }
)


def _generated(key: str | None) -> bool:
    return key is not None and (key in _GENERATED_KEYS or key.endswith(("_hash", "_provenance")))


class Scrubber:
    """Replaces known secret values in text, and in the strings of JSON documents."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = [s for s in secrets if len(s) >= MIN_SCRUB_LENGTH]
        self._needles = [s.encode() for s in self._secrets]

    def __call__(self, data: bytes) -> bytes:
        """Free text (a raw log): every occurrence is masked."""
        for needle in self._needles:
            data = data.replace(needle, MASK.encode())
        return data

    def json(self, value: Any, key: str | None = None) -> Any:
        """A copy of a JSON document with the secrets masked in its free-text strings; numbers,
        booleans, keys and the tool's own identifiers and vocabulary are left as they are."""
        if isinstance(value, dict):
            return {k: self.json(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.json(v, key) for v in value]
        if isinstance(value, str) and not _generated(key):
            for secret in self._secrets:
                value = value.replace(secret, MASK)
        return value
