"""The targets of a campaign and how each is reached: here, on a lab board, on the farm.

Why this module exists: ``host``, ``mps2-an386``, ``lab:nucleo`` and ``farm:mps3-an547``
are reached in different ways, and that decides how their cells share this machine
(``multitarget``'s lanes: a host benchmark alone, a physical board one cell at a time,
emulated boards in parallel, farm jobs waited for) — resolved once, with a clear error for
a name that is not a target or a physical board nobody said how to reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aidge_deploy.campaign.spec import CampaignError, TargetKind, TargetRef
from aidge_deploy.lab import LabBoard, LabMap, Reach
from aidge_deploy.multitarget import Lane, lane_for
from aidge_deploy.targetspec import TargetCaps


@dataclass(frozen=True)
class TargetEntry:
    """One target of the campaign and how it is reached (no secret: passwords come from
    the environment when a cell runs)."""

    label: str
    target: str
    reach: Reach
    #: ``DeployConfig`` keyword arguments that reach it (backend, connection, farm)
    deploy_options: tuple[tuple[str, Any], ...] = ()
    #: the lab board (probe and SSH boards are leased through it, one cell at a time)
    lab_board: LabBoard | None = None

    @property
    def board(self) -> str | None:
        options = dict(self.deploy_options)
        return str(options.get("api_board_name") or options.get("sbc_board_name") or "") or (
            self.lab_board.name if self.lab_board is not None else None
        )

    @property
    def lane(self) -> Lane:
        """How its cells share this machine (``multitarget``): a host benchmark alone, a
        physical board one cell at a time, emulated boards in parallel, farm jobs remote."""
        backend = str(dict(self.deploy_options).get("backend") or "local")
        return lane_for(self.target, backend=backend, measured_on_host=self.reach is Reach.HOST)

    @property
    def resource(self) -> str | None:
        """The physical board a ``PER_BOARD`` cell holds (two names of one board share it)."""
        if self.lane is not Lane.PER_BOARD:
            return None
        if self.lab_board is not None:
            from aidge_deploy.testing.locks import lock_key

            return lock_key(self.lab_board)
        options = dict(self.deploy_options)
        if options.get("ssh_host"):
            return f"ssh-{options['ssh_host']}-{options.get('ssh_port') or 22}"
        return f"probe-{options.get('probe_unique_id') or options.get('serial_port')}"

    def identity(self) -> dict[str, Any]:
        """What about the target shapes a result (part of the cell key; no secret)."""
        return {
            "label": self.label,
            "target": self.target,
            "reach": self.reach.value,
            "options": {k: str(v) for k, v in sorted(self.deploy_options)},
        }


def resolve_target(
    ref: TargetRef,
    *,
    lab: LabMap | None,
    farm: Mapping[str, Any] | None,
    local_options: Mapping[str, Any] | None = None,
) -> TargetEntry:
    """How ``ref`` is reached. ``farm``: the farm's ``DeployConfig`` options (url, user);
    ``local_options``: connection options of the command line for bare target names."""
    from aidge_deploy.targetcaps import pair_caps

    if ref.kind is TargetKind.LAB:
        if lab is None:
            raise CampaignError(f"target {ref.label} needs a lab file", hint="Pass --lab lab.yaml.")
        board = lab.board(ref.name)
        options = board.deploy_options(lab.farm)
        return TargetEntry(ref.label, board.target, board.reach, _frozen(options), board)
    if ref.kind is TargetKind.FARM:
        if not farm:
            raise CampaignError(
                f"target {ref.label} needs a board farm",
                hint="Give the farm's URL (--api-url, or farm: {url: ...} in the campaign).",
            )
        pair_caps(ref.name, "api")  # unknown names: a did-you-mean
        options = {**farm, "target": ref.name, "backend": "api"}
        if ref.board:
            options["api_board_name"] = ref.board
        return TargetEntry(ref.label, ref.name, Reach.FARM, _frozen(options))
    options = {"target": ref.name, **(local_options or {})}
    backend = str(options.get("backend") or "local")
    reach = _reach(pair_caps(ref.name, backend))  # unknown names: a did-you-mean
    if reach is not None:
        return TargetEntry(ref.label, ref.name, reach, _frozen(options))
    if options.get("serial_port") or options.get("probe_unique_id"):
        return TargetEntry(ref.label, ref.name, Reach.PROBE, _frozen(options))
    raise CampaignError(
        f"target {ref.name!r} is a physical board: say which one",
        hint=f"Name a board of a lab file (lab:BOARD with --lab), or farm:{ref.name}.",
    )


def _reach(caps: TargetCaps) -> Reach | None:
    """How a target named bare is reached, by its capabilities (None: a physical board the
    options must say how to reach)."""
    if caps.remote:
        return Reach.FARM
    if caps.over_ssh:
        return Reach.SSH
    if caps.this_machine:
        return Reach.HOST
    if caps.emulated:
        return Reach.EMULATED
    return None


def _frozen(options: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in options.items() if v is not None))


__all__ = ["TargetEntry", "resolve_target"]
