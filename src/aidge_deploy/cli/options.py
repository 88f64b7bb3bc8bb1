"""The connection and session options ``run`` and ``profile`` share, declared once.

Names follow the exporters' ``ConnectionConfig`` flags (``--ssh-host``, ``--serial-port``, ...).
``with_connection_options`` appends them to a command's signature (typer reads
``__signature__``) and hands the command one ``connection`` dict of the values given.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from aidge_deploy.profiling.timing import help_text as timing_help

_PANEL = "Connection"
_FARM = "Board farm (--backend api)"
SHARED_OPTIONS: dict[str, tuple[Any, Any]] = {
    "backend": (
        Annotated[
            str,
            typer.Option(
                "--backend", "-b", help="local, ssh, ssh_docker or api.", rich_help_panel=_PANEL
            ),
        ],
        "local",
    ),
    "build_dir": (
        Annotated[Path | None, typer.Option(help="Build here instead of the cache.")],
        None,
    ),
    "keep_build_dir": (
        Annotated[
            bool,
            typer.Option(
                help="Keep build folders: a failed local build's, the board's (ssh, ssh_docker)."
            ),
        ],
        False,
    ),
    "report": (
        Annotated[Path | None, typer.Option(help="Write a result bundle to this folder.")],
        None,
    ),
    "overwrite": (
        Annotated[bool, typer.Option(help="Replace an earlier result bundle at --report.")],
        False,
    ),
    "counters": (
        Annotated[str | None, typer.Option(help="Comma-separated counters or group presets.")],
        None,
    ),
    "timing": (
        Annotated[
            str | None,
            typer.Option(
                "--timing",
                help=timing_help(),
                metavar="model|cpi1",
            ),
        ],
        None,
    ),
    "max_counters_per_pass": (
        Annotated[
            int | None,
            typer.Option(help="Cap counters per pass (reproduce a smaller PMU's passes)."),
        ],
        None,
    ),
    "power": (
        Annotated[
            str | None,
            typer.Option(
                "--power",
                help="Power monitor: joulescope[:SERIAL], jls:FILE, hwmon[:NAME], rapl, "
                "emulated (QEMU boards) or reference.",
                rich_help_panel="Power",
            ),
        ],
        None,
    ),
    "power_window": (
        Annotated[
            float | None,
            typer.Option(help="Minimum power window in seconds.", rich_help_panel="Power"),
        ],
        None,
    ),
    "power_sysfs_root": (
        Annotated[
            Path | None,
            typer.Option(
                help="Where sysfs is mounted for hwmon/rapl (default /sys).",
                rich_help_panel="Power",
            ),
        ],
        None,
    ),
    "power_inferences": (
        Annotated[
            int | None,
            typer.Option(
                help="Inferences inside a jls: capture's window (else its annotation).",
                rich_help_panel="Power",
            ),
        ],
        None,
    ),
    "gate_min_pulse": (
        Annotated[
            float | None,
            typer.Option(
                help="Gate detector: shortest pulse, in seconds (default from the plan).",
                rich_help_panel="Power",
            ),
        ],
        None,
    ),
    "gate_max_dropout": (
        Annotated[
            float | None,
            typer.Option(
                help="Gate detector: longest dropout bridged, in seconds (default from the plan).",
                rich_help_panel="Power",
            ),
        ],
        None,
    ),
    "ssh_host": (
        Annotated[str | None, typer.Option(envvar="AIDGE_SBC_IP", rich_help_panel=_PANEL)],
        None,
    ),
    "ssh_user": (
        Annotated[str | None, typer.Option(envvar="AIDGE_SBC_SSH_USER", rich_help_panel=_PANEL)],
        None,
    ),
    "ssh_port": (Annotated[int | None, typer.Option(rich_help_panel=_PANEL)], None),
    "ssh_key_path": (
        Annotated[
            Path | None, typer.Option(envvar="AIDGE_SBC_SSH_KEY_PATH", rich_help_panel=_PANEL)
        ],
        None,
    ),
    "ssh_known_hosts_path": (
        Annotated[
            Path | None, typer.Option(envvar="AIDGE_SBC_KNOWN_HOSTS_PATH", rich_help_panel=_PANEL)
        ],
        None,
    ),
    "ssh_remote_workdir": (Annotated[str | None, typer.Option(rich_help_panel=_PANEL)], None),
    "ssh_trust_on_first_use": (
        Annotated[
            bool,
            typer.Option(help="Accept and remember an unknown host key.", rich_help_panel=_PANEL),
        ],
        False,
    ),
    "ssh_connect_timeout": (
        Annotated[
            float | None,
            typer.Option(
                help="Longest connection attempt to the board (TCP, handshake, login), s.",
                rich_help_panel=_PANEL,
            ),
        ],
        None,
    ),
    "cross_compile": (
        Annotated[
            bool,
            typer.Option(help="ssh: build locally with a cross toolchain.", rich_help_panel=_PANEL),
        ],
        False,
    ),
    "docker_image": (
        Annotated[
            str | None, typer.Option("--docker-image", "--sbc-docker-image", rich_help_panel=_PANEL)
        ],
        None,
    ),
    "docker_pull": (
        Annotated[
            bool,
            typer.Option(
                help="Pull --docker-image when it is not on the machine that runs it.",
                rich_help_panel=_PANEL,
            ),
        ],
        False,
    ),
    # board farm (backend api); the password comes from AIDGE_DEPLOY_API_PASSWORD (or
    # AIDGE_BENCHMARK_API_PASSWORD) or a prompt, never from an option (visible in `ps`)
    "api_url": (
        Annotated[
            str | None,
            typer.Option(
                envvar=["AIDGE_DEPLOY_API_URL", "AIDGE_BENCHMARK_API_URL"],
                help="Board-farm URL (with or without /api).",
                rich_help_panel=_FARM,
            ),
        ],
        None,
    ),
    "api_username": (
        Annotated[
            str | None,
            typer.Option(
                envvar=["AIDGE_DEPLOY_API_USERNAME", "AIDGE_BENCHMARK_API_USERNAME"],
                rich_help_panel=_FARM,
            ),
        ],
        None,
    ),
    "api_board_name": (
        Annotated[
            str | None,
            typer.Option(
                help="Farm board (default: any board of the target).", rich_help_panel=_FARM
            ),
        ],
        None,
    ),
    "api_poll_interval": (
        Annotated[
            float | None, typer.Option(help="Seconds between status polls.", rich_help_panel=_FARM)
        ],
        None,
    ),
    "api_job_timeout": (
        Annotated[
            float | None,
            typer.Option(
                help="Longest wait for the farm job, queue included.", rich_help_panel=_FARM
            ),
        ],
        None,
    ),
    "serial_port": (Annotated[str | None, typer.Option(rich_help_panel=_PANEL)], None),
    "serial_baudrate": (Annotated[int | None, typer.Option(rich_help_panel=_PANEL)], None),
    "uart_timeout": (Annotated[float | None, typer.Option(rich_help_panel=_PANEL)], None),
    "uart_capture_duration": (Annotated[float | None, typer.Option(rich_help_panel=_PANEL)], None),
    "end_keyword": (
        Annotated[
            str | None,
            typer.Option(help="Pipe-separated UART end markers.", rich_help_panel=_PANEL),
        ],
        None,
    ),
    "flash_method": (Annotated[str | None, typer.Option(rich_help_panel=_PANEL)], None),
    "flash_option": (
        Annotated[
            list[str] | None,
            typer.Option(
                help="KEY=VALUE: an option of the flash method (each its own, e.g. openocd "
                "interface=interface/cmsis-dap.cfg; `aidge-deploy docs` lists them).",
                rich_help_panel=_PANEL,
            ),
        ],
        None,
    ),
    "probe_unique_id": (Annotated[str | None, typer.Option(rich_help_panel=_PANEL)], None),
    "pyocd_target": (Annotated[str | None, typer.Option(rich_help_panel=_PANEL)], None),
    # the backends' own options (no guide field): their records (QemuOptions, DockerOptions)
    "docker_build": (
        Annotated[
            str | None,
            typer.Option(
                help="Build in the container, outside it (run inside), or auto.",
                metavar="auto|container|outside",
                rich_help_panel=_PANEL,
            ),
        ],
        None,
    ),
    "qemu_binary": (
        Annotated[
            str | None,
            typer.Option(
                help="The QEMU of an emulated board: a name on PATH or a path.",
                metavar="NAME|PATH",
                rich_help_panel=_PANEL,
            ),
        ],
        None,
    ),
    "qemu_arg": (
        Annotated[
            list[str] | None,
            typer.Option(
                help="One more word on an emulated board's QEMU command line, after the "
                "board's (repeatable: --qemu-arg=-d --qemu-arg=guest_errors).",
                metavar="WORD",
                rich_help_panel=_PANEL,
            ),
        ],
        None,
    ),
}

#: option name -> DeployConfig field, where they differ
_FIELD = {
    "report": "report_dir",
    "overwrite": "report_overwrite",
    "power_window": "power_window_s",
    "gate_min_pulse": "power_gate_min_pulse_s",
    "gate_max_dropout": "power_gate_max_dropout_s",
}


def with_connection_options[F: Callable[..., Any]](fn: F) -> F:
    """Add ``SHARED_OPTIONS`` to ``fn``'s CLI signature; ``fn`` receives ``connection=dict``."""
    sig = inspect.signature(fn)
    # resolve the command's own (string) annotations: typer needs the Annotated objects
    hints = typing.get_type_hints(fn, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in sig.parameters.values()
        if p.name != "connection"
    ]
    extra = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
        )
        for name, (annotation, default) in SHARED_OPTIONS.items()
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        connection = {
            _FIELD.get(name, name): kwargs.pop(name) for name in SHARED_OPTIONS if name in kwargs
        }
        return fn(*args, connection=connection, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=[*params, *extra], return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in [*params, *extra]}
    return wrapper  # type: ignore[return-value]


