"""Result bundles: write them, verify them, render them, compare them.

``write_bundle`` turns one deploy result into a directory of versioned JSON documents, a
CSV profile, the raw log, Model Explorer overlays, an offline HTML report and a SHA-256
manifest; ``verify_bundle`` checks such a directory; ``compare_bundles`` diffs two of them.
"""

from __future__ import annotations

from aidge_deploy.report.bundle import Bundle, write_bundle
from aidge_deploy.report.manifest import BundleManifest, FileRole, verify_bundle
from aidge_deploy.report.summary import ProfileFormat

__all__ = [
    "Bundle",
    "BundleManifest",
    "FileRole",
    "ProfileFormat",
    "verify_bundle",
    "write_bundle",
]
