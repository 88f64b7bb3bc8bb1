"""The closed vocabularies of the farm: job states, board states, roles, error kinds and
failure classes.

Shared by the service, the agent and the ``api`` client (a leaf module: no heavy imports).
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """``queued → reserved → building → flashing → running → collecting → done | failed |
    cancelled``; each state's time is kept on the job."""

    QUEUED = "queued"
    RESERVED = "reserved"
    BUILDING = "building"
    FLASHING = "flashing"
    RUNNING = "running"
    COLLECTING = "collecting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def on_board(self) -> bool:
        """An agent holds the board for this job."""
        return self in ON_BOARD


TERMINAL = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})
ON_BOARD = frozenset({JobState.BUILDING, JobState.FLASHING, JobState.RUNNING, JobState.COLLECTING})
WAITING = frozenset({JobState.QUEUED, JobState.RESERVED})
ORDER = tuple(JobState)

#: pipeline stage (as the CLI names it) -> the job state it moves the job to
STAGE_STATES: dict[str, JobState] = {
    "Build": JobState.BUILDING,
    "InspectBinary": JobState.BUILDING,
    "Transfer": JobState.FLASHING,
    "Flash": JobState.FLASHING,
    "Execute": JobState.RUNNING,
    "ParseOutput": JobState.COLLECTING,
    "ProfilePasses": JobState.RUNNING,
    "Assemble": JobState.COLLECTING,
    "Report": JobState.COLLECTING,
}


class BoardState(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    OFFLINE = "offline"
    DRAINED = "drained"
    #: its labgrid place is locked by someone outside the farm: no job can use it
    HELD = "held"


class Role(StrEnum):
    ADMIN = "admin"
    USER = "user"


class FailureKind(StrEnum):
    """Why a job failed, so the client raises the matching typed error."""

    DEPLOY = "deploy"  # deploy() raised on the board host (build, flash, run, parse...)
    AGENT_LOST = "agent_lost"
    TIMEOUT = "timeout"
    CONFIG = "config"
    INTERNAL = "internal"


class FailureClass(StrEnum):
    """Whose failure a failed job is (``farm.failures.classify``): the lab's
    (``infrastructure``: board unreachable, flash failed, agent lost, no output before the
    capture timed out, the emulator crashed), which the farm retries on another board, or
    the user's (``user``: build error, model crash, budget, bad config), never retried."""

    INFRASTRUCTURE = "infrastructure"
    USER = "user"


__all__ = [
    "ON_BOARD",
    "ORDER",
    "STAGE_STATES",
    "TERMINAL",
    "WAITING",
    "BoardState",
    "FailureClass",
    "FailureKind",
    "JobState",
    "Role",
]
