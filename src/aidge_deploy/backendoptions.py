"""Each backend's own options, typed: how a board is reached, apart from what is run on it.

Why this module exists: the deploy guide spells a backend's options as flat
``DeployConfig`` fields (``ssh_host``, ``api_url``, ``docker_image``, ``flash_method``,
``serial_port``...), and the published exporters set those after construction, so they
stay there as the accepted spelling. But a backend reads only its own, as one record:
``config.ssh`` is an ``SshOptions``, ``config.farm`` a ``FarmOptions``, and so on. Each
record names the guide's field behind each of its own (``ALIASES``), so the spelling is
declared once; the backends declare the records they read (``DeployTarget.options``), and
``aidge-deploy docs`` lists them per backend. A caller with records in hand sets them all
at once: ``config.with_options(SshOptions(host="pi"), DockerOptions(image="img"))``.

A record's fields that no guide field spells (``SshOptions.connect_attempts``,
``DockerOptions.build``, ``QemuOptions.binary``) are its own: they live in the record
itself, kept by the config (``DeployConfig.backend_options``), never in ``extra``.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Self, Union, get_args, get_origin, get_type_hints

from aidge_deploy.errors import ConfigError


@dataclass(frozen=True)
class FarmCampaign:
    """The campaign a farm job belongs to (``aidge-deploy campaign``), for the farm's
    dashboard: its progress page groups the campaign's farm cells, by ``id``."""

    #: the campaign run's id (its name and folder, hashed: two runs of one folder share it)
    id: str
    name: str
    #: the cell (model, target, options) this job is
    cell: str
    #: how many of the campaign's cells run on this farm
    cells: int
    #: this job is step ``step`` of the cell's ``steps`` farm jobs (its run, then its
    #: accuracy run on the labelled set): the cell is finished when its last step is
    step: int = 1
    steps: int = 1


@dataclass(frozen=True)
class BackendOptions:
    """The options one backend owns; ``ALIASES`` maps each field to the guide's
    ``DeployConfig`` field that spells it."""

    #: what the options are for, as ``docs`` lists them
    TITLE: ClassVar[str] = ""
    #: record field -> the ``DeployConfig`` field of the deploy guide
    ALIASES: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def of(cls, config: Any) -> Self:
        """The record of ``config``: its guide fields, and the own options it keeps."""
        kept = next((r for r in config.backend_options if type(r) is cls), None)
        own = {name: getattr(kept, name) for name in cls.own_fields()} if kept else {}
        return cls(**{name: getattr(config, alias) for name, alias in cls.ALIASES.items()}, **own)

    @classmethod
    def own_fields(cls) -> tuple[str, ...]:
        """The fields no guide field spells: kept in the record itself."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in cls.ALIASES)

    def guide_fields(self) -> dict[str, Any]:
        """The record as the guide's ``DeployConfig`` fields (what ``with_options`` sets)."""
        return {alias: getattr(self, name) for name, alias in self.ALIASES.items()}

    def own_values(self) -> dict[str, Any]:
        """The own options set to something other than their default."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in self.ALIASES and getattr(self, f.name) != _default(f)
        }

    def kept(self) -> Self | None:
        """The record as a config keeps it: its own options only (None when all are
        defaults); the guide fields are the config's."""
        own = self.own_values()
        return type(self)(**own) if own else None


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def with_own(
    records: tuple[BackendOptions, ...], kind: type[BackendOptions], **values: Any
) -> tuple[BackendOptions, ...]:
    """``records`` with own options ``values`` set on the record of ``kind`` (made when
    there is none): how a caller adds one option to a config's ``backend_options``."""
    own = set(kind.own_fields())
    if not set(values) <= own:
        raise ConfigError(
            f"{kind.__name__} has no own option {sorted(set(values) - own)}",
            hint=f"Its own options: {', '.join(sorted(own))}.",
        )
    current = next((r for r in records if type(r) is kind), None)
    record = dataclasses.replace(current, **values) if current else kind(**values)
    return (*(r for r in records if type(r) is not kind), record)


def doc(text: str) -> dict[str, str]:
    """A field's ``metadata``: what it is, as ``docs`` lists it."""
    return {"doc": text}


def is_union(kind: object) -> bool:
    """``kind`` is ``A | B`` (or ``Optional[A]``)."""
    return get_origin(kind) in (Union, types.UnionType)


def option_rows(options: type) -> list[tuple[str, str, str]]:
    """(field, type and default, what it is) of each field of the dataclass ``options``
    (a backend's record, a flasher's ``Options``), for the generated docs."""
    rows = []
    hints = get_type_hints(options)
    for f in dataclasses.fields(options):
        kind = hints[f.name]
        parts = get_args(kind) if is_union(kind) else (kind,)
        text = " | ".join(getattr(a, "__name__", str(a)) for a in parts)
        text = text.replace("NoneType", "None")
        default = "" if f.default is dataclasses.MISSING else f" = {f.default!r}"
        rows.append((f.name, f"{text}{default}", str(f.metadata.get("doc", ""))))
    return rows


