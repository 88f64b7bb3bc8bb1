"""A request the farm refuses: an HTTP status, a message and a hint (a leaf module).

Raised by the domain modules (``jobs``, ``boards``, ``auth``...) and rendered as
``{"error": {"message", "hint", ...}}`` by the service, or as an error page by the
dashboard, so that neither the domain nor the pages need the other.
"""

from __future__ import annotations

from typing import Any


class FarmRequestError(Exception):
    """A refused request: HTTP ``status``, a message and a hint (rendered as JSON)."""

    def __init__(self, status: int, message: str, hint: str = "", **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.hint = hint
        self.extra = extra


def not_found(what: str, ident: object) -> FarmRequestError:
    return FarmRequestError(404, f"no {what} {ident}", "Check the id (you see only your own).")


__all__ = ["FarmRequestError", "not_found"]
