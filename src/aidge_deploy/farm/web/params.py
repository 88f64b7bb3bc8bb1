"""The pages' path and query parameters, bounded like the REST API's (``models``): an id
the database cannot hold, or a wait that is not a finite number, is a 422, never a 500."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from aidge_deploy.farm.models import MAX_ID

JobIdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
JobIdQuery = Annotated[int | None, Query(ge=1, le=MAX_ID)]
EventIdQuery = Annotated[int, Query(ge=0, le=MAX_ID)]
WaitQuery = Annotated[float, Query(ge=0, le=3600, allow_inf_nan=False)]

__all__ = ["EventIdQuery", "JobIdPath", "JobIdQuery", "WaitQuery"]