def config_values(connection: dict[str, Any]) -> dict[str, Any]:
    """``DeployConfig`` keyword arguments from the shared options (unset ones left out).

    With ``--backend api`` and no password in the environment, a terminal user is asked
    for it (hidden); it is never an option.
    """
    values = {k: v for k, v in connection.items() if v is not None}
    from aidge_deploy.registry import remote_backend

    backend = values.get("backend")
    if backend and remote_backend(str(backend)) is not None:  # the farm's backend
        password = _farm_password()
        if password:
            values["api_password"] = password
    counters = values.pop("counters", None)
    if counters:
        values["counters"] = tuple(c for c in str(counters).split(",") if c)
    flash_options = values.pop("flash_option", None)
    if flash_options:
        values["flash_options"] = list(flash_options)  # "KEY=VALUE" items: DeployConfig parses
    records = own_option_records(values)
    if records:
        values["backend_options"] = records
    return values


#: the command line's options that are a backend's own (no guide field): record, field
OWN_OPTIONS: dict[str, tuple[str, str]] = {
    "ssh_trust_on_first_use": ("SshOptions", "trust_on_first_use"),
    "ssh_connect_timeout": ("SshOptions", "connect_timeout"),
    "docker_pull": ("DockerOptions", "pull"),
    "docker_build": ("DockerOptions", "build"),
    "api_job_timeout": ("FarmOptions", "job_timeout"),
    "qemu_binary": ("QemuOptions", "binary"),
    "qemu_arg": ("QemuOptions", "extra_args"),
}


def own_option_records(values: dict[str, Any]) -> tuple[Any, ...]:
    """The records of the backends' own options given (``--qemu-binary``,
    ``--docker-build``, ``--api-job-timeout``...), taken out of ``values``; an option left
    at its default (a flag's False, an empty list) is not given."""
    from aidge_deploy import backendoptions

    records: tuple[Any, ...] = ()
    for name, (kind, field) in OWN_OPTIONS.items():
        value = values.pop(name, None)
        if value is None or value is False or value == []:
            continue
        if isinstance(value, list):
            value = tuple(value)
        records = backendoptions.with_own(records, getattr(backendoptions, kind), **{field: value})
    return records


def _farm_password() -> str | None:
    import sys

    from aidge_deploy.farm.client import password_from_env

    password = password_from_env()
    if password is None and sys.stdin.isatty():
        password = str(typer.prompt("Board-farm password", hide_input=True))
    return password
