"""Runs on independent targets at the same time, each stoppable, all stopped together.

Why this module exists: ``validate`` over four targets, ``profile --targets`` and a
campaign's cells are independent runs. Run one after the other, four emulated boards take
four times as long as one on a machine with cores to spare. Run naively in parallel, a
physical board would be flashed by two runs at once, a measured host latency would include
the other runs' load, and Ctrl-C would stop one run and leave the others' compilers and
QEMUs behind. This is the one place that runs such jobs; every caller declares each job's
``Lane``:

* ``PARALLEL`` — emulated boards (their counts are exact whatever the load), farm jobs
  (the farm schedules its boards), runs that only check outputs: up to ``workers`` at once
  (the machine's cores by default).
* ``PER_BOARD`` — a physical board reached through a probe or SSH: its jobs run one at a
  time, in order (``resource`` names the board), beside other boards' jobs.
* ``ALONE`` — a run whose times are measured on this machine (a host benchmark): it runs
  while nothing else does, so the others' load is not in its latency.
* ``REMOTE`` — a farm job: the farm runs it on a board of its own and schedules its boards
  itself, so this machine only waits for it; up to ``remote_workers`` at once, beside the
  ``PARALLEL`` ones (a two-core laptop still keeps a farm of twenty boards busy).

Each job runs in a thread of its own under a ``RunControl`` of its own (``runcontrol``):
the processes a job starts are its own, and cancelling the caller's control — Ctrl-C,
SIGTERM or SIGHUP through ``runcontrol.interruptible``, or ``cancel()`` from another thread
— cancels every running job, starts no new one, waits until every job has stopped its
processes, then raises ``RunInterrupted``. A job that fails does not stop the others: its
exception is in its ``JobOutcome``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from aidge_deploy import runcontrol
from aidge_deploy.runcontrol import RunControl, RunInterrupted
from aidge_deploy.targetcaps import pair_caps
from aidge_deploy.targetspec import Lane

#: how often the calling thread wakes while jobs run (signals are handled between waits)
_WAIT_S = 0.2
#: farm jobs waited for at once by default (each is a thread polling the farm)
DEFAULT_REMOTE_WORKERS = 16


@dataclass(frozen=True)
class TargetJob[T]:
    """One independent run: ``run(control)`` is called in a thread of its own."""

    name: str
    run: Callable[[RunControl], T]
    lane: Lane = Lane.PARALLEL
    #: the physical board a ``PER_BOARD`` job needs (jobs naming one board never overlap)
    resource: str | None = None

    def __post_init__(self) -> None:
        if self.lane is Lane.PER_BOARD and not self.resource:
            raise ValueError(f"job {self.name}: a per-board job names its board (resource)")


@dataclass(frozen=True)
class JobOutcome[T]:
    job: TargetJob[T]
    value: T | None
    #: what the job raised (None: it returned ``value``)
    error: BaseException | None
    duration_s: float
    #: the job never started (the run was cancelled first)
    skipped: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.skipped


class JobEventKind(StrEnum):
    START = "start"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class JobEvent:
    job: str
    kind: JobEventKind
    duration_s: float = 0.0
    error: BaseException | None = None


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def lane_for(target: str, *, backend: str = "local", measured_on_host: bool = False) -> Lane:
    """The lane of a run on ``target`` through ``backend``: the lane its capabilities
    declare (``aidge_deploy.targetcaps``: a board of its own one run at a time, emulated
    boards in parallel, farm jobs remote), a run that would be alone only when its figures
    are times measured on this machine (``measured_on_host``: a host benchmark, not an
    output check). ``ConfigError`` for an unknown pair."""
    lane = pair_caps(target, backend).lane
    if lane is Lane.ALONE and not measured_on_host:
        return Lane.PARALLEL
    return lane


class _Runner[T]:
    def __init__(self, parent: RunControl, on_event: Callable[[JobEvent], None] | None) -> None:
        self.parent = parent
        self.on_event = on_event
        self.lock = threading.Lock()
        self.running: dict[int, RunControl] = {}
        self.outcomes: dict[int, JobOutcome[T]] = {}

    def _event(self, event: JobEvent) -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a progress display must not fail a run
                self.on_event(event)

    def run_one(self, index: int, job: TargetJob[T]) -> None:
        if self.parent.cancelled:
            self.outcomes[index] = JobOutcome(job, None, None, 0.0, skipped=True)
            return
        control = RunControl()
        with self.lock:
            self.running[index] = control
        started = time.monotonic()
        self._event(JobEvent(job.name, JobEventKind.START))
        value: T | None = None
        error: BaseException | None = None
        try:
            with control.activate():
                value = job.run(control)
        except BaseException as exc:  # kept in the outcome; an interruption is re-raised
            error = exc
        finally:
            with self.lock:
                self.running.pop(index, None)
        elapsed = time.monotonic() - started
        self.outcomes[index] = JobOutcome(job, value, error, elapsed)
        kind = JobEventKind.DONE if error is None else JobEventKind.FAILED
        self._event(JobEvent(job.name, kind, elapsed, error))

    def run_chain(self, chain: Sequence[tuple[int, TargetJob[T]]]) -> None:
        for index, job in chain:
            self.run_one(index, job)

    def cancel_running(self) -> None:
        with self.lock:
            controls = list(self.running.values())
        reason = self.parent.reason or "cancelled"
        for control in controls:
            control.cancel(reason, signal_number=self.parent.signal_number)


def _chains[T](jobs: Sequence[TargetJob[T]]) -> list[list[tuple[int, TargetJob[T]]]]:
    """Jobs that may overlap in chains of their own; a board's jobs in one chain, in order."""
    chains: list[list[tuple[int, TargetJob[T]]]] = []
    by_board: dict[str, list[tuple[int, TargetJob[T]]]] = {}
    for index, job in enumerate(jobs):
        if job.lane is Lane.PER_BOARD:
            board = job.resource or ""  # set: checked by TargetJob
            if board not in by_board:
                by_board[board] = []
                chains.append(by_board[board])
            by_board[board].append((index, job))
        elif job.lane is Lane.PARALLEL:
            chains.append([(index, job)])
    return chains


