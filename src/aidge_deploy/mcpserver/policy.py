"""What one agent session may do: read-only or not, and on which targets and boards.

Why this module exists: a tool's annotation (read-only, destructive) is a hint to the
client; the server is what enforces it. ``SessionPolicy`` is decided when the server starts
(``aidge-deploy mcp --read-only --allow-target ... --allow-board ...``) and checked by every
tool before it does anything: a refusal is a ``PolicyRefusal`` the agent reads, saying
what was refused, why, and what it may do instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from aidge_deploy.errors import ConfigError


class Access(StrEnum):
    """What a tool does to the lab."""

    #: reads only (targets, doctor, compare, history, a farm job's status, the budget)
    READ_ONLY = "read-only"
    #: runs something on a board, queues a farm job or stops one: uses the budget
    DESTRUCTIVE = "destructive"


class PolicyRefusal(ConfigError):
    """The session's policy refuses this call (read-only mode, a target or board outside
    the allowlist); nothing was run."""


def _names(values: Iterable[str] | None) -> frozenset[str] | None:
    if values is None:
        return None
    cleaned = frozenset(v.strip() for v in values if v.strip())
    return cleaned or None


@dataclass(frozen=True)
class SessionPolicy:
    """The rules of a session. ``targets`` / ``boards`` None: any."""

    read_only: bool = False
    targets: frozenset[str] | None = None
    boards: frozenset[str] | None = None

    @classmethod
    def of(
        cls,
        *,
        read_only: bool = False,
        targets: Iterable[str] | None = None,
        boards: Iterable[str] | None = None,
    ) -> SessionPolicy:
        return cls(read_only, _names(targets), _names(boards))

    def check_access(self, tool: str, access: Access) -> None:
        if self.read_only and access is Access.DESTRUCTIVE:
            raise PolicyRefusal(
                f"refused: {tool} is a destructive tool and this session is read-only "
                "(the server was started with --read-only)",
                hint="Use the read-only tools (targets, doctor, compare, history, "
                "farm_status, budget), or ask for a session without --read-only.",
            )

    def target_allowed(self, target: str) -> bool:
        return self.targets is None or target in self.targets

    def board_allowed(self, board: str) -> bool:
        return self.boards is None or board in self.boards

    def check_target(self, target: str) -> None:
        if not self.target_allowed(target):
            raise PolicyRefusal(
                f"refused: target {target!r} is not in this session's allowlist",
                hint=f"Allowed targets: {', '.join(sorted(self.targets or ()))}.",
            )

    def check_board(self, board: str | None, target: str) -> None:
        """A farm job's board: allowed, or — with a board allowlist — named at all (the
        farm could otherwise pick any board of the target)."""
        if self.boards is None:
            return
        allowed = ", ".join(sorted(self.boards))
        if board is None:
            raise PolicyRefusal(
                f"refused: this session may use only the boards {allowed}; name one "
                f"(a job for any board of {target} could land on another)",
                hint="Pass board=NAME, one of the allowed boards.",
            )
        if board not in self.boards:
            raise PolicyRefusal(
                f"refused: board {board!r} is not in this session's allowlist",
                hint=f"Allowed boards: {allowed}.",
            )

    def describe(self) -> dict[str, object]:
        return {
            "read_only": self.read_only,
            "targets": None if self.targets is None else sorted(self.targets),
            "boards": None if self.boards is None else sorted(self.boards),
        }


__all__ = ["Access", "PolicyRefusal", "SessionPolicy"]
