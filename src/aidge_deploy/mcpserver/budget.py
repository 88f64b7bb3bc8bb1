"""A session's budget: how many runs, how many board-minutes; enforced while runs go on.

Why this module exists: an agent left alone can spend a lab. Each run (a ``profile``, each
target of a ``validate``, a farm job) takes one run from the budget before it starts, and
is refused once none is left; its board time is charged from the moment a board is held
(the deploy's start, after the export; a farm job's first on-board state) to its end, live:
a watchdog stops a run (every process with it: ``RunControl.cancel``) or cancels a farm
job the moment the session's board-minutes are spent, and the tool then says so. Concurrent
runs share one account under a lock, so two at once cannot overspend it.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aidge_deploy.errors import ConfigError
from aidge_deploy.runcontrol import RunControl

#: how often a watchdog charges the board time of a run in progress (s)
WATCH_INTERVAL_S = 0.2


class BudgetExhausted(ConfigError):
    """The session's budget has no run, or no board time, left for this call."""


@dataclass(frozen=True)
class Limits:
    """The session's allowance; None: unlimited."""

    max_runs: int | None = None
    max_board_minutes: float | None = None


@dataclass(frozen=True)
class BudgetState:
    """The budget as a tool reports it."""

    limits: Limits
    runs_used: int
    board_minutes_used: float
    runs_in_progress: int

    @property
    def runs_left(self) -> int | None:
        if self.limits.max_runs is None:
            return None
        return max(0, self.limits.max_runs - self.runs_used)

    @property
    def board_minutes_left(self) -> float | None:
        if self.limits.max_board_minutes is None:
            return None
        return max(0.0, self.limits.max_board_minutes - self.board_minutes_used)

    def describe(self) -> str:
        runs = f"{self.runs_used} of {_limit(self.limits.max_runs)} runs"
        minutes = (
            f"{self.board_minutes_used:.3g} of {_limit(self.limits.max_board_minutes)} "
            "board-minutes"
        )
        return f"{runs}, {minutes} used"


def _limit(value: float | None) -> str:
    return "unlimited" if value is None else f"{value:g}"


class Ticket:
    """One run's claim on the budget: its run is taken; its board time is charged from
    ``hold_board`` (or a farm job's own record, ``charge_with``) until ``release``."""

    def __init__(self, budget: Budget, key: int, what: str) -> None:
        self.budget = budget
        self.key = key
        self.what = what
        self._board_s: Callable[[], float] = lambda: 0.0
        #: why the budget stopped this run (None: it did not)
        self.stopped: str | None = None
        #: the run goes on after the call that started it (a farm job): whoever took it
        #: over releases it
        self.handed_over = False

    def hold_board(self) -> None:
        """The run holds its board from now (the deploy starts)."""
        started = self.budget.clock()
        self._board_s = lambda: self.budget.clock() - started

    def charge_with(self, board_seconds: Callable[[], float]) -> None:
        """Charge what ``board_seconds`` says (a farm job's time on its board)."""
        self._board_s = board_seconds

    def board_seconds(self) -> float:
        return max(0.0, self._board_s())

    def release(self) -> None:
        """The run ended: its board time is charged for good."""
        self.budget._release(self)

    def exhausted(self) -> bool:
        return self.budget.board_exhausted()


class Budget:
    """The runs and board-minutes of one session (thread-safe)."""

    def __init__(self, limits: Limits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._lock = threading.Lock()
        self._keys = itertools.count(1)
        self._runs_used = 0
        self._charged_s = 0.0
        self._active: dict[int, Ticket] = {}

    def _used_s(self) -> float:
        return self._charged_s + sum(t.board_seconds() for t in self._active.values())

    def state(self) -> BudgetState:
        with self._lock:
            return BudgetState(
                self.limits, self._runs_used, self._used_s() / 60.0, len(self._active)
            )

    def board_exhausted(self) -> bool:
        limit = self.limits.max_board_minutes
        if limit is None:
            return False
        with self._lock:
            return self._used_s() >= limit * 60.0

    def reserve(self, what: str) -> Ticket:
        """Take one run for ``what``; ``BudgetExhausted`` when no run or board time is left."""
        with self._lock:
            limits = self.limits
            if limits.max_runs is not None and self._runs_used >= limits.max_runs:
                raise BudgetExhausted(
                    f"session budget exhausted: {limits.max_runs} of {limits.max_runs} runs "
                    f"used; {what} was not run",
                    hint="The budget is per session: start a new session (or the server with "
                    "a larger --max-runs) to run more.",
                )
            if limits.max_board_minutes is not None:
                used = self._used_s() / 60.0
                if used >= limits.max_board_minutes:
                    raise BudgetExhausted(
                        f"session budget exhausted: {used:.3g} of "
                        f"{limits.max_board_minutes:g} board-minutes used; {what} was not run",
                        hint="The budget is per session: start a new session (or the server "
                        "with a larger --max-board-minutes) to run more.",
                    )
            self._runs_used += 1
            ticket = Ticket(self, next(self._keys), what)
            self._active[ticket.key] = ticket
            return ticket

    def give_back(self, ticket: Ticket) -> None:
        """Return a run that never started (its board was never held)."""
        with self._lock:
            if self._active.pop(ticket.key, None) is not None:
                self._runs_used -= 1

    def _release(self, ticket: Ticket) -> None:
        with self._lock:
            if self._active.pop(ticket.key, None) is not None:
                self._charged_s += ticket.board_seconds()

    def exhausted_message(self, what: str) -> str:
        limit = self.limits.max_board_minutes
        return (
            f"stopped by the session budget: its {limit:g} board-minutes are spent "
            f"({self.state().describe()}); {what} was stopped"
        )

    @contextlib.contextmanager
    def watch(self, tickets: list[Ticket], control: RunControl) -> Iterator[None]:
        """While the block runs: stop ``control``'s run (every process of it) once the
        session's board-minutes are spent; the tickets are released at the end (but those
        ``handed_over`` to what goes on after it)."""
        done = threading.Event()
        what = tickets[0].what if tickets else "the run"

        def watchdog() -> None:
            while not done.wait(WATCH_INTERVAL_S):
                if self.board_exhausted():
                    reason = self.exhausted_message(what)
                    for ticket in tickets:
                        ticket.stopped = reason
                    control.cancel(reason)
                    return

        thread = None
        if self.limits.max_board_minutes is not None:
            thread = threading.Thread(target=watchdog, name="budget-watchdog", daemon=True)
            thread.start()
        try:
            yield
        finally:
            done.set()
            if thread is not None:
                thread.join()
            for ticket in tickets:
                if not ticket.handed_over:
                    ticket.release()


__all__ = ["WATCH_INTERVAL_S", "Budget", "BudgetExhausted", "BudgetState", "Limits", "Ticket"]
