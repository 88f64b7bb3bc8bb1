"""Result bundles: write them, verify them, render them, compare them.

``write_bundle`` turns one deploy result into a directory of versioned JSON documents, a
CSV profile, the raw log, Model Explorer overlays, an offline HTML report and a SHA-256
manifest; ``verify_bundle`` checks such a directory; ``compare_bundles`` diffs two of them.

The names load on first use: ``report.compare`` (and so the CLI's ``compare``) must not pull
in the bundle writer and with it ``aidge_core``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aidge_deploy.report.bundle import Bundle, write_bundle
    from aidge_deploy.report.manifest import BundleManifest, FileRole, verify_bundle
    from aidge_deploy.report.summary import ProfileFormat

_EXPORTS = {
    "Bundle": "bundle",
    "write_bundle": "bundle",
    "BundleManifest": "manifest",
    "FileRole": "manifest",
    "verify_bundle": "manifest",
    "ProfileFormat": "summary",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aidge_deploy.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"aidge_deploy.report.{module}"), name)


__all__ = [
    "Bundle",
    "BundleManifest",
    "FileRole",
    "ProfileFormat",
    "verify_bundle",
    "write_bundle",
]
