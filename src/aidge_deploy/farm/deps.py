"""The service's request dependencies: the shared state, who is calling, from where.

Separate from the app factory (``service``), so that the REST routers and the pages
depend on this and the domain modules only — and the factory on all of them, with no
import cycle. The dependencies are coroutines: FastAPI runs a plain function in its
thread pool, and each hop there costs more than the check itself; only a token the cache
does not know goes to the database, in the pool.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from aidge_deploy.farm.auth import Principal, TokenCache, resolve_token, resolve_token_cached
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState

_bearer = HTTPBearer(auto_error=False)


async def farm_state(request: Request) -> FarmState:
    state: FarmState = request.app.state.farm
    return state


def principal_from_token(
    s: Session, token: str | None, cache: TokenCache | None = None
) -> Principal:
    if not token:
        principal = None
    elif cache is not None:
        principal = resolve_token_cached(s, token, cache)
    else:
        principal = resolve_token(s, token)
    if principal is None:
        raise FarmRequestError(
            401,
            "not authenticated: the token is missing, unknown, expired or revoked",
            "Get a token with POST /api/token (username, password), or use an API token.",
        )
    return principal


def _principal_from_db(state: FarmState, token: str | None) -> Principal:
    with state.db.session() as s:
        return principal_from_token(s, token, state.tokens)


async def current_principal(
    state: Annotated[FarmState, Depends(farm_state)],
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    token = creds.credentials if creds else None
    cached = state.tokens.get(token) if token else None
    if cached is not None:
        return cached
    return await run_in_threadpool(_principal_from_db, state, token)


async def current_user(who: Annotated[Principal, Depends(current_principal)]) -> Principal:
    if who.agent is not None:
        raise FarmRequestError(403, "agents cannot use the user API", "Use a user token.")
    return who


async def current_admin(who: Annotated[Principal, Depends(current_user)]) -> Principal:
    if not who.is_admin:
        raise FarmRequestError(403, "admin only", "Ask a farm admin.")
    return who


async def current_agent(who: Annotated[Principal, Depends(current_principal)]) -> Principal:
    if who.agent is None:
        raise FarmRequestError(403, "agents only", "Use the agent's token.")
    return who


@lru_cache(maxsize=64)
def _networks(
    proxies: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _trusted(
    address: str, networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def client_address(request: Request, proxies: tuple[str, ...] = ()) -> str:
    """The client's address: the peer's, unless the peer is one of the reverse
    ``proxies`` named in the settings — then the nearest address in ``X-Forwarded-For``
    that is not one of them. A header from any other peer is ignored (anyone can send it)."""
    peer = request.client.host if request.client else "unknown"
    networks = _networks(tuple(proxies))
    if not networks or not _trusted(peer, networks):
        return peer
    hops = [h.strip() for h in request.headers.get("x-forwarded-for", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, networks):
            return hop[:64]
    return peer


def forwarded_https(request: Request, proxies: tuple[str, ...] = ()) -> bool:
    """Whether the client reached the service over https: directly, or through one of the
    trusted ``proxies`` saying so (``X-Forwarded-Proto``; from anyone else it is ignored)."""
    if request.url.scheme == "https":
        return True
    peer = request.client.host if request.client else ""
    networks = _networks(tuple(proxies))
    if not networks or not _trusted(peer, networks):
        return False
    return request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower() == "https"


async def caller_address(request: Request, state: Annotated[FarmState, Depends(farm_state)]) -> str:
    return client_address(request, state.settings.trusted_proxies)


UserDep = Annotated[Principal, Depends(current_user)]
AdminDep = Annotated[Principal, Depends(current_admin)]
AgentDep = Annotated[Principal, Depends(current_agent)]
StateDep = Annotated[FarmState, Depends(farm_state)]
AddressDep = Annotated[str, Depends(caller_address)]

__all__ = [
    "AddressDep",
    "AdminDep",
    "AgentDep",
    "StateDep",
    "UserDep",
    "client_address",
    "farm_state",
    "forwarded_https",
    "principal_from_token",
]
