"""Users, roles and bearer tokens of the farm.

Passwords are stored as bcrypt hashes (checked only at login); tokens are random 256-bit
strings of which only the SHA-256 is stored, with an expiry (user tokens) or none (agent
tokens, revoked by deleting them). A request presents a token: ``TokenCache`` answers from
memory what the database said about it a moment ago, so a status request costs no
database round trip for who is calling. Nothing here logs or returns a secret except the
token handed to its owner once. The dashboard's login session reuses ``authenticate`` and
``issue_user_token``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import bcrypt
from sqlalchemy import delete, event, select
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker

from aidge_deploy.errors import ConfigError
from aidge_deploy.farm.db import ApiToken, Token, User, now
from aidge_deploy.farm.states import Role

#: default lifetime of a user token (seconds) and the longest a client may ask for
DEFAULT_TOKEN_TTL = 12 * 3600.0
MAX_TOKEN_TTL = 7 * 24 * 3600.0
#: how an API token begins (``farm token create``): told apart from a login's token, and
#: recognisable by secret scanners
API_TOKEN_PREFIX = "aidgefarm_"
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@")
# a bcrypt hash to compare against when the user does not exist (same time either way)
_DUMMY_HASH = bcrypt.hashpw(b"not-a-password", bcrypt.gensalt(rounds=10))


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user (with a role) or an agent."""

    user_id: int | None
    name: str
    role: Role | None
    agent: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def can_see(self, owner_id: int) -> bool:
        return self.is_admin or (self.user_id is not None and self.user_id == owner_id)


def hash_password(password: str) -> str:
    data = password.encode()
    if len(data) > 72:  # bcrypt reads 72 bytes: pre-hash longer passwords
        data = hashlib.sha256(data).hexdigest().encode()
    return bcrypt.hashpw(data, bcrypt.gensalt(rounds=10)).decode()


def check_password(password: str, hashed: str) -> bool:
    data = password.encode()
    if len(data) > 72:
        data = hashlib.sha256(data).hexdigest().encode()
    try:
        return bcrypt.checkpw(data, hashed.encode())
    except ValueError:
        return False


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name: str, what: str = "user") -> str:
    if not name or len(name) > 64 or not set(name) <= _NAME_OK:
        raise ConfigError(
            f"invalid {what} name {name!r}",
            hint="Use 1-64 letters, digits, '_', '.', '-' or '@'.",
        )
    return name


def add_user(s: Session, name: str, password: str, role: Role = Role.USER) -> User:
    check_name(name)
    if len(password) < 8:
        raise ConfigError(
            "the password is too short", hint="Use at least 8 characters (a passphrase is best)."
        )
    if s.scalar(select(User).where(User.name == name)) is not None:
        raise ConfigError(
            f"user {name!r} already exists",
            hint="Pick another name, or `aidge-deploy farm user passwd NAME` to reset it.",
        )
    user = User(name=name, password_hash=hash_password(password), role=role.value)
    s.add(user)
    s.flush()
    return user


def set_password(s: Session, name: str, password: str) -> None:
    user = s.scalar(select(User).where(User.name == name))
    if user is None:
        raise ConfigError(f"no user {name!r}", hint="`aidge-deploy farm user list` shows them.")
    if len(password) < 8:
        raise ConfigError("the password is too short", hint="Use at least 8 characters.")
    user.password_hash = hash_password(password)
    s.execute(delete(Token).where(Token.user_id == user.id))  # old sessions end


def has_admin(s: Session) -> bool:
    return (
        s.scalar(select(User.id).where(User.role == Role.ADMIN.value, User.disabled.is_(False)))
        is not None
    )


def authenticate(s: Session, name: str, password: str) -> User | None:
    """The enabled user with this name and password, else None (constant-time-ish)."""
    user = s.scalar(select(User).where(User.name == name))
    if user is None:
        bcrypt.checkpw(b"x", _DUMMY_HASH)
        return None
    if not check_password(password, user.password_hash) or user.disabled:
        return None
    return user


