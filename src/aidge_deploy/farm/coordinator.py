"""The link to the labgrid coordinator: places, tag reservations (the queue) and locks.

One long-lived ``labgrid.remote.client.ClientSession`` on the caller's asyncio loop (it
needs a plain ``asyncio`` loop: uvicorn runs with ``loop="asyncio"``). Every farm process
talks to the coordinator as one identity, ``<farm>/aidge-farm``, because labgrid lets only
a reservation's owner lock the place it was allocated (the service reserves, the agent
locks). labgrid 26.0.1 has no leases: locks never expire and reservations expire after
60 s unless polled, so the service polls and reaps (``dispatch``). Calls are bounded by
``rpc_timeout``; a lost coordinator surfaces as ``CoordinatorLost``.

The session's stream keeps a copy of every place, pushed by the coordinator on each change
(a reservation allocated to a place, a lock taken or released): ``allocations()`` reads
the reservations' places from it without a request, and ``on_change`` is called on each
update so the service reacts at once instead of polling.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

from aidge_deploy.errors import ConnectError

log = logging.getLogger("aidge_deploy.farm")

FARM_USER = "aidge-farm"


class CoordinatorLost(ConnectError):
    """The labgrid coordinator cannot be reached (or restarted under us)."""


class ReservationState(IntEnum):
    WAITING = 0
    ALLOCATED = 1
    ACQUIRED = 2
    EXPIRED = 3
    INVALID = 4


@dataclass(frozen=True)
class ReservationInfo:
    token: str
    state: ReservationState
    place: str | None
    owner: str


@dataclass(frozen=True)
class PlaceInfo:
    name: str
    tags: dict[str, str]
    acquired: str | None
    reservation: str | None


def tag_value(text: str) -> str:
    """A labgrid tag value for ``text`` (labgrid advises ``[a-z0-9_]``)."""
    return re.sub(r"[^a-z0-9_]", "_", text.lower())


class CoordinatorLink:
    """Async wrapper of one labgrid client session with the farm's identity."""

    def __init__(
        self,
        address: str,
        farm_name: str = "farm",
        rpc_timeout: float = 15.0,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.address = address
        self.owner = f"{tag_value(farm_name) or 'farm'}/{FARM_USER}"
        self.rpc_timeout = rpc_timeout
        self.on_change = on_change
        self._session: Any = None
        self._pb: Any = None

    @property
    def connected(self) -> bool:
        return self._session is not None and not self._session.stopping.is_set()

    async def connect(self) -> None:
        from labgrid.remote.client import ClientSession
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

        await self.close()
        host, user = self.owner.split("/", 1)
        changed = self.on_change

        class _FarmSession(ClientSession):
            def gethostname(self) -> str:
                return host

            def getuser(self) -> str:
                return user

            async def on_place_changed(self, place_pb2: Any) -> None:
                await super().on_place_changed(place_pb2)
                if changed is not None:
                    changed()

            async def on_place_deleted(self, name: str) -> None:
                await super().on_place_deleted(name)
                if changed is not None:
                    changed()

        session = _FarmSession(address=self.address, loop=asyncio.get_running_loop())
        try:
            await asyncio.wait_for(session.start(), self.rpc_timeout)
        except Exception as exc:
            await _quiet_close(session)
            raise CoordinatorLost(
                f"cannot reach the labgrid coordinator at {self.address}: {exc or type(exc).__name__}",
                hint="Start it (`labgrid-coordinator -l HOST:PORT`, or `aidge-deploy farm up`) "
                "and check the address.",
            ) from None
        self._session = session
        self._pb = pb

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await _quiet_close(session)

    async def _call(self, rpc: str, request: Any) -> Any:
        import grpc

        if not self.connected:
            raise CoordinatorLost(f"not connected to the labgrid coordinator at {self.address}")
        try:
            return await asyncio.wait_for(
                getattr(self._session.stub, rpc)(request), self.rpc_timeout
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                raise CoordinatorLost(f"labgrid coordinator lost: {exc.details()}") from None
            raise
        except TimeoutError:
            raise CoordinatorLost(f"labgrid coordinator did not answer {rpc}") from None

    @staticmethod
    def _code(exc: Exception) -> Any:
        code = getattr(exc, "code", None)
        return code() if callable(code) else None

    # --- places -------------------------------------------------------------------------

    async def places(self) -> dict[str, PlaceInfo]:
        resp = await self._call("GetPlaces", self._pb.GetPlacesRequest())
        out = {}
        for p in resp.places:
            out[p.name] = PlaceInfo(
                name=p.name,
                tags=dict(p.tags),
                acquired=p.acquired if p.HasField("acquired") and p.acquired else None,
                reservation=p.reservation if p.HasField("reservation") and p.reservation else None,
            )
        return out

    def allocations(self) -> dict[str, str]:
        """Reservation token -> the place it is allocated to (or locked by), from the
        session's copy of the places (no request)."""
        if not self.connected:
            return {}
        return {
            str(p.reservation): name
            for name, p in self._session.places.items()
            if getattr(p, "reservation", None)
        }

    def holders(self) -> dict[str, str]:
        """Places locked by someone other than the farm: place -> the locker's
        ``host/user`` (from the session's copy of the places, no request)."""
        if not self.connected:
            return {}
        return {
            name: str(p.acquired)
            for name, p in self._session.places.items()
            if getattr(p, "acquired", None) and str(p.acquired) != self.owner
        }

    def may_release(self, place: str, token: str | None) -> bool:
        """Whether unlocking ``place`` for the job of reservation ``token`` cannot unlock
        another job's board. Every farm process locks as the same labgrid user, so a late
        unlock (the agent freed the board itself, the next job has locked it since) would
        take the next job's lock. From the session's copy of the places: yes while the
        place is still allocated to ``token``, or locked with no reservation at all (what
        a job that lost its reservation leaves), or unknown here."""
        p = self._session.places.get(place) if self.connected else None
        if p is None or token is None:
            return True
        reservation = getattr(p, "reservation", None) or None
        return reservation == token or (reservation is None and bool(p.acquired))

    async def ensure_place(
        self, name: str, tags: dict[str, str], matches: tuple[str, ...] = ()
    ) -> None:
        """Create the place if missing and set its tags (and resource matches)."""
        import grpc

        try:
            await self._call("AddPlace", self._pb.AddPlaceRequest(name=name))
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise
        await self.set_tags(name, tags)
        for pattern in matches:
            try:
                await self._call(
                    "AddPlaceMatch", self._pb.AddPlaceMatchRequest(placename=name, pattern=pattern)
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise

    async def set_tags(self, name: str, tags: dict[str, str]) -> None:
        await self._call("SetPlaceTags", self._pb.SetPlaceTagsRequest(placename=name, tags=tags))

    # --- reservations -------------------------------------------------------------------

    async def reserve(self, tags: dict[str, str], prio: float = 0.0) -> str:
        flt = self._pb.Reservation.Filter(filter=tags)
        resp = await self._call(
            "CreateReservation",
            self._pb.CreateReservationRequest(filters={"main": flt}, prio=prio),
        )
        return str(resp.reservation.token)

    def _info(self, r: Any) -> ReservationInfo:
        place = r.allocations.get("main") if r.allocations else None
        return ReservationInfo(
            token=r.token, state=ReservationState(r.state), place=place or None, owner=r.owner
        )

    async def poll(self, token: str) -> ReservationInfo | None:
        """Refresh a reservation (keeps it from expiring); None when it no longer exists."""
        import grpc

        try:
            resp = await self._call("PollReservation", self._pb.PollReservationRequest(token=token))
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.INVALID_ARGUMENT,
            ):
                return None
            raise
        return self._info(resp.reservation)

    async def reservations(self) -> dict[str, ReservationInfo]:
        resp = await self._call("GetReservations", self._pb.GetReservationsRequest())
        return {r.token: self._info(r) for r in resp.reservations}

    async def cancel(self, token: str) -> None:
        import grpc

        try:
            await self._call("CancelReservation", self._pb.CancelReservationRequest(token=token))
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in (
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.INVALID_ARGUMENT,
            ):
                raise

    # --- locks --------------------------------------------------------------------------

    async def acquire(self, place: str, token: str) -> None:
        """Lock ``place`` for reservation ``token`` (refused unless it is allocated to it)."""
        import grpc

        # once the coordinator answered the sync, the session's places are up to date
        if not await self._session.sync_with_coordinator():
            raise CoordinatorLost(f"labgrid coordinator lost while locking {place!r}")
        current = self._session.places.get(place)
        if current is None:
            raise ConnectError(f"labgrid place {place!r} does not exist")
        if current.reservation != token:
            raise ConnectError(
                f"labgrid place {place!r} is reserved for {current.reservation!r}, not {token!r}"
            )
        try:
            await self._call("AcquirePlace", self._pb.AcquirePlaceRequest(placename=place))
        except grpc.aio.AioRpcError as exc:
            raise ConnectError(f"cannot lock labgrid place {place!r}: {exc.details()}") from None

    async def release(self, place: str) -> None:
        """Unlock ``place`` if the farm holds it (a no-op otherwise)."""
        import grpc

        try:
            await self._call(
                "ReleasePlace", self._pb.ReleasePlaceRequest(placename=place, fromuser=self.owner)
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in (
                grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.FAILED_PRECONDITION,
            ):
                raise


class Freeable(Protocol):
    """What freeing a board needs of a coordinator link (``CoordinatorLink``, or a test's
    fake coordinator)."""

    def may_release(self, place: str, token: str | None) -> bool: ...
    async def cancel(self, token: str) -> None: ...
    async def release(self, place: str) -> None: ...


async def free_board(link: Freeable, token: str | None, place: str | None) -> bool:
    """Free a job's board — the one sequence, for the agent and the service alike: cancel
    its reservation, then unlock the place. labgrid offers a place that has neither, so the
    unlock's scheduling pass gives it to the next job at once (unlocked first, it would
    wait for a later pass). The place is unlocked only while it still holds this job's
    reservation, or none: every farm process locks as one labgrid user, and a late unlock
    would otherwise take the next job's lock. Whether the place was unlocked."""
    unlock = bool(place) and link.may_release(str(place), token)
    if token:
        await link.cancel(token)
    if unlock:
        await link.release(str(place))
    return unlock


async def _quiet_close(session: Any) -> None:
    for step in (session.stop, session.close):
        try:
            await asyncio.wait_for(step(), 5.0)
        except Exception:
            log.debug("closing the labgrid session", exc_info=True)


__all__ = [
    "FARM_USER",
    "CoordinatorLink",
    "CoordinatorLost",
    "PlaceInfo",
    "ReservationInfo",
    "ReservationState",
    "free_board",
    "tag_value",
]
