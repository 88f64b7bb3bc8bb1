"""The ``aidge-deploy`` command: parse options, call the API, render with rich.

Errors print their message and hint and exit non-zero; a traceback only with ``-v``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from aidge_deploy.cli import doctor as doctor_cmd
from aidge_deploy.cli.render import console, print_error, print_result, progress_display
from aidge_deploy.errors import DeployError
from aidge_deploy.results import DeployResult

app = typer.Typer(
    name="aidge-deploy",
    help="Build, flash, run and profile Aidge exports on the host, boards and emulators.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_state = {"verbose": False}


@app.callback()
def main(
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Debug logs and tracebacks.")
    ] = False,
) -> None:
    _state["verbose"] = verbose
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def _fail(exc: DeployError) -> None:
    if _state["verbose"]:
        console.print_exception()
    print_error(exc)
    raise typer.Exit(code=2)


def _emit(result: DeployResult, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        print_result(result)


TargetOpt = Annotated[
    str | None, typer.Option("--target", "-t", help="Hardware target (default: the export's).")
]
BackendOpt = Annotated[str, typer.Option("--backend", "-b", help="local, ssh, ssh_docker or api.")]


def _connection_config(**values: object) -> object:
    from aidge_deploy.config import DeployConfig

    clean = {k: v for k, v in values.items() if v is not None}
    if "docker_image" not in clean and "sbc_docker_image" in clean:
        clean["docker_image"] = clean.pop("sbc_docker_image")
    clean.pop("sbc_docker_image", None)
    return DeployConfig(**clean)  # type: ignore[arg-type]


@app.command()
def run(
    export_dir: Annotated[Path, typer.Argument(help="Folder holding .aidge-export.json.")],
    target: TargetOpt = None,
    backend: BackendOpt = "local",
    build_dir: Annotated[Path | None, typer.Option(help="Build here instead of the cache.")] = None,
    keep_build_dir: Annotated[
        bool, typer.Option(help="Keep remote/temporary build folders.")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Run timeout in seconds.")] = 120.0,
    report: Annotated[
        Path | None, typer.Option(help="Write a result bundle to this folder.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    api_url: Annotated[str | None, typer.Option(help="Board-farm API URL.")] = None,
    api_username: Annotated[str | None, typer.Option()] = None,
    api_password: Annotated[str | None, typer.Option(envvar="AIDGE_BENCHMARK_API_PASSWORD")] = None,
    api_board_name: Annotated[str | None, typer.Option()] = None,
    ssh_host: Annotated[str | None, typer.Option(envvar="AIDGE_SBC_IP")] = None,
    ssh_user: Annotated[str | None, typer.Option(envvar="AIDGE_SBC_SSH_USER")] = None,
    ssh_port: Annotated[int | None, typer.Option()] = None,
    ssh_key_path: Annotated[Path | None, typer.Option(envvar="AIDGE_SBC_SSH_KEY_PATH")] = None,
    ssh_known_hosts_path: Annotated[
        Path | None, typer.Option(envvar="AIDGE_SBC_KNOWN_HOSTS_PATH")
    ] = None,
    ssh_remote_workdir: Annotated[str | None, typer.Option()] = None,
    ssh_trust_on_first_use: Annotated[
        bool, typer.Option(help="Accept and remember an unknown host key.")
    ] = False,
    cross_compile: Annotated[
        bool, typer.Option(help="ssh: build locally with a cross toolchain.")
    ] = False,
    docker_image: Annotated[
        str | None, typer.Option("--docker-image", "--sbc-docker-image")
    ] = None,
    serial_port: Annotated[str | None, typer.Option()] = None,
    serial_baudrate: Annotated[int | None, typer.Option()] = None,
    uart_timeout: Annotated[float | None, typer.Option()] = None,
    uart_capture_duration: Annotated[float | None, typer.Option()] = None,
    end_keyword: Annotated[
        str | None, typer.Option(help="Pipe-separated UART end markers.")
    ] = None,
    flash_method: Annotated[str | None, typer.Option()] = None,
    probe_unique_id: Annotated[str | None, typer.Option()] = None,
    pyocd_target: Annotated[str | None, typer.Option()] = None,
    counters: Annotated[
        str | None, typer.Option(help="Comma-separated counters or group presets.")
    ] = None,
) -> None:
    """Deploy an existing export and print its results."""
    from aidge_deploy.api import deploy

    try:
        config = _connection_config(
            target=target,
            backend=backend,
            build_dir=build_dir,
            keep_build_dir=keep_build_dir,
            run_timeout=timeout,
            report_dir=report,
            api_url=api_url,
            api_username=api_username,
            api_password=api_password,
            api_board_name=api_board_name,
            ssh_host=ssh_host,
            ssh_user=ssh_user,
            ssh_port=ssh_port,
            ssh_key_path=ssh_key_path,
            ssh_known_hosts_path=ssh_known_hosts_path,
            ssh_remote_workdir=ssh_remote_workdir,
            ssh_trust_on_first_use=ssh_trust_on_first_use,
            cross_compile=cross_compile,
            docker_image=docker_image,
            serial_port=serial_port,
            serial_baudrate=serial_baudrate,
            uart_timeout=uart_timeout,
            uart_capture_duration=uart_capture_duration,
            end_keyword=end_keyword,
            flash_method=flash_method,
            probe_unique_id=probe_unique_id,
            pyocd_target=pyocd_target,
            counters=counters or (),
        )
        with progress_display(not as_json) as progress:
            result = deploy(export_dir, config, progress=progress)  # type: ignore[arg-type]
    except DeployError as exc:
        _fail(exc)
        return
    _emit(result, as_json)


@app.command()
def profile(
    model: Annotated[Path, typer.Argument(help="ONNX model to export and profile.")],
    target: Annotated[str, typer.Option("--target", "-t", help="Hardware target.")] = "host",
    backend: BackendOpt = "local",
    dtype: Annotated[str, typer.Option(help="float32 or int8.")] = "float32",
    iterations: Annotated[int, typer.Option(help="Timed inferences.")] = 10,
    warmup: Annotated[int, typer.Option(help="Warm-up inferences.")] = 2,
    work_dir: Annotated[Path | None, typer.Option(help="Where the export is generated.")] = None,
    timeout: Annotated[float, typer.Option(help="Run timeout in seconds.")] = 300.0,
    report: Annotated[
        Path | None, typer.Option(help="Write a result bundle to this folder.")
    ] = None,
    counters: Annotated[
        str | None, typer.Option(help="Comma-separated counters or group presets.")
    ] = None,
    max_counters_per_pass: Annotated[
        int | None, typer.Option(help="Cap counters per pass (reproduce a smaller PMU's passes).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Export MODEL with Aidge (benchmark, per-layer profiling on) and deploy it."""
    from aidge_deploy.api import deploy
    from aidge_deploy.buildsys import default_cache_root
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.errors import ConfigError
    from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, export_model

    try:
        if dtype not in {d.value for d in Dtype}:
            raise ConfigError(f"Unknown dtype {dtype!r}", hint="Use float32 or int8.")
        if iterations < 1:
            raise ConfigError("--iterations must be at least 1", hint="e.g. --iterations 20")
        out = (
            work_dir
            or default_cache_root() / "exports" / f"{model.stem}-{target}-{dtype}-i{iterations}"
        )
        with progress_display(not as_json) as progress:
            from aidge_deploy.pipeline.context import ProgressKind, ProgressUpdate

            progress(ProgressUpdate("Export", ProgressKind.START))
            artifact = export_model(
                ExportRequest(
                    model=model,
                    target=target,
                    out_dir=out,
                    dtype=Dtype(dtype),
                    kind=ApplicationKind.BENCHMARK,
                    nb_iterations=iterations,
                    nb_warmup=warmup,
                    profiling=True,
                )
            )
            progress(ProgressUpdate("Export", ProgressKind.DONE))
            config = DeployConfig(
                target=target,
                backend=backend,
                run_timeout=timeout,
                report_dir=report,
                counters=tuple(c for c in (counters or "").split(",") if c),
                max_counters_per_pass=max_counters_per_pass,
            )
            result = deploy(artifact, config, progress=progress)
    except DeployError as exc:
        _fail(exc)
        return
    _emit(result, as_json)


@app.command()
def targets() -> None:
    """List the registered (target, backend) pairs with hardware facts from the hardware model."""
    from rich.table import Table

    from aidge_deploy.catalog import target_rows

    table = Table(title="Registered deploy targets")
    for col in ("target", "backend", "kind", "cpu", "clock", "memories", "build", "mechanics"):
        table.add_column(col)
    for row in target_rows():
        table.add_row(
            row.target,
            row.backend,
            row.kind,
            row.cpu,
            row.clock,
            row.memories,
            row.build_system,
            row.description,
        )
    console.print(table)


app.command(name="doctor")(doctor_cmd.doctor)


@app.command()
def docs(
    write: Annotated[
        Path | None, typer.Option("--write", help="Write the pages into this folder.")
    ] = None,
) -> None:
    """Reference pages (targets, protocols, counters, flashers) generated from the registries."""
    from aidge_deploy.docs import render_all, write_all

    if write is not None:
        for path in write_all(write):
            console.print(f"wrote {path}")
        return
    for text in render_all().values():
        sys.stdout.write(text + "\n")


from aidge_deploy.cli import compare as compare_cmd  # noqa: E402

app.command(name="compare")(compare_cmd.compare)


if __name__ == "__main__":  # pragma: no cover
    app()