def issue_user_token(s: Session, user: User, ttl: float | None = None) -> tuple[str, float]:
    """A new bearer token for ``user`` and its expiry time."""
    lifetime = DEFAULT_TOKEN_TTL if ttl is None else max(1.0, min(float(ttl), MAX_TOKEN_TTL))
    token = secrets.token_urlsafe(32)
    expires = now() + lifetime
    s.add(Token(token_hash=token_digest(token), user_id=user.id, expires_at=expires))
    return token, expires


def issue_agent_token(s: Session, agent: str) -> str:
    """A new token for agent ``agent`` (no expiry; replaces its previous ones)."""
    check_name(agent, "agent")
    s.execute(delete(Token).where(Token.agent_name == agent))
    token = secrets.token_urlsafe(32)
    s.add(Token(token_hash=token_digest(token), agent_name=agent, expires_at=None))
    return token


@dataclass(frozen=True)
class ApiTokenInfo:
    """An API token as an admin sees it (never the token itself)."""

    id: int
    user: str
    name: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    last_used_at: float | None


def create_api_token(
    s: Session, user_name: str, name: str = "", expires_at: float | None = None
) -> tuple[str, ApiTokenInfo]:
    """A new API token acting for ``user_name``; the token is shown once, here."""
    user = s.scalar(select(User).where(User.name == user_name))
    if user is None:
        raise ConfigError(
            f"no user {user_name!r}", hint="`aidge-deploy farm user list` shows them."
        )
    if expires_at is not None and expires_at <= now():
        raise ConfigError("the token would expire before it is used", hint="e.g. --expires 90d")
    token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        token_hash=token_digest(token), user_id=user.id, name=name[:64], expires_at=expires_at
    )
    s.add(row)
    s.flush()
    return token, _token_info(row, user.name)


def _token_info(row: ApiToken, user: str) -> ApiTokenInfo:
    return ApiTokenInfo(
        row.id, user, row.name, row.created_at, row.expires_at, row.revoked_at, row.last_used_at
    )


def list_api_tokens(s: Session, user_name: str | None = None) -> list[ApiTokenInfo]:
    q = select(ApiToken, User.name).join(User, User.id == ApiToken.user_id).order_by(ApiToken.id)
    if user_name is not None:
        q = q.where(User.name == user_name)
    return [_token_info(row, name) for row, name in s.execute(q)]


def revoke_api_token(s: Session, token_id: int) -> ApiTokenInfo:
    """Revoke an API token for good (it stays listed, as revoked)."""
    row = s.get(ApiToken, token_id)
    if row is None:
        raise ConfigError(
            f"no API token {token_id}", hint="`aidge-deploy farm token list` shows them."
        )
    if row.revoked_at is None:
        row.revoked_at = now()
    user = s.get(User, row.user_id)
    return _token_info(row, user.name if user else "?")


#: an API token's last use is written at most this often (a write per request would
#: cost more than the request)
LAST_USED_STEP_S = 60.0


def _lookup_api_token(s: Session, token: str) -> tuple[Principal, float | None] | None:
    digest = token_digest(token)
    row = s.execute(
        select(ApiToken, User)
        .join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_hash == digest)
    ).first()
    if row is None:
        return None
    tok, user = row
    t = now()
    if not hmac.compare_digest(tok.token_hash, digest) or tok.revoked_at is not None:
        return None
    if (tok.expires_at is not None and tok.expires_at < t) or user.disabled:
        return None
    if tok.last_used_at is None or t - tok.last_used_at > LAST_USED_STEP_S:
        tok.last_used_at = t
    return Principal(user_id=user.id, name=user.name, role=Role(user.role)), tok.expires_at


def resolve_token(s: Session, token: str) -> Principal | None:
    """The principal a bearer token stands for, or None (unknown, expired, disabled)."""
    found = _lookup(s, token)
    return found[0] if found else None


