"""Session facts of a deployment: where to build, how to reach the board, what to measure.

``DeployConfig`` is the dataclass of the deploy guide, mutable on purpose: the published
``aidge_export_arm_cortexm.benchmark_helpers.execution.run`` sets ``api_url`` and friends on
it after construction. ``BenchmarkConfig`` and ``ValidationConfig`` *are* the ``aidge_core``
classes (callers pass those, and set ``mode=`` on them), re-exported here under the names
the published packages import — on first access (PEP 562), so that a deploy which is given
none (``run``, ``profile``) never pays for importing ``aidge_core``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy.backendoptions import (
    BackendOptions,
    DockerOptions,
    FarmCampaign,
    FarmOptions,
    FlashOptions,
    QemuOptions,
    SerialOptions,
    SshOptions,
)
from aidge_deploy.defaults import DEFAULT_RUN_TIMEOUT_S
from aidge_deploy.errors import ConfigError

if TYPE_CHECKING:
    from aidge_core.export_utils.config import BenchmarkConfig, ValidationConfig

#: the ``aidge_core`` classes re-exported here, imported when first asked for
_AIDGE_CONFIGS = ("BenchmarkConfig", "ValidationConfig")


def __getattr__(name: str) -> Any:
    if name in _AIDGE_CONFIGS:
        from aidge_core.export_utils import config as aidge_config

        value = getattr(aidge_config, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Backend(StrEnum):
    """How the target is reached (the second dimension of the deploy registry key)."""

    LOCAL = "local"
    SSH = "ssh"
    SSH_DOCKER = "ssh_docker"
    API = "api"


class TimingMode(StrEnum):
    """What an emulated board's time is: the core's timing model, or one cycle per instruction."""

    MODEL = "model"
    CPI1 = "cpi1"


class Aggregation(StrEnum):
    """How per-iteration samples are reduced to one figure."""

    MEDIAN = "median"
    MEAN = "mean"
    TRIMMED = "trimmed"


#: Fields whose values are secrets: masked in repr() and left out of every snapshot.
SECRET_FIELDS = frozenset({"api_password"})

#: ``extra`` keys that were a backend's own options, and the record that has them now
_FORMER_EXTRA = {"ssh_settings": "SshOptions", "docker_build": "DockerOptions"}


class _Shown(str):
    def __repr__(self) -> str:
        return str(self)


def _own_repr(record: BackendOptions) -> _Shown:
    own = ", ".join(f"{k}={v!r}" for k, v in record.own_values().items())
    return _Shown(f"{type(record).__name__}({own})")


def _field_of(record: BackendOptions, alias: str) -> str:
    """The record's field the guide field ``alias`` spells."""
    return next(name for name, spelled in record.ALIASES.items() if spelled == alias)


#: ``ConnectionConfig`` attribute -> ``DeployConfig`` field, where the names differ.
_CONNECTION_ALIASES = {"sbc_docker_image": "docker_image"}


def _normalize_backend(value: object) -> str:
    if value is None:
        return Backend.LOCAL.value
    kind = getattr(value, "kind", value)
    if not isinstance(kind, str) or not kind:
        raise ConfigError(
            f"Unsupported backend {value!r}",
            hint=f"Use one of: {', '.join(b.value for b in Backend)} (or an object with .kind).",
        )
    return kind.strip().lower()


