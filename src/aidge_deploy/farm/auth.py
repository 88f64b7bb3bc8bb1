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
from aidge_deploy.farm.db import Token, User, now
from aidge_deploy.farm.states import Role

#: default lifetime of a user token (seconds) and the longest a client may ask for
DEFAULT_TOKEN_TTL = 12 * 3600.0
MAX_TOKEN_TTL = 7 * 24 * 3600.0
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


def resolve_token(s: Session, token: str) -> Principal | None:
    """The principal a bearer token stands for, or None (unknown, expired, disabled)."""
    found = _lookup(s, token)
    return found[0] if found else None


def _lookup(s: Session, token: str) -> tuple[Principal, float | None] | None:
    """The token's principal and expiry, in one query (token and user together)."""
    if not token or len(token) > 200:
        return None
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
            if any(isinstance(o, (User, Token)) for o in (*s.dirty, *s.deleted)):
                s.info["auth_changed"] = True

        def executed(state: ORMExecuteState) -> None:
            mapper = state.bind_mapper
            writes = state.is_update or state.is_delete
            if writes and mapper is not None and mapper.class_ in (User, Token):
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
    "DEFAULT_TOKEN_TTL",
    "MAX_TOKEN_TTL",
    "Principal",
    "TokenCache",
    "add_user",
    "authenticate",
    "check_name",
    "has_admin",
    "hash_password",
    "issue_agent_token",
    "issue_user_token",
    "resolve_token",
    "resolve_token_cached",
    "revoke_token",
    "set_password",
]
