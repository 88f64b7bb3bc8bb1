"""The service's loop between its database and the labgrid coordinator.

labgrid does the scheduling: each queued job is one tag reservation (``name=<board>`` or
``target=<target>``, plus ``avail=yes`` so offline and drained boards take nothing), and
the coordinator allocates places to reservations by priority, then age. This loop only
follows what labgrid decided and keeps labgrid's contract:

* a reservation allocated to a place hands the job to the agent serving that place: the
  coordinator pushes each place change to the service's labgrid session, which wakes this
  loop at once (``CoordinatorLink.on_change``), as do a submitted, finished or cancelled
  job; otherwise it looks every ``dispatch_interval``;
* waiting reservations are polled well inside labgrid's 60 s expiry; a lost one (expired,
  or gone with a coordinator restart) is re-created for its job (checked every
  ``FULL_CHECK_S``, with the list of all reservations);
* locks never expire in labgrid 26: a finished, cancelled or orphaned job's place is
  released and its reservation cancelled here, whoever else should have done it;
* an agent silent for ``agent_timeout`` is lost: its running jobs fail ("agent lost"), its
  reserved ones go back to the queue, its boards go offline (``avail=no``);
* after a coordinator restart (all locks and reservations gone) the places are re-applied,
  queued jobs get new reservations and the boards of running jobs are locked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from sqlalchemy import select

from aidge_deploy.farm.coordinator import (
    CoordinatorLink,
    CoordinatorLost,
    ReservationInfo,
    ReservationState,
    tag_value,
)
from aidge_deploy.farm.db import Agent, Board, Job, now
from aidge_deploy.farm.jobs import fail, set_state
from aidge_deploy.farm.states import ON_BOARD, FailureKind, JobState

if TYPE_CHECKING:
    from aidge_deploy.farm.service import FarmState

log = logging.getLogger("aidge_deploy.farm")

#: priority of the reservation that re-locks a running job's board after a coordinator restart
RELOCK_PRIO = 1000.0
#: how often the whole list of reservations is read (lost ones re-created, waiting ones
#: refreshed); in between, allocations come from the places the coordinator pushes
FULL_CHECK_S = 2.0
#: how often agents' heartbeats are checked
AGENT_CHECK_S = 1.0


class Dispatcher:
    def __init__(self, state: FarmState) -> None:
        self.state = state
        self.settings = state.settings
        self.link = CoordinatorLink(
            self.settings.coordinator, self.settings.farm_name, on_change=self.wake
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._releases: list[tuple[str | None, str | None]] = []
        self._boards_dirty = True
        self._refreshed: dict[str, float] = {}
        self._relock: dict[str, int] = {}  # token -> job id
        self._started = time.time()
        self._last_full = 0.0
        self._last_agent_check = 0.0
        self.ticks = 0

    # --- called from request handlers (any thread) -----------------------------------

    @property
    def coordinator_connected(self) -> bool:
        return self.link.connected

    def wake(self) -> None:
        loop, event = self._loop, self._wake
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    def release_later(self, token: str | None, place: str | None) -> None:
        """Unlock ``place`` and cancel ``token`` from the loop (both may be None)."""
        if token is None and place is None:
            return
        with self._lock:
            self._releases.append((token, place))
        self.wake()

    def boards_changed(self) -> None:
        self._boards_dirty = True
        self.wake()

    def stop(self) -> None:
        self._stopping = True
        self.wake()

    # --- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._started = time.time()
        backoff = 0.5
        while not self._stopping:
            try:
                if not self.link.connected:
                    await self.link.connect()
                    log.info("connected to the labgrid coordinator at %s", self.link.address)
                    self._boards_dirty = True
                    self._last_full = 0.0
                    await self._resync()
                    backoff = 0.5
                await self._tick()
            except CoordinatorLost as exc:
                log.warning("%s; retrying in %.1f s", exc.message, backoff)
                await self.link.close()
                await self._sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except Exception:
                log.exception("farm dispatcher")
                await self._sleep(1.0)
                continue
            await self._sleep(self.settings.dispatch_interval)
        await self.link.close()

    async def _sleep(self, seconds: float) -> None:
        if self._wake is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def _tick(self) -> None:
        self.ticks += 1
        await self._do_releases()
        if self._boards_dirty:
            self._boards_dirty = False
            await self._sync_places()
        t = time.monotonic()
        if t - self._last_agent_check >= AGENT_CHECK_S:
            self._last_agent_check = t
            if await asyncio.to_thread(self._check_agents):
                self._boards_dirty = True
                await self._do_releases()
                await self._sync_places()
        full = t - self._last_full >= FULL_CHECK_S or bool(self._relock)
        reservations = await self.link.reservations() if full else None
        if full:
            self._last_full = t
        wanted, waiting = await asyncio.to_thread(
            self._follow, self.link.allocations(), reservations
        )
        for job_id, filters, prio in wanted:
            token = await self.link.reserve(filters, prio)
            if not await asyncio.to_thread(self._set_token, job_id, token):
                await self.link.cancel(token)
        if reservations is not None:
            await self._refresh(reservations, waiting)
            await self._do_relocks(reservations)

    async def _do_releases(self) -> None:
        with self._lock:
            todo, self._releases = self._releases, []
        for token, place in todo:
            # the reservation first, then the lock: labgrid offers a place only when it
            # has neither, so the unlock's scheduling pass gives it to the next job at
            # once (unlocked first, it would wait for some later pass)
            unlock = bool(place) and self.link.may_release(str(place), token)
            if token:
                await self.link.cancel(token)
                self._refreshed.pop(token, None)
                self._relock.pop(token, None)
            if unlock:
                await self.link.release(str(place))

    # --- places ----------------------------------------------------------------------

    def _place_specs(self) -> list[tuple[str, dict[str, str], tuple[str, ...]]]:
        """Each board's place: its tags and, for a physical board, the resources the
        exporter of its host publishes under a group named like the board."""
        with self.state.db.session() as s:
            agents = {a.name: a for a in s.scalars(select(Agent))}
            return [
                (
                    b.name,
                    {
                        "farm": tag_value(self.settings.farm_name),
                        "board": tag_value(b.name),
                        "target": tag_value(b.target),
                        "host": tag_value(b.agent_name),
                        "kind": b.kind,
                        "avail": "yes"
                        if b.online and not b.drained and _online(agents.get(b.agent_name))
                        else "no",
                    },
                    (f"{_host(agents.get(b.agent_name), b.agent_name)}/{b.name}/*",)
                    if b.kind == "hw"
                    else (),
                )
                for b in s.scalars(select(Board))
            ]

    async def _sync_places(self) -> None:
        for name, tags, matches in await asyncio.to_thread(self._place_specs):
            await self.link.ensure_place(name, tags, matches)

    # --- agents ----------------------------------------------------------------------

    def _check_agents(self) -> bool:
        limit = self.settings.agent_timeout
        t = now()
        lost_any = False
        with self.state.db.session() as s:
            for agent in s.scalars(select(Agent).where(Agent.online.is_(True))):
                seen = max(agent.last_seen or 0.0, self._started)
                if t - seen <= limit:
                    continue
                lost_any = True
                agent.online = False
                log.warning("agent %s lost (silent for %.0f s)", agent.name, t - seen)
                for board in s.scalars(select(Board).where(Board.agent_name == agent.name)):
                    board.online = False
                    board.offline_since = t
                for job in s.scalars(select(Job).where(Job.agent_name == agent.name)):
                    st = job.job_state
                    if st in ON_BOARD:
                        fail(
                            s,
                            job,
                            f"agent lost: agent {agent.name} stopped answering during the job "
                            f"(no heartbeat for {limit:.0f} s)",
                            FailureKind.AGENT_LOST,
                            hint="Resubmit the job; the farm runs it on another board.",
                        )
                        self.release_later(job.token, job.board)
                        self.state.notifier.notify(f"job:{job.id}")
                    elif st == JobState.RESERVED:
                        self._requeue(job)
        return lost_any

    def _requeue(self, job: Job) -> None:
        """A reserved job whose board went away waits again (a new reservation)."""
        self.release_later(job.token, None)
        job.token = None
        job.state = JobState.QUEUED.value
        job.board = None
        job.agent_name = None
        job.reserved_at = None

    # --- reservations ----------------------------------------------------------------

    def _follow(
        self, allocated: dict[str, str], reservations: dict[str, ReservationInfo] | None
    ) -> tuple[list[tuple[int, dict[str, str], float]], list[str]]:
        """Hand allocated jobs to their agents; the jobs that need a reservation, and (on a
        full check, with ``reservations``) the tokens of the waiting ones.

        ``allocated`` (token -> place) comes from the places the coordinator pushed. Only a
        full check looks at every waiting job: then a reservation missing from the
        coordinator's list (expired, or lost with a restart) is re-created."""
        wanted: list[tuple[int, dict[str, str], float]] = []
        waiting: list[str] = []
        notify: list[str] = []
        with self.state.db.session() as s:
            boards = {b.name: b for b in s.scalars(select(Board))}
            online = {a.name for a in s.scalars(select(Agent).where(Agent.online.is_(True)))}
            q = select(Job).order_by(Job.id)
            if reservations is None:
                q = q.where(
                    Job.state == JobState.QUEUED.value,
                    Job.token.is_(None) | Job.token.in_(list(allocated)),
                )
            else:
                q = q.where(Job.state.in_([JobState.QUEUED.value, JobState.RESERVED.value]))
            for job in s.scalars(q):
                if reservations is not None:
                    info = reservations.get(job.token) if job.token else None
                    alive = info is not None and info.state in (
                        ReservationState.WAITING,
                        ReservationState.ALLOCATED,
                        ReservationState.ACQUIRED,
                    )
                    if job.job_state == JobState.RESERVED:
                        if not alive:
                            self._requeue(job)
                        else:
                            waiting.append(str(job.token))
                            continue
                    if job.token and not alive:
                        job.token = None
                if job.token is None:
                    wanted.append((job.id, self._filters(job), job.priority))
                    continue
                place = allocated.get(job.token)
                if reservations is not None:
                    waiting.append(job.token)
                    info = reservations[job.token]
                    if info.state == ReservationState.ALLOCATED and info.place:
                        place = info.place
                if place is None:
                    continue
                board = boards.get(place)
                if board is None or not board.online or board.agent_name not in online:
                    # allocated to a board that just went away: wait for another one
                    self.release_later(job.token, None)
                    job.token = None
                    continue
                job.board = board.name
                job.agent_name = board.agent_name
                set_state(s, job, JobState.RESERVED, f"board {board.name}")
                notify += [f"agent:{board.agent_name}", f"job:{job.id}"]
        if notify:
            self.state.notifier.notify(*notify)
        return wanted, waiting

    def _filters(self, job: Job) -> dict[str, str]:
        tags = {"farm": tag_value(self.settings.farm_name), "avail": "yes"}
        if job.requested_board:
            tags["name"] = job.requested_board
        else:
            tags["target"] = tag_value(job.target)
        return tags

    def _set_token(self, job_id: int, token: str) -> bool:
        with self.state.db.session() as s:
            job = s.get(Job, job_id)
            if job is None or job.job_state != JobState.QUEUED or job.token is not None:
                return False
            job.token = token
            self._refreshed[token] = time.monotonic()
            return True

    async def _refresh(self, reservations: dict[str, ReservationInfo], waiting: list[str]) -> None:
        """Poll waiting/allocated reservations so labgrid does not expire them (60 s)."""
        t = time.monotonic()
        interval = self.settings.refresh_interval
        for token in waiting:
            last = self._refreshed.get(token)
            if last is None:
                self._refreshed[token] = t  # just seen: labgrid's clock started at creation
                continue
            if t - last >= interval:
                await self.link.poll(token)
                self._refreshed[token] = t
        for token in list(self._refreshed):
            if token not in reservations:
                self._refreshed.pop(token, None)

    # --- coordinator restart ---------------------------------------------------------

    async def _resync(self) -> None:
        """After (re)connecting: lock again the boards of jobs still running."""
        reservations = await self.link.reservations()
        running = await asyncio.to_thread(self._running_without_reservation, reservations)
        for job_id, board in running:
            token = await self.link.reserve(
                {"farm": tag_value(self.settings.farm_name), "name": board}, RELOCK_PRIO
            )
            self._relock[token] = job_id
            await asyncio.to_thread(self._store_relock_token, job_id, token)

    def _running_without_reservation(
        self, reservations: dict[str, ReservationInfo]
    ) -> list[tuple[int, str]]:
        with self.state.db.session() as s:
            return [
                (j.id, j.board)
                for j in s.scalars(select(Job).where(Job.state.in_([st.value for st in ON_BOARD])))
                if j.board and (j.token is None or j.token not in reservations)
            ]

    def _store_relock_token(self, job_id: int, token: str) -> None:
        with self.state.db.session() as s:
            job = s.get(Job, job_id)
            if job is not None and not job.job_state.terminal:
                job.token = token
            else:
                self.release_later(token, None)

    async def _do_relocks(self, reservations: dict[str, ReservationInfo]) -> None:
        for token, _job_id in list(self._relock.items()):
            info = reservations.get(token)
            if info is None:
                self._relock.pop(token, None)
                continue
            if info.state == ReservationState.ALLOCATED and info.place:
                try:
                    await self.link.acquire(info.place, token)
                except CoordinatorLost:
                    raise
                except Exception as exc:
                    log.warning("re-locking %s: %s", info.place, exc)
                    continue
                self._relock.pop(token, None)
            elif info.state == ReservationState.ACQUIRED:
                self._relock.pop(token, None)


def _online(agent: Agent | None) -> bool:
    return agent is not None and agent.online


def _host(agent: Agent | None, default: str) -> str:
    return (agent.hostname if agent is not None and agent.hostname else default).split(".")[0]


__all__ = ["RELOCK_PRIO", "Dispatcher"]
