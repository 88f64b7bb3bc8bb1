"""The bounded field types every farm input is made of (a leaf module: Pydantic only).

One definition of what a client may send, shared by the REST models (``models``), the
job config (``jobconfig``), the pages' query, path and form parameters (``web.params``,
``web.forms``): ids fit the database's integer column, numbers are finite and in range,
text is storable as it is. A value outside these is a 422 naming its field, never a 500.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

#: the largest id the database stores: the farm's ids are ``Integer`` columns, 32-bit on
#: PostgreSQL (SQLite's hold 64 bits, and the farm keeps to the smaller range on both).
#: A larger value is not merely unknown: SQLAlchemy casts each bound value to its
#: column's type there (``%(id)s::INTEGER``), and the server refuses it ("integer out of
#: range") — as SQLite's driver refuses an int beyond 64 bits (OverflowError)
MAX_ID = 2**31 - 1


def storable(value: str) -> str:
    """Text a database stores as it is: no NUL character (PostgreSQL refuses them in
    text) and no lone surrogate (not encodable as UTF-8: SQLite and psycopg refuse it)."""
    if "\x00" in value:
        raise ValueError("text may not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode (it holds a lone surrogate)") from None
    return value


#: free text, storable (bound its length where it is used)
Line = Annotated[str, AfterValidator(storable)]
JobId = Annotated[int, Field(ge=1, le=MAX_ID)]
EventId = Annotated[int, Field(ge=0, le=MAX_ID)]
Lease = Annotated[int, Field(ge=0, le=MAX_ID)]
#: a finite, non-negative number of seconds
Seconds = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
#: how long a long poll may wait (s)
Wait = Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]
ExportId = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
BoardName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
TargetName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$")]
UserName = Annotated[Line, Field(min_length=1, max_length=64)]
Password = Annotated[Line, Field(max_length=1024)]
CampaignId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")]
Priority = Annotated[float, Field(ge=-100, le=100, allow_inf_nan=False)]

__all__ = [
    "MAX_ID",
    "BoardName",
    "CampaignId",
    "EventId",
    "ExportId",
    "JobId",
    "Lease",
    "Line",
    "Password",
    "Priority",
    "Seconds",
    "TargetName",
    "UserName",
    "Wait",
    "storable",
]
