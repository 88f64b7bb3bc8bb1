"""Users, roles and bearer tokens of the farm.

Passwords are stored as bcrypt hashes; tokens are random 256-bit strings of which only the
SHA-256 is stored, with an expiry (user tokens) or none (agent tokens, revoked by deleting
them). Nothing here logs or returns a secret except the token handed to its owner once.
The dashboard's login session reuses ``authenticate`` and ``issue_user_token``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

import bcrypt
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

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
    if not token or len(token) > 200:
        return None
    digest = token_digest(token)
    row = s.scalar(select(Token).where(Token.token_hash == digest))
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        return None
    if row.expires_at is not None and row.expires_at < now():
        s.delete(row)
        return None
    if row.agent_name is not None:
        return Principal(user_id=None, name=row.agent_name, role=None, agent=row.agent_name)
    user = s.get(User, row.user_id) if row.user_id is not None else None
    if user is None or user.disabled:
        return None
    return Principal(user_id=user.id, name=user.name, role=Role(user.role))


def revoke_token(s: Session, token: str) -> None:
    s.execute(delete(Token).where(Token.token_hash == token_digest(token)))


__all__ = [
    "DEFAULT_TOKEN_TTL",
    "MAX_TOKEN_TTL",
    "Principal",
    "add_user",
    "authenticate",
    "check_name",
    "has_admin",
    "hash_password",
    "issue_agent_token",
    "issue_user_token",
    "resolve_token",
    "revoke_token",
    "set_password",
]