def _lookup(s: Session, token: str) -> tuple[Principal, float | None] | None:
    """The token's principal and expiry, in one query (token and user together)."""
    if not token or len(token) > 200:
        return None
    if token.startswith(API_TOKEN_PREFIX):
        return _lookup_api_token(s, token)
    digest = token_digest(token)
    row = s.execute(
        select(Token, User)
        .outerjoin(User, User.id == Token.user_id)
        .where(Token.token_hash == digest)
    ).first()
    if row is None:
        return None
    tok, user = row
    if not hmac.compare_digest(tok.token_hash, digest):
        return None
    if tok.expires_at is not None and tok.expires_at < now():
        s.delete(tok)
        return None
    if tok.agent_name is not None:
        agent = tok.agent_name
        return Principal(user_id=None, name=agent, role=None, agent=agent), tok.expires_at
    if user is None or user.disabled:
        return None
    return Principal(user_id=user.id, name=user.name, role=Role(user.role)), tok.expires_at


def revoke_token(s: Session, token: str) -> None:
    s.execute(delete(Token).where(Token.token_hash == token_digest(token)))


class TokenCache:
    """Bearer token digest -> principal, as the database said at most ``ttl`` seconds ago.

    Any change to the users or tokens tables committed by this process (logout, password
    reset, user disabled, agent token re-issued) clears it at once, through the session
    events that ``watch`` installs; a change committed by another process (``aidge-deploy
    farm user ...`` on the same database) is seen within ``ttl``. Expiry is checked on every
    hit. Unknown tokens are not cached, so random tokens cannot fill it.
    """

    def __init__(self, ttl: float = 5.0, max_entries: int = 10_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: dict[str, tuple[Principal, float | None, float]] = {}
        self._lock = threading.Lock()
        #: bumped by every clear: a lookup that raced with a change does not store its answer
        self._generation = 0

    def get(self, token: str) -> Principal | None:
        """The cached principal of a valid, unexpired token, else None (ask the database)."""
        entry = self._entries.get(token_digest(token))
        if entry is None:
            return None
        principal, expires_at, cached_at = entry
        t = time.monotonic()
        if t - cached_at > self.ttl or (expires_at is not None and expires_at < now()):
            return None
        return principal

    @property
    def generation(self) -> int:
        return self._generation

    def put(
        self, token: str, principal: Principal, expires_at: float | None, generation: int
    ) -> None:
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[token_digest(token)] = (principal, expires_at, time.monotonic())

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def watch(self, factory: sessionmaker[Session]) -> None:
        """Clear the cache after each commit that changed a user or a token."""

        def flushed(s: Session, _ctx: Any) -> None:
            if any(isinstance(o, (User, Token, ApiToken)) for o in (*s.dirty, *s.deleted)):
                s.info["auth_changed"] = True

        def executed(state: ORMExecuteState) -> None:
            mapper = state.bind_mapper
            writes = state.is_update or state.is_delete
            if writes and mapper is not None and mapper.class_ in (User, Token, ApiToken):
                state.session.info["auth_changed"] = True

        def committed(s: Session) -> None:
            if s.info.pop("auth_changed", False):
                self.clear()

        event.listen(factory, "after_flush", flushed)
        event.listen(factory, "do_orm_execute", executed)
        event.listen(factory, "after_commit", committed)


def resolve_token_cached(s: Session, token: str, cache: TokenCache) -> Principal | None:
    """``resolve_token`` through ``cache`` (the database is asked on a miss only)."""
    hit = cache.get(token)
    if hit is not None:
        return hit
    generation = cache.generation
    found = _lookup(s, token)
    if found is None:
        return None
    cache.put(token, found[0], found[1], generation)
    return found[0]


__all__ = [
    "API_TOKEN_PREFIX",
    "DEFAULT_TOKEN_TTL",
    "MAX_TOKEN_TTL",
    "ApiTokenInfo",
    "Principal",
    "TokenCache",
    "add_user",
    "authenticate",
    "check_name",
    "create_api_token",
    "has_admin",
    "hash_password",
    "issue_agent_token",
    "issue_user_token",
    "list_api_tokens",
    "resolve_token",
    "resolve_token_cached",
    "revoke_api_token",
    "revoke_token",
    "set_password",
]
