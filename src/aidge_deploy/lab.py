"""The lab map: one YAML file naming each board of a lab and how it is reached.

The same file serves the pytest plugin (``--aidge-lab``), the farm agent
(``aidge-deploy farm agent --config lab.yaml``) and ``aidge-deploy boards scan`` (which
writes one to edit). A board is reached in exactly one way:

* ``emulated: true`` — a QEMU board started by this machine (``mps2-an386``, ...);
* ``probe`` (+ ``serial``) — a physical MCU: a debug probe by unique id and its UART, the
  port named by ``/dev/serial/by-id/...`` or by the USB serial number of the adapter
  (never by a ``ttyACM`` index, which changes with plug order);
* ``ssh`` — a Linux board (``backend: ssh`` or ``ssh_docker``);
* ``farm_board`` — a board of the lab's board farm, reached through the ``api`` backend;
* nothing — the ``host`` target itself.

Example::

    version: 1
    name: bench-lab
    farm: {url: http://farm.example.com:8000/api, username: ci}   # password: env
    boards:
      an386:   {target: mps2-an386, emulated: true}
      nucleo:
        target: stm32h7a3
        probe: {unique_id: "0670FF3735", flash_method: pyocd, pyocd_target: stm32h7a3zitxq}
        serial: {usb_serial_number: "0670FF3735", baudrate: 115200}
      pi:
        target: raspberrypi
        ssh: {host: 192.168.1.50, user: pi, key_path: ~/.ssh/id_ed25519}
      farm-h7: {target: stm32h7a3, farm_board: stm32h7_lab_01}

Secrets never live in the file: the farm password comes from ``AIDGE_DEPLOY_API_PASSWORD``
and SSH keys are paths.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from aidge_deploy.errors import ConfigError

LAB_VERSION = 1
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class LabError(ConfigError):
    """The lab file is missing, malformed, or names a board or port that is not there."""


class Reach(StrEnum):
    """How a board of the lab is reached."""

    HOST = "host"
    EMULATED = "emulated"
    PROBE = "probe"
    SSH = "ssh"
    FARM = "farm"


def _is_this_machine(target: str) -> bool:
    """Whether ``target`` is this machine (its board record's kind): a board of the lab that
    needs no way to be reached."""
    from aidge_deploy.boardspecs import board_spec
    from aidge_deploy.targetspec import TargetKind

    spec = board_spec(target)
    return spec is not None and spec.kind is TargetKind.HOST


class FlashMethod(StrEnum):
    PYOCD = "pyocd"
    OPENOCD = "openocd"
    JLINK = "jlink"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProbeSpec(_Model):
    """The debug probe that flashes a physical board."""

    unique_id: str = Field(min_length=1)
    flash_method: FlashMethod = FlashMethod.PYOCD
    pyocd_target: str | None = None


class SerialSpec(_Model):
    """The board's UART: a stable device path, or the USB serial number of its adapter."""

    port: str | None = None
    usb_serial_number: str | None = None
    baudrate: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_way(self) -> SerialSpec:
        if (self.port is None) == (self.usb_serial_number is None):
            raise ValueError("give exactly one of 'port' and 'usb_serial_number'")
        return self


class SshSpec(_Model):
    """A Linux board reached over SSH (``docker_image`` runs it in a container there)."""

    host: str = Field(min_length=1)
    user: str | None = None
    port: int | None = Field(default=None, gt=0, lt=65536)
    key_path: Path | None = None
    known_hosts_path: Path | None = None
    remote_workdir: str | None = None
    docker_image: str | None = None


class FarmSpec(_Model):
    """The lab's board farm (its password comes from the environment, never the file)."""

    url: str = Field(min_length=1)
    username: str | None = None
    poll_interval: float = Field(default=2.0, gt=0)


class LabBoard(_Model):
    """One board of the lab."""

    name: str = Field(pattern=_NAME_PATTERN)
    target: str = Field(min_length=1)
    emulated: bool = False
    probe: ProbeSpec | None = None
    serial: SerialSpec | None = None
    ssh: SshSpec | None = None
    farm_board: str | None = None
    #: free-form labels (a farm publishes them as labgrid place tags)
    tags: dict[str, str] = Field(default_factory=dict)
    description: str = ""

    @model_validator(mode="after")
    def _one_reach(self) -> LabBoard:
        ways = [
            name
            for name, used in (
                ("emulated", self.emulated),
                ("probe", self.probe is not None),
                ("ssh", self.ssh is not None),
                ("farm_board", self.farm_board is not None),
            )
            if used
        ]
        if len(ways) > 1:
            raise ValueError(f"a board is reached one way; this one names {' and '.join(ways)}")
        if self.serial is not None and self.probe is None:
            raise ValueError("'serial' belongs with 'probe' (the UART of a probe-flashed board)")
        if not ways and not _is_this_machine(self.target):
            raise ValueError(
                "say how the board is reached: emulated: true, probe (+ serial), ssh or farm_board"
            )
        return self

    @property
    def reach(self) -> Reach:
        if self.emulated:
            return Reach.EMULATED
        if self.probe is not None:
            return Reach.PROBE
        if self.ssh is not None:
            return Reach.SSH
        if self.farm_board is not None:
            return Reach.FARM
        return Reach.HOST

    @property
    def backend(self) -> str:
        """The deploy backend this board is reached with."""
        if self.reach is Reach.SSH:
            return "ssh_docker" if self.ssh is not None and self.ssh.docker_image else "ssh"
        if self.reach is Reach.FARM:
            return "api"
        return "local"

    def deploy_options(self, farm: FarmSpec | None = None) -> dict[str, Any]:
        """``DeployConfig`` keyword arguments that reach this board (no secrets).

        A serial port given by USB serial number is resolved against the ports attached
        now (``resolve_serial_port``).
        """
        options: dict[str, Any] = {"target": self.target, "backend": self.backend}
        if self.probe is not None:
            options["probe_unique_id"] = self.probe.unique_id
            options["flash_method"] = self.probe.flash_method.value
            if self.probe.pyocd_target:
                options["pyocd_target"] = self.probe.pyocd_target
        if self.serial is not None:
            options["serial_port"] = resolve_serial_port(self.serial, board=self.name)
            if self.serial.baudrate:
                options["serial_baudrate"] = self.serial.baudrate
        if self.ssh is not None:
            ssh = self.ssh
            options["ssh_host"] = ssh.host
            for key, value in (
                ("ssh_user", ssh.user),
                ("ssh_port", ssh.port),
                ("ssh_key_path", ssh.key_path.expanduser() if ssh.key_path else None),
                (
                    "ssh_known_hosts_path",
                    ssh.known_hosts_path.expanduser() if ssh.known_hosts_path else None,
                ),
                ("ssh_remote_workdir", ssh.remote_workdir),
                ("docker_image", ssh.docker_image),
            ):
                if value is not None:
                    options[key] = value
            options["sbc_board_name"] = self.name
        if self.farm_board is not None:
            if farm is None:
                raise LabError(
                    f"board {self.name!r} names farm_board {self.farm_board!r} but the lab has no "
                    "'farm' section",
                    hint="Add farm: {url: http://HOST:PORT/api, username: NAME} to the lab file.",
                )
            options["api_url"] = farm.url
            options["api_board_name"] = self.farm_board
            options["api_poll_interval"] = farm.poll_interval
            if farm.username:
                options["api_username"] = farm.username
        return options


class LabMap(_Model):
    """A whole lab file."""

    version: Literal[1] = 1
    name: str | None = None
    farm: FarmSpec | None = None
    boards: tuple[LabBoard, ...] = ()
    source: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _unique_names(self) -> LabMap:
        seen: set[str] = set()
        for board in self.boards:
            if board.name in seen:
                raise ValueError(f"board {board.name!r} is named twice")
            seen.add(board.name)
        return self

    def board(self, name: str) -> LabBoard:
        """The board called ``name``; a ``LabError`` listing the lab's boards otherwise."""
        for board in self.boards:
            if board.name == name:
                return board
        import difflib

        names = [b.name for b in self.boards]
        close = difflib.get_close_matches(name, names, n=1)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        raise LabError(
            f"no board {name!r} in the lab{f' ({self.source})' if self.source else ''}.{guess}",
            hint=f"Boards: {', '.join(names) or '(none)'}.",
        )

    def boards_for(self, target: str) -> tuple[LabBoard, ...]:
        """Every board of the lab whose target is ``target``."""
        return tuple(b for b in self.boards if b.target == target)

    def deploy_options(self, board: str) -> dict[str, Any]:
        return self.board(board).deploy_options(self.farm)

    def to_yaml(self) -> str:
        """The lab as YAML, in the shape ``load_lab`` reads (boards keyed by name)."""
        data: dict[str, Any] = {"version": self.version}
        if self.name:
            data["name"] = self.name
        if self.farm is not None:
            data["farm"] = self.farm.model_dump(mode="json", exclude_defaults=True)
        data["boards"] = {
            b.name: b.model_dump(mode="json", exclude={"name"}, exclude_defaults=True)
            for b in self.boards
        }
        return yaml.safe_dump(data, sort_keys=False)


def parse_lab(data: Any, source: Path | None = None) -> LabMap:
    """Validate lab data already read from YAML (``boards`` is a mapping name -> board)."""
    where = str(source) if source is not None else "lab"
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LabError(
            f"{where}: expected a mapping with 'boards', got {type(data).__name__}",
            hint="See aidge_deploy.lab for the format.",
        )
    raw = dict(data)
    boards = raw.get("boards", {})
    if boards is None:
        boards = {}
    if not isinstance(boards, dict):
        raise LabError(
            f"{where}: 'boards' must map board names to their settings",
            hint="boards:\n  my-board: {target: mps2-an386, emulated: true}",
        )
    entries = []
    for name, spec in boards.items():
        if not isinstance(spec, dict):
            raise LabError(
                f"{where}: boards.{name}: expected a mapping, got {type(spec).__name__}",
                hint="e.g. {target: mps2-an386, emulated: true}",
            )
        entries.append({"name": str(name), **spec})
    raw["boards"] = entries
    try:
        return LabMap.model_validate({**raw, "source": source})
    except ValidationError as exc:
        raise LabError(
            f"{where}: {_describe(exc, entries)}",
            hint="See aidge_deploy.lab for the format (`aidge-deploy boards scan` writes one).",
        ) from None


def load_lab(path: str | Path) -> LabMap:
    """Read and validate a lab file."""
    from aidge_deploy.yamlfile import read_yaml

    file = Path(path).expanduser()
    data = read_yaml(
        file,
        "lab file",
        LabError,
        "`aidge-deploy boards scan --write lab.yaml` writes one for this machine.",
    )
    return parse_lab(data, source=file)


def _describe(exc: ValidationError, entries: list[dict[str, Any]]) -> str:
    parts = []
    for err in exc.errors():
        loc = list(err["loc"])
        # boards are a list internally: show them by name, as the file writes them
        if len(loc) >= 2 and loc[0] == "boards" and isinstance(loc[1], int):
            loc[1] = entries[loc[1]].get("name", loc[1])
        path = ".".join(str(p) for p in loc) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{path}: {msg}")
    return "; ".join(parts)


def resolve_serial_port(spec: SerialSpec, board: str = "") -> str:
    """The device path of a board's UART.

    A ``port`` is used as given (``/dev/serial/by-id/...`` is stable). A
    ``usb_serial_number`` is matched against the ports attached now (pyserial's
    ``list_ports``): several interfaces of one adapter are ordered by interface name and
    the first is taken; no match is a ``LabError`` listing what is attached.
    """
    if spec.port is not None:
        return spec.port
    from serial.tools import list_ports

    ports = sorted(
        (p for p in list_ports.comports() if p.serial_number == spec.usb_serial_number),
        key=lambda p: (p.location or "", p.device),
    )
    if ports:
        return str(ports[0].device)
    attached = [f"{p.device} (sn {p.serial_number})" for p in list_ports.comports()]
    raise LabError(
        f"board {board!r}: no serial port with USB serial number {spec.usb_serial_number!r} "
        "is attached",
        hint=f"Attached: {', '.join(attached) or 'no serial ports'}. "
        "`aidge-deploy boards scan` lists probes and ports.",
    )


__all__ = [
    "FarmSpec",
    "FlashMethod",
    "LabBoard",
    "LabError",
    "LabMap",
    "ProbeSpec",
    "Reach",
    "SerialSpec",
    "SshSpec",
    "load_lab",
    "parse_lab",
    "resolve_serial_port",
]
