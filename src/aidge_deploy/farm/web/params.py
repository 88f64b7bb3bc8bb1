"""The pages' path and query parameters, made of the REST API's bounded field types
(``farm.fields``): an id the database cannot hold, a wait that is not a finite number, or
text that no database stores (a NUL, a lone surrogate) is a 422 naming the parameter,
never a 500."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from aidge_deploy.farm.fields import MAX_ID, Line

JobIdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
JobIdQuery = Annotated[int | None, Query(ge=1, le=MAX_ID)]
EventIdQuery = Annotated[int, Query(ge=0, le=MAX_ID)]
WaitQuery = Annotated[float, Query(ge=0, le=3600, allow_inf_nan=False)]
#: a name a page filters or looks up by (user, board, target, state)
NameQuery = Annotated[Line, Query(max_length=64)]
NamePath = Annotated[Line, Path(max_length=64)]
#: a campaign's id (unknown ones are a 404)
CampaignPath = Annotated[Line, Path(max_length=100)]
#: a path on this site to go back to (checked by ``session.local_path``)
NextQuery = Annotated[Line | None, Query(max_length=2000)]
ModelQuery = Annotated[Line, Query(max_length=400)]

__all__ = [
    "CampaignPath",
    "EventIdQuery",
    "JobIdPath",
    "JobIdQuery",
    "ModelQuery",
    "NamePath",
    "NameQuery",
    "NextQuery",
    "WaitQuery",
]