def _aliases(prefix: str, names: str, **renamed: str) -> dict[str, str]:
    out = {name: f"{prefix}{name}" for name in names.split()}
    out.update(renamed)
    return out


@dataclass(frozen=True)
class SshOptions(BackendOptions):
    """A Linux board over SSH (``ssh``, ``ssh_docker``): where it is, how it is trusted."""

    TITLE: ClassVar[str] = "the Linux board over SSH"
    ALIASES: ClassVar[Mapping[str, str]] = _aliases(
        "ssh_",
        "host user port key_path known_hosts_path remote_workdir",
        max_runtime_seconds="sbc_max_runtime_seconds",
        board_name="sbc_board_name",
        cross_compile="cross_compile",
    )

    host: str | None = field(default=None, metadata=doc("address or ~/.ssh/config Host"))
    user: str | None = field(default=None, metadata=doc("login (default: ssh_config's)"))
    port: int | None = field(default=None, metadata=doc("TCP port (default: ssh_config's, 22)"))
    key_path: Path | None = field(default=None, metadata=doc("private key file"))
    known_hosts_path: Path | None = field(
        default=None, metadata=doc("known_hosts checked (default ~/.ssh/known_hosts)")
    )
    remote_workdir: str | None = field(
        default=None, metadata=doc("folder on the board the export goes to (default: per run)")
    )
    trust_on_first_use: bool = field(
        default=False, metadata=doc("record an unknown host key instead of refusing it")
    )
    connect_timeout: float = field(
        default=10.0, metadata=doc("one connection attempt (TCP, handshake, login), s")
    )
    max_runtime_seconds: float | None = field(
        default=None, metadata=doc("the program's limit on the board, s (default: the run's)")
    )
    board_name: str | None = field(
        default=None, metadata=doc("the board's logical name (a lab file's), in messages")
    )
    cross_compile: bool = field(
        default=False, metadata=doc("build here with a cross toolchain, upload the binary")
    )
    # its own options (no guide field)
    config_path: Path | None = field(
        default=Path("~/.ssh/config"),
        metadata=doc("the ssh_config file applied when it exists (None: none)"),
    )
    allow_agent: bool = field(default=True, metadata=doc("use the SSH agent's keys"))
    connect_attempts: int = field(
        default=3, metadata=doc("connection attempts before the run fails")
    )
    retry_backoff: float = field(
        default=0.5, metadata=doc("first wait between attempts, doubled each time, s")
    )
    keepalive_interval: float = field(
        default=15.0, metadata=doc("keepalive period of the connection, s (0: none)")
    )
    keepalive_count_max: int = field(
        default=3, metadata=doc("unanswered keepalives before the connection is dropped")
    )
    command_timeout: float = field(
        default=600.0, metadata=doc("default limit of one command on the board, s")
    )
    transfer_timeout: float = field(default=600.0, metadata=doc("limit of one upload, s"))
    kill_after: float = field(
        default=5.0, metadata=doc("grace before a timed-out program is killed, s")
    )


class DockerBuildChoice(StrEnum):
    """Who builds when the run happens in a container (``DockerOptions.build``)."""

    AUTO = "auto"  # in the container when the image has cmake and a C++ compiler
    CONTAINER = "container"
    OUTSIDE = "outside"  # on the board's OS (or this machine), then run in the container


@dataclass(frozen=True)
class DockerOptions(BackendOptions):
    """The container the program is built and run in (``ssh_docker``; a host build)."""

    TITLE: ClassVar[str] = "the container the export is built and run in"
    ALIASES: ClassVar[Mapping[str, str]] = _aliases("docker_", "image")

    image: str | None = field(default=None, metadata=doc("the image (with its toolchain)"))
    pull: bool = field(default=False, metadata=doc("pull the image when it is not present"))
    build: DockerBuildChoice = field(
        default=DockerBuildChoice.AUTO,
        metadata=doc("build in the container, outside it, or auto (the image has the tools)"),
    )

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "build", DockerBuildChoice(str(self.build).lower()))
        except ValueError:
            raise ConfigError(
                f"Unknown Docker build location {self.build!r}",
                hint=f"--docker-build {' | '.join(c.value for c in DockerBuildChoice)}.",
            ) from None


