"""The security headers of the dashboard's pages (and of the API's docs page): scripts,
styles, frames and fetches from this site only, no inline code. A leaf module."""

from __future__ import annotations

#: the pages' policy: scripts, styles, frames and fetches from this site only, no inline code
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)

#: the headers every page (not the REST API) carries
PAGE_HEADERS = (
    ("Content-Security-Policy", PAGE_CSP),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)

__all__ = ["PAGE_CSP", "PAGE_HEADERS"]