def run_targets[T](
    jobs: Sequence[TargetJob[T]],
    *,
    workers: int | None = None,
    remote_workers: int | None = None,
    control: RunControl | None = None,
    on_event: Callable[[JobEvent], None] | None = None,
) -> list[JobOutcome[T]]:
    """Run ``jobs`` by their lanes; their outcomes in the order of ``jobs``.

    ``control`` (default: the caller's current one, else a new one) stops every job when it
    is cancelled; a signal raised in the calling thread (``runcontrol.interruptible``) does
    the same. Either way ``RunInterrupted`` is raised once every started job has stopped.
    ``ALONE`` jobs run first, one by one; then the others, up to ``workers`` at once, and
    the ``REMOTE`` ones up to ``remote_workers`` at once beside them.
    """
    parent = control or runcontrol.current() or RunControl()
    runner: _Runner[T] = _Runner(parent, on_event)
    alone = [(i, job) for i, job in enumerate(jobs) if job.lane is Lane.ALONE]
    remote = [(i, job) for i, job in enumerate(jobs) if job.lane is Lane.REMOTE]
    chains = _chains(jobs)
    size = max(1, workers if workers is not None else default_workers())
    executor = concurrent.futures.ThreadPoolExecutor(
        max_workers=size, thread_name_prefix="aidge-target"
    )
    remote_executor = concurrent.futures.ThreadPoolExecutor(
        max_workers=max(1, remote_workers or DEFAULT_REMOTE_WORKERS),
        thread_name_prefix="aidge-remote",
    )
    executors = (executor, remote_executor)
    try:
        pending = [executor.submit(runner.run_one, i, job) for i, job in alone[:1]]
        queue = alone[1:]
        while pending or queue:
            done, _ = concurrent.futures.wait(pending, timeout=_WAIT_S)
            pending = [f for f in pending if f not in done]
            parent.checkpoint()
            if not pending and queue:
                index, job = queue.pop(0)
                pending.append(executor.submit(runner.run_one, index, job))
        futures = [executor.submit(runner.run_chain, chain) for chain in chains]
        futures += [remote_executor.submit(runner.run_one, i, job) for i, job in remote]
        while futures:
            done, _ = concurrent.futures.wait(futures, timeout=_WAIT_S)
            futures = [f for f in futures if f not in done]
            parent.checkpoint()
    except BaseException:
        # a signal in this thread, or the parent cancelled: stop every job, then wait for
        # them (their clean-up is what leaves nothing behind)
        parent.mark_cancelled("interrupted")
        with runcontrol.shielded():
            runner.cancel_running()
            for pool in executors:
                pool.shutdown(wait=True, cancel_futures=True)
            runner.cancel_running()  # a job that started while the first cancel ran
        raise
    finally:
        for pool in executors:
            pool.shutdown(wait=True)
    if parent.cancelled:
        raise parent.interruption()
    outcomes = []
    for index, job in enumerate(jobs):
        outcomes.append(runner.outcomes.get(index) or JobOutcome(job, None, None, 0.0, True))
    return outcomes


def raise_first_interruption[T](outcomes: Sequence[JobOutcome[T]]) -> None:
    """Re-raise a job's ``RunInterrupted`` (a job cancelled on its own, from its thread)."""
    for outcome in outcomes:
        if isinstance(outcome.error, RunInterrupted):
            raise outcome.error


__all__ = [
    "DEFAULT_REMOTE_WORKERS",
    "JobEvent",
    "JobEventKind",
    "JobOutcome",
    "Lane",
    "TargetJob",
    "default_workers",
    "lane_for",
    "raise_first_interruption",
    "run_targets",
]