@dataclass(repr=False)
class DeployConfig:
    """Everything ``deploy()`` needs besides the export itself.

    ``backend`` accepts a string, ``None`` (local) or an object with ``.kind`` (the
    exporter's ``TargetBackend``); it is normalised to the backend name, and the serial,
    probe and API settings such an object carries fill the fields left unset.

    The ``ssh_*``, ``api_*``, ``docker_*``, flash and serial fields are the guide's spelling
    of each backend's own options; the backends read them as typed records (``ssh``,
    ``farm``, ``docker``, ``flash``, ``serial``: ``aidge_deploy.backendoptions``).
    """

    target: str | None = None
    backend: Any = Backend.LOCAL.value
    build_dir: Path | None = None
    #: keep what a run would remove: the private folder of a failed local build (a build
    #: that succeeds becomes its cache entry, or is in ``build_dir``, and stays anyway), and
    #: the export and build folders on an SSH board
    keep_build_dir: bool = False

    # Board-farm API backend
    api_url: str | None = None
    api_username: str | None = None
    api_password: str | None = None
    api_board_name: str | None = None
    api_poll_interval: float = FarmOptions.poll_interval
    api_request_timeout: float = FarmOptions.request_timeout

    # SSH / SBC backend
    ssh_host: str | None = None
    ssh_user: str | None = None
    ssh_port: int | None = None
    ssh_key_path: Path | None = None
    ssh_known_hosts_path: Path | None = None
    ssh_remote_workdir: str | None = None
    sbc_max_runtime_seconds: float | None = None
    #: the logical name of the SSH board (a lab file's board name): it names the board in
    #: messages and in its run record (``remote.json``); only for ssh / ssh_docker
    sbc_board_name: str | None = None
    #: build on the host with a cross toolchain and upload only the binary (ssh backend)
    cross_compile: bool = False

    # Serial / UART
    serial_port: str | None = None
    serial_baudrate: int | None = None
    uart_timeout: float | None = None
    uart_capture_duration: float | None = None
    uart_log_filename: str | None = None
    end_keyword: str | None = None

    # Flashing & Docker
    docker_image: str | None = None
    #: the published SSH runners' shell command that runs the program on the board; refused
    #: (``check_values``): aidge-deploy runs the built program itself, under a timeout and
    #: its peak-RSS and counter launcher, which a command of the user's would bypass
    run_command: str | None = None
    flash_method: str | None = None
    #: options of the flash method's own (``--flash-option KEY=VALUE``): each flasher
    #: declares, types and checks its own (``aidge-deploy docs`` lists them); a list of
    #: ``"KEY=VALUE"`` strings is accepted too
    flash_options: dict[str, Any] = field(default_factory=dict)
    probe_unique_id: str | None = None
    pyocd_target: str | None = None

    # Heterogeneous execution: the exporters' CLI surface. What runs is the manifest's
    # ``application_config.heterogeneous_deploy`` (a program per core: mps2-an521, ake7);
    # the Cortex-A32 Linux image of ``apss_linux`` is not built here: True is refused
    # (``check_values``), so a partial deploy of an APSS export never passes silently.
    heterogeneous_deploy: bool = False
    apss_linux: bool = False
    #: where the APSS Linux build lives; read only by ``apss_linux`` deployments (refused),
    #: as in the published exporter, whose CLI fills it from AIDGE_ALIF_APSS_YOCTO_ROOT
    apss_yocto_root: str | None = None

    # Sub-configurations (the aidge_core dataclasses)
    validation: ValidationConfig | None = None
    benchmark: BenchmarkConfig | None = None

    # Execution and measurement
    run_timeout: float = DEFAULT_RUN_TIMEOUT_S
    build_jobs: int | None = None
    report_dir: Path | None = None
    #: replace an earlier result bundle at ``report_dir`` (else the run refuses to start)
    report_overwrite: bool = False
    counters: tuple[str, ...] = ()
    #: cap the counters per pass (each counter then takes a slot): reproduces the pass plan
    #: of a smaller PMU, e.g. to check a multi-pass profile on an emulated board first
    max_counters_per_pass: int | None = None
    aggregation: Aggregation = Aggregation.MEDIAN
    #: an emulated board's time: its core's timing model ("model": estimated cycles ÷ the
    #: core clock) or one cycle per instruction ("cpi1", the figure of older bundles)
    timing: TimingMode = TimingMode.MODEL
    #: power monitor (``power.source``): joulescope[:SERIAL], jls:FILE, hwmon[:NAME], rapl,
    #: emulated or reference; None = no power run
    power: str | None = None
    #: minimum gated window in seconds (default per monitor: 5 s sampled, 10 ms models)
    power_window_s: float | None = None
    #: where sysfs is mounted for hwmon/rapl (default /sys; on an SSH board, its path there)
    power_sysfs_root: Path | None = None
    #: inferences inside a ``jls:`` capture's window (else the file's own annotation); the
    #: tool never assumes its own N for a capture it did not run
    power_inferences: int | None = None
    #: the gate detector's limits (s): shortest pulse, longest dropout bridged (default:
    #: from the planned window and the gate's sample rate, ``power/gate.py``)
    power_gate_min_pulse_s: float | None = None
    power_gate_max_dropout_s: float | None = None
    #: the backends' own options that no guide field spells, as their records (one per
    #: kind: ``SshOptions(connect_attempts=1)``, ``QemuOptions(binary=...)``); a record's
    #: guide fields given here are set as those fields
    backend_options: tuple[BackendOptions, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._adopt_backend_options()
        raw = self.backend
        self.backend = _normalize_backend(raw)
        if raw is not None and not isinstance(raw, str):
            self._adopt_backend_object(raw)
        for name in (
            "build_dir",
            "ssh_key_path",
            "ssh_known_hosts_path",
            "report_dir",
            "power_sysfs_root",
        ):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                setattr(self, name, Path(value))
        self.aggregation = Aggregation(self.aggregation)
        try:
            self.timing = TimingMode(self.timing)
        except ValueError:
            raise ConfigError(
                f"Unknown timing {self.timing!r}",
                hint="--timing model (the core's timing model) or cpi1 (one cycle per "
                "instruction).",
            ) from None
        if self.power is not None:
            self.power = _power_spelling(self.power)
        if self.power_window_s is not None and not self.power_window_s > 0:
            raise ConfigError(
                f"power_window_s must be positive, got {self.power_window_s}",
                hint="A minimum power window in seconds, e.g. 5.",
            )
        self._check_power_capture_values()
        if not isinstance(self.flash_options, dict):
            self.flash_options = _key_values(self.flash_options, "--flash-option")
        if isinstance(self.counters, str):
            self.counters = tuple(c for c in self.counters.split(",") if c)
        else:
            self.counters = tuple(self.counters)

    def _adopt_backend_options(self) -> None:
        """Keep each record's own options; set its guide fields as the config's (a value
        the config already has otherwise is a conflict, refused)."""
        for key, record in _FORMER_EXTRA.items():
            if key in self.extra:
                raise ConfigError(
                    f"extra[{key!r}] is no longer read: it is {record}'s own options",
                    hint=f"DeployConfig(backend_options=({record}(...),)) or "
                    f"config.with_options({record}(...)) (docs/targets.md lists them).",
                )
        given: Any = self.backend_options
        records: tuple[Any, ...] = (given,) if isinstance(given, BackendOptions) else tuple(given)
        kept: dict[type, BackendOptions] = {}
        seen: set[type] = set()
        defaults = {f.name: f.default for f in dataclasses.fields(DeployConfig)}
        for record in records:
            if not isinstance(record, BackendOptions):
                raise ConfigError(
                    f"backend_options holds {record!r}, not a backend's options record",
                    hint="Give records of aidge_deploy.backendoptions (SshOptions(...), ...).",
                )
            if type(record) in seen:
                raise ConfigError(
                    f"backend_options holds two {type(record).__name__} records",
                    hint="Give one record per backend's options (merge them).",
                )
            seen.add(type(record))
            for alias, value in record.guide_fields().items():
                if value == getattr(type(record)(), _field_of(record, alias)):
                    continue  # left at its default: the config's field decides
                current = getattr(self, alias)
                if current not in (value, defaults.get(alias)):
                    raise ConfigError(
                        f"{type(record).__name__} sets {alias} and the config sets it otherwise",
                        hint=f"Give {alias} once: as the field or in the record.",
                    )
                setattr(self, alias, value)
            own = record.kept()
            if own is not None:
                kept[type(record)] = own
        self.backend_options = tuple(kept.values())

    def _check_power_capture_values(self) -> None:
        n = self.power_inferences
        if n is not None:
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ConfigError(
                    f"--power-inferences must be a positive whole number, got {n!r}",
                    hint="The number of inferences the capture's window holds, e.g. 1000.",
                )
            if not str(self.power or "").startswith("jls:"):
                raise ConfigError(
                    "--power-inferences is for a capture recorded elsewhere (--power jls:FILE)",
                    hint="With other monitors the tool runs the window and knows its N.",
                )
        for name, value in (
            ("power_gate_min_pulse_s", self.power_gate_min_pulse_s),
            ("power_gate_max_dropout_s", self.power_gate_max_dropout_s),
        ):
            bad = isinstance(value, bool) or not isinstance(value, int | float)
            if value is not None and (bad or not math.isfinite(value) or value < 0):
                raise ConfigError(
                    f"{name} must be a finite number of seconds (>= 0), got {value!r}",
                    hint="e.g. 50e-6 for the minimum pulse, 1e-3 for the longest dropout.",
                )
        if self.power_gate_min_pulse_s == 0:
            raise ConfigError(
                "power_gate_min_pulse_s must be positive, got 0",
                hint="e.g. 50e-6 (a level held shorter than this is a glitch).",
            )

    def _adopt_backend_object(self, obj: object) -> None:
        pairs = {
            "serial_port": "serial_port",
            "baudrate": "serial_baudrate",
            "probe_unique_id": "probe_unique_id",
            "pyocd_target": "pyocd_target",
        }
        for src, dst in pairs.items():
            value = getattr(obj, src, None)
            if value is not None and getattr(self, dst) is None:
                setattr(self, dst, value)
        api = getattr(obj, "api_config", None)
        if api is not None:
            for src, dst in (
                ("base_url", "api_url"),
                ("username", "api_username"),
                ("password", "api_password"),
                ("board_name", "api_board_name"),
            ):
                value = getattr(api, src, None)
                if value is not None and getattr(self, dst) is None:
                    setattr(self, dst, value)

    def check_values(self) -> None:
        """Raise ``ConfigError`` for a value no run can use (before anything is built).

        Timeouts must be finite and positive (``nan`` or ``inf`` would run forever, or fail
        only once the run is over); counts and ports must be in range.
        """
        seconds = {
            "run_timeout": ("--timeout", self.run_timeout),
            "ssh_connect_timeout": ("--ssh-connect-timeout", self.ssh.connect_timeout),
            "SshOptions.command_timeout": (None, self.ssh.command_timeout),
            "SshOptions.transfer_timeout": (None, self.ssh.transfer_timeout),
            "api_job_timeout": ("--api-job-timeout", self.farm.job_timeout),
            "uart_timeout": ("--uart-timeout", self.uart_timeout),
            "uart_capture_duration": ("--uart-capture-duration", self.uart_capture_duration),
            "sbc_max_runtime_seconds": (None, self.sbc_max_runtime_seconds),
            "api_poll_interval": (None, self.api_poll_interval),
            "api_request_timeout": (None, self.api_request_timeout),
        }
        for name, (option, value) in seconds.items():
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(
                    f"{option or name} must be a number of seconds, got {value!r}",
                    hint="e.g. 120",
                )
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(
                    f"{option or name} must be a positive, finite number of seconds, got {value!r}",
                    hint=f"e.g. {option or name}{' ' if option else '='}120",
                )
        counts = {
            "max_counters_per_pass": ("--max-counters-per-pass", self.max_counters_per_pass, 1),
            "build_jobs": (None, self.build_jobs, 1),
            "serial_baudrate": ("--serial-baudrate", self.serial_baudrate, 1),
        }
        for name, (option, value, low) in counts.items():
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < low
            ):
                raise ConfigError(
                    f"{option or name} must be an integer of at least {low}, got {value!r}",
                    hint=f"e.g. {option or name}{' ' if option else '='}{max(low, 4)}",
                )
        self._check_unsupported()
        if self.build_dir is not None and self.build_dir.exists() and not self.build_dir.is_dir():
            raise ConfigError(
                f"--build-dir {self.build_dir} is a file, not a folder",
                hint="Pass a folder to build in (it is created if missing), or leave --build-dir "
                "out to build in the cache.",
            )
        if self.ssh_port is not None and (
            isinstance(self.ssh_port, bool)
            or not isinstance(self.ssh_port, int)
            or not 1 <= self.ssh_port <= 65535
        ):
            raise ConfigError(
                f"--ssh-port must be a TCP port (1-65535), got {self.ssh_port!r}",
                hint="e.g. --ssh-port 22",
            )

    def _check_unsupported(self) -> None:
        """Fields of the exporters' CLI that this deploy cannot honour: refused, with why."""
        if self.run_command:
            raise ConfigError(
                f"run_command {self.run_command!r} is not supported: aidge-deploy runs the "
                "export's program itself, under a timeout and the launcher that measures its "
                "peak RSS and counters, which a command of your own would bypass",
                hint="Drop run_command; put what it did in the export or the Docker image "
                "(--docker-image) the program runs in.",
            )
        if self.apss_linux:
            raise ConfigError(
                "apss_linux is not supported: aidge-deploy builds no Cortex-A32 Linux image; "
                "an APSS Linux ake7 deployment would run only its M55 part",
                hint="Deploy without apss_linux (heterogeneous_deploy runs both M55 cores).",
            )

    @property
    def backend_kind(self) -> str:
        """The backend name (``self.backend`` is normalised to it, even after mutation)."""
        return _normalize_backend(self.backend)

    @property
    def end_markers(self) -> tuple[str, ...]:
        """``end_keyword`` split on ``|`` (the CLI documents pipe-separated markers)."""
        return self.serial.end_markers

    @property
    def ssh(self) -> SshOptions:
        """The SSH backends' options (``ssh``, ``ssh_docker``)."""
        return SshOptions.of(self)

    @property
    def docker(self) -> DockerOptions:
        """The container's options (``ssh_docker``, a build in Docker)."""
        return DockerOptions.of(self)

    @property
    def farm(self) -> FarmOptions:
        """The farm API backend's options (``api``)."""
        return FarmOptions.of(self)

    @property
    def flash(self) -> FlashOptions:
        """The probe's flasher and its own options."""
        return FlashOptions.of(self)

    @property
    def serial(self) -> SerialOptions:
        """The UART of a bare-metal board."""
        return SerialOptions.of(self)

    @property
    def qemu(self) -> QemuOptions:
        """The emulator of an emulated board."""
        return QemuOptions.of(self)

    def with_options(self, *records: BackendOptions) -> DeployConfig:
        """A copy of this config with each record's options set: its guide fields, and its
        own options in place of the config's record of that kind."""
        values: dict[str, Any] = {}
        replaced = {type(r) for r in records}
        kept = [r for r in self.backend_options if type(r) not in replaced]
        for record in records:
            values.update(record.guide_fields())
            own = record.kept()
            if own is not None:
                kept.append(own)
        return dataclasses.replace(self, **values, backend_options=tuple(kept))

    @classmethod
    def from_connection_config(
        cls,
        conn_cfg: object | None,
        target: str | None = None,
        validation: ValidationConfig | None = None,
        benchmark: BenchmarkConfig | None = None,
    ) -> DeployConfig:
        """Build a config from the exporters' ``ConnectionConfig`` argparse namespace.

        ``conn_cfg`` may be ``None`` (the default of every firmware compilation) or a
        namespace that lacks some attributes; absent or ``None`` values keep our defaults.
        """
        values: dict[str, Any] = {}
        names = {f.name for f in dataclasses.fields(cls)}
        if conn_cfg is not None:
            for attr in list(names) + list(_CONNECTION_ALIASES):
                value = getattr(conn_cfg, attr, None)
                if value is None:
                    continue
                dst = _CONNECTION_ALIASES.get(attr, attr)
                if dst in ("validation", "benchmark", "target"):
                    continue
                if dst == "docker_image" and dst in values:
                    continue
                values[dst] = value
            for attr in ("api_poll_interval", "api_request_timeout"):
                if getattr(conn_cfg, attr, None) is not None:
                    values[attr] = float(getattr(conn_cfg, attr))
        return cls(target=target, validation=validation, benchmark=benchmark, **values)

    def snapshot(self) -> dict[str, Any]:
        """A JSON-safe view of the config with every secret left out (for run metadata)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in SECRET_FIELDS:
                out[f.name] = "***" if getattr(self, f.name) else None
                continue
            value = getattr(self, f.name)
            if f.name == "validation" and value is not None:
                value = {
                    "nb_validation_iterations": value.nb_validation_iterations,
                    "inference_type": value.inference_type,
                    "validation_on_target": value.validation_on_target,
                    "nb_samples": len(value.samples or []),
                }
            elif f.name == "benchmark" and value is not None:
                value = dataclasses.asdict(value)
            elif f.name == "backend_options":
                value = {type(r).__name__: r.own_values() for r in value}
            out[f.name] = _json_safe(value)
        return out

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or value == f.default or value in ({}, ()):
                continue
            shown = "'***'" if f.name in SECRET_FIELDS else repr(value)
            if f.name == "backend_options":  # their own options only, as they are kept
                shown = repr(tuple(_own_repr(r) for r in value))
            parts.append(f"{f.name}={shown}")
        return f"DeployConfig({', '.join(parts)})"


def _power_spelling(value: object) -> str:
    """``--power`` as the monitors' registry spells it (``NAME`` lower case, ``:ARG`` as
    given): whether ``NAME`` is a registered monitor and takes ``ARG`` is checked with the
    run (``configcheck``), where the registry is."""
    name, sep, argument = str(value).strip().partition(":")
    return f"{name.strip().lower()}{sep}{argument.strip()}"


def _key_values(items: Any, option: str) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; ``ConfigError`` for an item without ``=``."""
    out: dict[str, str] = {}
    for item in [items] if isinstance(items, str) else list(items):
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"{option} {item!r} is not KEY=VALUE", hint=f"e.g. {option} interface=SWD"
            )
        out[key.strip()] = value.strip()
    return out


def _json_safe(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, FarmCampaign):
        return dataclasses.asdict(value)
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


__all__ = [
    "Aggregation",
    "Backend",
    "BenchmarkConfig",
    "DeployConfig",
    "FarmCampaign",
    "TimingMode",
    "ValidationConfig",
]
