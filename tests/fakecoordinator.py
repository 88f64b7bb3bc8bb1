"""FakeCoordinator: a test double of the labgrid coordinator for the dispatcher's unit tests.

It is a fake, named as such: the end-to-end tests keep the real ``labgrid-coordinator``.
It keeps places (tags, lock, reservation) and reservations in memory and allocates them
with labgrid's own scheduler (``labgrid.remote.scheduler.schedule``, the function the real
coordinator calls) in labgrid's order — priority, then creation — over the places that
have neither a lock nor a reservation, as ``Coordinator.schedule_reservations`` does. It
implements ``dispatch.Coordinator``: what the service's ``CoordinatorLink`` offers. The
test drives time (``created`` order) and failures (``restart``, ``lock_outside``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from labgrid.remote.scheduler import TagSet, schedule

from aidge_deploy.farm.coordinator import ReservationInfo, ReservationState


@dataclass
class FakePlace:
    name: str
    tags: dict[str, str] = field(default_factory=dict)
    acquired: str | None = None
    reservation: str | None = None


@dataclass
class FakeReservation:
    token: str
    filters: dict[str, str]
    prio: float
    created: int
    owner: str
    state: ReservationState = ReservationState.WAITING
    place: str | None = None


class FakeCoordinator:
    """In-memory places and reservations, scheduled by labgrid's own scheduler."""

    def __init__(self, owner: str = "farm/aidge-farm") -> None:
        self.address = "fake:0"
        self.owner = owner
        self.places: dict[str, FakePlace] = {}
        #: every reservation by token (what ``reservations()`` lists)
        self.table: dict[str, FakeReservation] = {}
        self.up = True
        self._connected = False
        self._clock = itertools.count(1)
        self._tokens = (f"TOK{i:06d}" for i in itertools.count(1))
        #: every call, in order (name, first argument): what the dispatcher asked
        self.calls: list[tuple[str, str]] = []

    # --- what the test does ---------------------------------------------------------

    def restart(self) -> None:
        """A coordinator restart: places stay (places.yaml), locks and reservations go,
        the client's session ends."""
        for place in self.places.values():
            place.acquired = None
            place.reservation = None
        self.table.clear()
        self._connected = False

    def lock_outside(self, place: str, who: str) -> None:
        """Someone outside the farm locks a place (``labgrid-client lock``)."""
        self.places[place].acquired = who
        self._schedule()

    def live_reservations(self) -> dict[str, FakeReservation]:
        alive = (ReservationState.WAITING, ReservationState.ALLOCATED, ReservationState.ACQUIRED)
        return {t: r for t, r in self.table.items() if r.state in alive}

    # --- dispatch.Coordinator ---------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected

    async def connect(self) -> None:
        from aidge_deploy.farm.coordinator import CoordinatorLost

        if not self.up:
            raise CoordinatorLost("the fake coordinator is down")
        self._connected = True

    async def close(self) -> None:
        self._connected = False

    def allocations(self) -> dict[str, str]:
        return {p.reservation: n for n, p in self.places.items() if p.reservation}

    def holders(self) -> dict[str, str]:
        return {
            n: p.acquired for n, p in self.places.items() if p.acquired and p.acquired != self.owner
        }

    def may_release(self, place: str, token: str | None) -> bool:
        p = self.places.get(place)
        if p is None or token is None:
            return True
        return p.reservation == token or (p.reservation is None and bool(p.acquired))

    async def ensure_place(
        self, name: str, tags: dict[str, str], matches: tuple[str, ...] = ()
    ) -> None:
        self.calls.append(("ensure_place", name))
        place = self.places.setdefault(name, FakePlace(name))
        place.tags = dict(tags)
        self._schedule()

    async def reserve(self, tags: dict[str, str], prio: float = 0.0) -> str:
        token = next(self._tokens)
        self.calls.append(("reserve", token))
        self.table[token] = FakeReservation(token, dict(tags), prio, next(self._clock), self.owner)
        self._schedule()
        return token

    async def reservations(self) -> dict[str, ReservationInfo]:
        return {
            t: ReservationInfo(token=t, state=r.state, place=r.place, owner=r.owner)
            for t, r in self.table.items()
        }

    async def poll(self, token: str) -> ReservationInfo | None:
        r = self.table.get(token)
        return None if r is None else ReservationInfo(token, r.state, r.place, r.owner)

    async def cancel(self, token: str) -> None:
        self.calls.append(("cancel", token))
        r = self.table.pop(token, None)
        if r is not None and r.place and self.places[r.place].reservation == token:
            self.places[r.place].reservation = None
        self._schedule()

    async def acquire(self, place: str, token: str) -> None:
        self.calls.append(("acquire", place))
        p = self.places[place]
        assert p.reservation == token and p.acquired is None, (place, token, p)
        p.acquired = self.owner
        self.table[token].state = ReservationState.ACQUIRED
        self._schedule()

    async def release(self, place: str) -> None:
        self.calls.append(("release", place))
        p = self.places.get(place)
        if p is not None and p.acquired == self.owner:
            p.acquired = None
            if p.reservation and p.reservation in self.table:
                self.table[p.reservation].state = ReservationState.ALLOCATED
        self._schedule()

    # --- labgrid's scheduling pass ----------------------------------------------------

    def _schedule(self) -> None:
        free = [
            TagSet(n, {*p.tags.items(), ("name", n)})
            for n, p in self.places.items()
            if p.acquired is None and p.reservation is None
        ]
        pending = sorted(
            (r for r in self.table.values() if r.state is ReservationState.WAITING),
            key=lambda r: (-r.prio, r.created),
        )
        wanted = [TagSet(r.token, set(r.filters.items())) for r in pending]
        for token, place in schedule(free, wanted).items():
            r = self.table[token]
            r.state, r.place = ReservationState.ALLOCATED, place
            self.places[place].reservation = token


__all__ = ["FakeCoordinator", "FakePlace", "FakeReservation"]
