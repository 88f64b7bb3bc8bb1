"""The service's loop between its database and the labgrid coordinator.

labgrid does the scheduling: each queued job is one tag reservation (``name=<board>`` or
``target=<target>``, plus ``avail=yes`` so offline and drained boards take nothing), and
the coordinator allocates places to reservations by priority, then age. This loop only
follows what labgrid decided and keeps labgrid's contract:

* a reservation allocated to a place hands the job to the agent serving that place: the
  coordinator pushes each place change to the service's labgrid session, which wakes this
  loop at once (``CoordinatorLink.on_change``), as do a submitted, finished or cancelled
  job; otherwise it looks every ``dispatch_interval``;
* every reservation it creates is owned by a job row (``Job.token`` and a ``Reservation``
  row, written by one compare-and-set: a job cancelled meanwhile does not take it, and it
  is cancelled at once); waiting reservations are polled well inside labgrid's 60 s
  expiry, and a lost one (expired, or gone with a coordinator restart) is made again;
* the sweep (every ``FULL_CHECK_S``): a reservation of the farm's in labgrid that no live
  job owns is cancelled — whatever ended its job, nothing of it outlives it;
* locks never expire in labgrid 26: the place of a job that ended without its agent
  freeing it is unlocked here (``release_later``), "cancel the reservation, then unlock";
* an agent silent for ``agent_timeout`` is lost: its running jobs fail ("agent lost"), its
  reserved ones go back to the queue, its boards go offline (``avail=no``);
* after a (re)connection — a coordinator restart drops all locks and reservations, a
  service restart starts here — the places are re-applied, queued jobs get new
  reservations, reserved jobs whose reservation is gone wait again and the boards of
  running jobs are locked again: the jobs of a previous run are reconciled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy import Row, select, update
from sqlalchemy.orm import Session

from aidge_deploy.farm.agents import Release, mark_agent_lost
from aidge_deploy.farm.coordinator import (
    CoordinatorLink,
    CoordinatorLost,
    ReservationInfo,
    ReservationState,
    free_board,
    tag_value,
)
from aidge_deploy.farm.db import Agent, Board, Database, Job, Reservation, now
from aidge_deploy.farm.failures import retry_board
from aidge_deploy.farm.health import HealthChecks
from aidge_deploy.farm.jobs import requeue, transition
from aidge_deploy.farm.notify import Notifier
from aidge_deploy.farm.settings import FarmSettings
from aidge_deploy.farm.states import ON_BOARD, JobState

log = logging.getLogger("aidge_deploy.farm")

#: priority of the reservation that re-locks a running job's board after a coordinator restart
RELOCK_PRIO = 1000.0
#: how often the whole list of reservations is read (lost ones made again, waiting ones
#: refreshed, orphans swept); in between, allocations come from the places pushed
FULL_CHECK_S = 2.0
#: how often agents' heartbeats are checked
AGENT_CHECK_S = 1.0
#: how often the boards' health checks look for golden runs to judge or start
HEALTH_CHECK_S = 1.0
_LIVE = [st.value for st in (JobState.QUEUED, JobState.RESERVED, *ON_BOARD)]
_ALIVE = (ReservationState.WAITING, ReservationState.ALLOCATED, ReservationState.ACQUIRED)


class Coordinator(Protocol):
    """What the dispatcher needs of the labgrid coordinator (``CoordinatorLink``; the
    tests' fake coordinator)."""

    address: str
    owner: str

    @property
    def connected(self) -> bool: ...
    async def connect(self) -> None: ...
    async def close(self) -> None: ...
    def allocations(self) -> dict[str, str]: ...
    def holders(self) -> dict[str, str]: ...
    def may_release(self, place: str, token: str | None) -> bool: ...
    async def ensure_place(
        self, name: str, tags: dict[str, str], matches: tuple[str, ...] = ()
    ) -> None: ...
    async def reserve(self, tags: dict[str, str], prio: float = 0.0) -> str: ...
    async def reservations(self) -> dict[str, ReservationInfo]: ...
    async def poll(self, token: str) -> ReservationInfo | None: ...
    async def cancel(self, token: str) -> None: ...
    async def acquire(self, place: str, token: str) -> None: ...
    async def release(self, place: str) -> None: ...


class Dispatcher:
    def __init__(
        self,
        settings: FarmSettings,
        db: Database,
        notifier: Notifier,
        link: Coordinator | None = None,
        health: HealthChecks | None = None,
    ) -> None:
        self.settings = settings
        #: the boards' golden runs (``farm.health``): started and judged from this loop
        self.health = health
        if health is not None:
            health.bind(self.boards_changed, self.wake)
        self.db = db
        self.notifier = notifier
        self.link: Coordinator = link or CoordinatorLink(
            settings.coordinator, settings.farm_name, on_change=self.wake
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._releases: list[Release] = []
        self._boards_dirty = True
        self._refreshed: dict[str, float] = {}
        self._relock: dict[str, int] = {}  # token -> job id
        self._started = time.time()
        self._last_full = 0.0
        self._last_agent_check = 0.0
        self._last_health = 0.0
        self.ticks = 0

    # --- called from request handlers (any thread) -----------------------------------

    @property
    def coordinator_connected(self) -> bool:
        return self.link.connected

    def held_outside(self) -> dict[str, str]:
        """Places locked by someone outside the farm: place -> who (no request)."""
        return self.link.holders() if self.link.connected else {}

    def wake(self) -> None:
        loop, event = self._loop, self._wake
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    def release_later(self, *releases: Release) -> None:
        """Cancel each reservation, then unlock each board, from the loop."""
        todo = [r for r in releases if r.token is not None or r.board is not None]
        if not todo:
            return
        with self._lock:
            self._releases.extend(todo)
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
                    await self.connect()
                    backoff = 0.5
                await self.tick()
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

    async def connect(self) -> None:
        await self.link.connect()
        log.info("connected to the labgrid coordinator at %s", self.link.address)
        self._boards_dirty = True
        self._last_full = 0.0
        await self._resync()

    async def _sleep(self, seconds: float) -> None:
        if self._wake is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def tick(self) -> None:
        """One pass of the loop (the tests drive it one pass at a time)."""
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
        if self.health is not None and t - self._last_health >= HEALTH_CHECK_S:
            self._last_health = t
            await asyncio.to_thread(self.health.tick)
            if self._boards_dirty:
                self._boards_dirty = False
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
            if not await asyncio.to_thread(self._own, job_id, token, prio):
                await self.link.cancel(token)  # the job was cancelled meanwhile
        if reservations is not None:
            await self._refresh(reservations, waiting)
            await self._do_relocks(reservations)
            await self._sweep(reservations)

    async def _do_releases(self) -> None:
        with self._lock:
            todo, self._releases = self._releases, []
        for release in todo:
            await self.free(release)

    async def free(self, release: Release) -> None:
        """Free what a job held (``coordinator.free_board``) and forget its reservation."""
        await free_board(self.link, release.token, release.board)
        if release.token:
            self._refreshed.pop(release.token, None)
            self._relock.pop(release.token, None)
            await asyncio.to_thread(self._ended, release.token)

    def _ended(self, token: str) -> None:
        with self.db.session() as s:
            s.execute(
                update(Reservation)
                .where(Reservation.token == token, Reservation.ended_at.is_(None))
                .values(ended_at=now())
            )

    # --- places ----------------------------------------------------------------------

    def _place_specs(self) -> list[tuple[str, dict[str, str], tuple[str, ...]]]:
        """Each board's place: its tags and, for a physical board, the resources the
        exporter of its host publishes under a group named like the board."""
        suspect = self.health.suspect if self.health is not None else frozenset()
        with self.db.session() as s:
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
                        # users' jobs: not on a drained board, nor on one whose health
                        # check after failures runs; golden jobs: on any board that is up
                        "avail": "yes"
                        if b.online
                        and not b.drained
                        and b.name not in suspect
                        and _online(agents.get(b.agent_name))
                        else "no",
                        "health": "yes" if b.online and _online(agents.get(b.agent_name)) else "no",
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
        freed: list[Release] = []
        lost = False
        with self.db.session() as s:
            for agent in list(s.scalars(select(Agent).where(Agent.online.is_(True)))):
                # after a service restart, an agent gets the whole timeout to show up
                seen = max(agent.last_seen or 0.0, self._started)
                if t - seen <= limit:
                    continue
                log.warning("agent %s lost (silent for %.0f s)", agent.name, t - seen)
                lost = True
                freed += mark_agent_lost(
                    s, agent.name, t - seen, limit, retries=self.settings.job_retries
                )
        self.release_later(*freed)
        return lost

    # --- reservations ----------------------------------------------------------------

    def _follow(
        self, allocated: dict[str, str], reservations: dict[str, ReservationInfo] | None
    ) -> tuple[list[tuple[int, dict[str, str], float]], list[str]]:
        """Hand allocated jobs to their agents; the jobs that need a reservation, and (on a
        full check, with ``reservations``) the tokens of the waiting ones.

        ``allocated`` (token -> place) comes from the places the coordinator pushed. Only a
        full check looks at every waiting job: then a reservation missing from the
        coordinator's list (expired, or lost with a restart) is made again."""
        wanted: list[tuple[int, dict[str, str], float]] = []
        waiting: list[str] = []
        notify: list[str] = []
        freed: list[Release] = []
        with self.db.session() as s:
            boards = {b.name: b for b in s.scalars(select(Board))}
            online = {a.name for a in s.scalars(select(Agent).where(Agent.online.is_(True)))}
            q = select(
                Job.id,
                Job.state,
                Job.token,
                Job.target,
                Job.requested_board,
                Job.priority,
                Job.attempt,
                Job.user_id,
            )
            if reservations is None:
                q = q.where(
                    Job.state == JobState.QUEUED.value,
                    Job.token.is_(None) | Job.token.in_(list(allocated)),
                )
            else:
                q = q.where(Job.state.in_([JobState.QUEUED.value, JobState.RESERVED.value]))
            for job in list(s.execute(q.order_by(Job.id))):
                token = job.token
                if reservations is not None:
                    info = reservations.get(token) if token else None
                    alive = info is not None and info.state in _ALIVE
                    if job.state == JobState.RESERVED.value:
                        if alive:
                            waiting.append(str(token))
                        elif (back := requeue(s, job.id, "its reservation is gone")) is not None:
                            freed.append(Release(back.token, None))
                            notify.append(f"job:{job.id}")
                            # a new reservation now, in job order: it keeps its turn
                            wanted.append((job.id, self._filters(s, job), job.priority))
                        continue
                    if token and not alive:
                        self._forget_token(s, job.id, token)
                        token = None
                if token is None:
                    wanted.append((job.id, self._filters(s, job), job.priority))
                    continue
                place = allocated.get(token)
                if reservations is not None:
                    waiting.append(token)
                    info = reservations[token]
                    if info.state == ReservationState.ALLOCATED and info.place:
                        place = info.place
                if place is None:
                    continue
                board = boards.get(place)
                if board is None or not board.online or board.agent_name not in online:
                    # allocated to a board that just went away: wait for another one
                    self._forget_token(s, job.id, token)
                    freed.append(Release(token, None))
                    continue
                moved = transition(
                    s,
                    job.id,
                    JobState.RESERVED,
                    expected=(JobState.QUEUED,),
                    message=f"board {board.name}",
                    values={"board": board.name, "agent_name": board.agent_name},
                    where=[Job.token == token],
                )
                if moved is not None:
                    notify += [f"agent:{board.agent_name}", f"job:{job.id}"]
        self.release_later(*freed)
        if notify:
            self.notifier.notify(*notify)
        return wanted, waiting

    @staticmethod
    def _forget_token(s: Session, job_id: int, token: str) -> None:
        s.execute(
            update(Job)
            .where(Job.id == job_id, Job.token == token)
            .values(token=None)
            .execution_options(synchronize_session=False)
        )

    def _filters(self, s: Session, job: Row[*tuple[Any, ...]]) -> dict[str, str]:
        """The reservation's tags: the board asked for, else any board of the target — but
        a retried job's, which names another board it has not failed on, where there is
        one (``failures.retry_board``)."""
        tags = {"farm": tag_value(self.settings.farm_name), "avail": "yes"}
        if self.health is not None and self.health.is_golden(job.user_id):
            # a golden job may take its drained board (readmission needs it)
            tags = {"farm": tag_value(self.settings.farm_name), "health": "yes"}
        board = job.requested_board
        if not board and job.attempt > 1:
            board = retry_board(s, job.id, job.target)
        if board:
            tags["name"] = board
        else:
            tags["target"] = tag_value(job.target)
        return tags

    def _own(self, job_id: int, token: str, prio: float, purpose: str = "queue") -> bool:
        """Give reservation ``token`` to job ``job_id`` — only while it still waits for
        one (compare-and-set): False when the job was cancelled meanwhile."""
        with self.db.session() as s:
            done = s.execute(
                update(Job)
                .where(Job.id == job_id, Job.state == JobState.QUEUED.value, Job.token.is_(None))
                .values(token=token)
                .execution_options(synchronize_session=False)
            )
            if done.rowcount != 1:  # type: ignore[attr-defined]
                return False
            s.add(Reservation(token=token, job_id=job_id, purpose=purpose, prio=prio))
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

    async def _sweep(self, reservations: Mapping[str, ReservationInfo]) -> None:
        """Cancel every reservation of the farm's that no live job owns (its job ended,
        was cancelled, or the service stopped between creating and recording it)."""
        ours = [
            t for t, r in reservations.items() if r.owner == self.link.owner and r.state in _ALIVE
        ]
        if not ours:
            return
        owned = await asyncio.to_thread(self._owned, ours)
        for token in ours:
            if token not in owned and token not in self._relock:
                log.info("cancelling reservation %s: no live job owns it", token)
                await self.link.cancel(token)
                await asyncio.to_thread(self._ended, token)

    def _owned(self, tokens: list[str]) -> set[str]:
        with self.db.session() as s:
            return set(
                s.scalars(select(Job.token).where(Job.token.in_(tokens), Job.state.in_(_LIVE)))
            )

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
        with self.db.session() as s:
            return [
                (j.id, j.board)
                for j in s.execute(
                    select(Job.id, Job.board, Job.token).where(
                        Job.state.in_([st.value for st in ON_BOARD])
                    )
                )
                if j.board and (j.token is None or j.token not in reservations)
            ]

    def _store_relock_token(self, job_id: int, token: str) -> None:
        with self.db.session() as s:
            done = s.execute(
                update(Job)
                .where(Job.id == job_id, Job.state.in_([st.value for st in ON_BOARD]))
                .values(token=token)
                .execution_options(synchronize_session=False)
            )
            if done.rowcount == 1:  # type: ignore[attr-defined]
                s.add(Reservation(token=token, job_id=job_id, purpose="relock", prio=RELOCK_PRIO))
                return
        self.release_later(Release(token, None))

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


__all__ = ["RELOCK_PRIO", "Coordinator", "Dispatcher"]