@dataclass(frozen=True)
class FarmOptions(BackendOptions):
    """The board farm's API (``api``): where it is, who asks, which board, how long."""

    TITLE: ClassVar[str] = "the board farm's API"
    ALIASES: ClassVar[Mapping[str, str]] = _aliases(
        "api_",
        "username password board_name poll_interval request_timeout",
        url="api_url",
    )

    url: str | None = field(default=None, metadata=doc("the farm's API, e.g. http://farm:8000/api"))
    username: str | None = field(default=None, metadata=doc("the farm user"))
    password: str | None = field(
        default=None,
        repr=False,
        metadata=doc("a secret: never shown nor recorded (AIDGE_DEPLOY_API_PASSWORD)"),
    )
    board_name: str | None = field(
        default=None, metadata=doc("a farm board by name (default: any of the target)")
    )
    poll_interval: float = field(
        default=2.0, metadata=doc("longest wait for one page of the job's events, s")
    )
    request_timeout: float = field(default=30.0, metadata=doc("one HTTP request, s"))
    job_timeout: float = field(
        default=3600.0, metadata=doc("longest wait for the job, queue included, s")
    )
    campaign: FarmCampaign | None = field(
        default=None, metadata=doc("the campaign the job is a cell of (set by campaign)")
    )


@dataclass(frozen=True)
class FlashOptions(BackendOptions):
    """How a probe's MCU is programmed: the flasher and the flasher's own options."""

    TITLE: ClassVar[str] = "the flasher of a probe's board"
    ALIASES: ClassVar[Mapping[str, str]] = {
        "method": "flash_method",
        "options": "flash_options",
        "probe_unique_id": "probe_unique_id",
        "pyocd_target": "pyocd_target",
    }

    method: str | None = field(default=None, metadata=doc("the flasher (default: the board's)"))
    options: Mapping[str, Any] = field(
        default_factory=dict, metadata=doc("the flasher's own options (docs/flashers.md)")
    )
    probe_unique_id: str | None = field(default=None, metadata=doc("which probe, by its id"))
    pyocd_target: str | None = field(
        default=None, metadata=doc("pyOCD's part name (default: the board's)")
    )


@dataclass(frozen=True)
class SerialOptions(BackendOptions):
    """The UART a bare-metal board prints on, and how long it is read."""

    TITLE: ClassVar[str] = "the board's UART"
    ALIASES: ClassVar[Mapping[str, str]] = {
        "port": "serial_port",
        "baudrate": "serial_baudrate",
        "timeout": "uart_timeout",
        "capture_duration": "uart_capture_duration",
        "log_filename": "uart_log_filename",
        "end_keyword": "end_keyword",
    }

    port: str | None = field(default=None, metadata=doc("the serial device, e.g. /dev/ttyACM0"))
    baudrate: int | None = field(default=None, metadata=doc("line speed (default 115200)"))
    timeout: float | None = field(default=None, metadata=doc("longest silence on the line, s"))
    capture_duration: float | None = field(default=None, metadata=doc("longest capture, s"))
    log_filename: str | None = field(default=None, metadata=doc("the capture's file name"))
    end_keyword: str | None = field(
        default=None, metadata=doc("line(s) that end the output, |-separated")
    )

    @property
    def end_markers(self) -> tuple[str, ...]:
        """``end_keyword`` split on ``|`` (the CLI documents pipe-separated markers)."""
        if not self.end_keyword:
            return ()
        return tuple(m.strip() for m in self.end_keyword.split("|") if m.strip())


@dataclass(frozen=True)
class QemuOptions(BackendOptions):
    """The emulator of an emulated board: which QEMU, with what more on its command line."""

    TITLE: ClassVar[str] = "the emulator of an emulated board"

    binary: str = field(
        default="qemu-system-arm",
        metadata=doc("the QEMU system emulator: a name on PATH or a path (a QEMU of your own)"),
    )
    extra_args: tuple[str, ...] = field(
        default=(),
        metadata=doc("more QEMU options, after the board's (recorded with the run)"),
    )

    def __post_init__(self) -> None:
        if not str(self.binary).strip():
            raise ConfigError("The QEMU binary is empty", hint="--qemu-binary NAME_OR_PATH.")
        if isinstance(self.extra_args, str):
            raise ConfigError(
                "QemuOptions.extra_args is a string",
                hint="Give the options as a sequence of words, e.g. ('-d', 'guest_errors').",
            )
        object.__setattr__(self, "binary", str(self.binary))
        object.__setattr__(self, "extra_args", tuple(str(a) for a in self.extra_args))


#: every record, in the order ``docs`` lists them
OPTION_RECORDS: tuple[type[BackendOptions], ...] = (
    SshOptions,
    DockerOptions,
    FarmOptions,
    FlashOptions,
    SerialOptions,
    QemuOptions,
)


def guide_field_names() -> frozenset[str]:
    """The guide's ``DeployConfig`` fields a record types (read only through the records)."""
    return frozenset(alias for record in OPTION_RECORDS for alias in record.ALIASES.values())


__all__ = [
    "OPTION_RECORDS",
    "BackendOptions",
    "DockerBuildChoice",
    "DockerOptions",
    "FarmCampaign",
    "FarmOptions",
    "FlashOptions",
    "QemuOptions",
    "SerialOptions",
    "SshOptions",
    "doc",
    "guide_field_names",
    "is_union",
    "option_rows",
    "with_own",
]
