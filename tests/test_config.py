"""DeployConfig: the guide's fields, the published callers' shapes, and no secret leaks."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from aidge_core.export_utils.config import BenchmarkConfig as CoreBenchmarkConfig
from aidge_core.export_utils.config import ValidationConfig as CoreValidationConfig

import aidge_deploy
from aidge_deploy.config import BenchmarkConfig, DeployConfig, ValidationConfig
from aidge_deploy.errors import ConfigError

GUIDE_FIELDS = {
    "target",
    "backend",
    "build_dir",
    "keep_build_dir",
    "api_url",
    "api_username",
    "api_password",
    "api_board_name",
    "ssh_host",
    "ssh_user",
    "ssh_port",
    "ssh_key_path",
    "serial_port",
    "serial_baudrate",
    "uart_timeout",
    "uart_capture_duration",
    "end_keyword",
    "docker_image",
    "flash_method",
    "probe_unique_id",
    "pyocd_target",
    "validation",
    "benchmark",
}
CONNECTION_FIELDS = {
    "api_poll_interval",
    "api_request_timeout",
    "ssh_known_hosts_path",
    "ssh_remote_workdir",
    "sbc_max_runtime_seconds",
    "sbc_board_name",
    "uart_log_filename",
    "heterogeneous_deploy",
    "apss_linux",
    "apss_yocto_root",
    "run_command",
}


def test_every_field_of_the_guide_and_connection_config_exists() -> None:
    names = {f.name for f in dataclasses.fields(DeployConfig)}
    assert names >= GUIDE_FIELDS
    assert names >= CONNECTION_FIELDS


def test_sub_configs_are_the_aidge_core_classes() -> None:
    assert BenchmarkConfig is CoreBenchmarkConfig
    assert ValidationConfig is CoreValidationConfig
    assert aidge_deploy.BenchmarkConfig is CoreBenchmarkConfig


def test_guide_example_constructs_and_is_mutable() -> None:
    cfg = DeployConfig(
        target="stm32h7a3",
        backend="local",
        build_dir=Path("./build"),
        ssh_port=22,
        ssh_key_path=Path("~/.ssh/id_ed25519"),
        serial_baudrate=115200,
        uart_timeout=0.1,
        end_keyword="END DEMO",
        benchmark=BenchmarkConfig(mode="benchmark", nb_iterations=50),
    )
    cfg.api_url = "http://127.0.0.1:8000"  # the exporter's run() sets these after construction
    cfg.backend = "api"
    assert cfg.backend_kind == "api"
    assert cfg.benchmark is not None and cfg.benchmark.nb_iterations == 50


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ("ssh", "ssh"),
        (None, "local"),
        ("SSH_DOCKER", "ssh_docker"),
        (SimpleNamespace(kind="api"), "api"),
    ],
)
def test_backend_accepts_str_none_or_object_with_kind(backend: object, expected: str) -> None:
    assert DeployConfig(backend=backend).backend == expected


def test_backend_object_fills_serial_probe_and_api_settings() -> None:
    api = SimpleNamespace(
        base_url="http://farm:8000", username="ci", password="s3cret", board_name="b1"
    )
    backend = SimpleNamespace(
        kind="local",
        serial_port="/dev/ttyACM0",
        baudrate=921600,
        probe_unique_id="P1",
        pyocd_target="stm32h7a3zi",
        api_config=api,
    )
    cfg = DeployConfig(backend=backend)
    assert (cfg.serial_port, cfg.serial_baudrate, cfg.probe_unique_id, cfg.pyocd_target) == (
        "/dev/ttyACM0",
        921600,
        "P1",
        "stm32h7a3zi",
    )
    assert (cfg.api_url, cfg.api_username, cfg.api_password, cfg.api_board_name) == (
        "http://farm:8000",
        "ci",
        "s3cret",
        "b1",
    )


def test_bad_backend_is_a_config_error_with_hint() -> None:
    with pytest.raises(ConfigError) as info:
        DeployConfig(backend=42)
    assert info.value.hint and "local" in info.value.hint


def test_from_connection_config_accepts_none() -> None:
    cfg = DeployConfig.from_connection_config(None, target="stm32h7a3")
    assert cfg.target == "stm32h7a3" and cfg.backend == "local"


def test_from_connection_config_reads_a_partial_namespace() -> None:
    # argparse namespace built from ConnectionConfig, lacking docker_image/run_command
    ns = argparse.Namespace(
        backend="ssh_docker",
        ssh_host="10.0.0.2",
        ssh_user="pi",
        ssh_port=2222,
        sbc_docker_image="aidge:latest",
        serial_port=None,
        api_poll_interval="3",
        end_keyword="END DEMO|BENCHMARK_DONE",
    )
    bench = BenchmarkConfig(nb_iterations=5)
    cfg = DeployConfig.from_connection_config(ns, target="raspberrypi", benchmark=bench)
    assert (
        cfg.backend == "ssh_docker" and cfg.ssh_port == 2222 and cfg.docker_image == "aidge:latest"
    )
    assert cfg.api_poll_interval == 3.0
    assert cfg.end_markers == ("END DEMO", "BENCHMARK_DONE")
    assert cfg.benchmark is bench and cfg.target == "raspberrypi"


def test_password_never_in_repr_or_snapshot() -> None:
    cfg = DeployConfig(api_password="hunter2-token", api_username="ci")
    assert "hunter2-token" not in repr(cfg)
    assert "hunter2-token" not in str(cfg.snapshot())
    assert cfg.snapshot()["api_password"] == "***"


# -- fields of the exporters' CLI: honoured, or refused with the reason --------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"run_command": "taskset -c 2 ./run_export"}, "run_command 'taskset -c 2 ./run_export' is not supported"),
        ({"apss_linux": True, "heterogeneous_deploy": True}, "apss_linux is not supported"),
    ],
)  # fmt: skip
def test_fields_that_cannot_be_honoured_are_refused_with_the_reason(
    values: dict[str, object], expected: str
) -> None:
    config = DeployConfig(target="host", **values)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        config.check_values()
    assert expected in info.value.message and info.value.hint


def test_an_ssh_board_name_needs_a_backend_that_reaches_one() -> None:
    """``sbc_board_name`` is refused where the backend's caps reach no board over SSH."""
    from aidge_deploy.configcheck import check_deploy_config

    with pytest.raises(ConfigError) as info:
        check_deploy_config(DeployConfig(target="host", sbc_board_name="pi-lab"), "host")
    assert "names an SSH board, and backend 'local' reaches none" in info.value.message
    assert info.value.hint


def test_fields_the_published_cli_fills_by_default_are_accepted() -> None:
    """``ConnectionConfig`` fills apss_yocto_root from AIDGE_ALIF_APSS_YOCTO_ROOT and leaves
    run_command unset: used only by apss_linux (refused), as the exporter does."""
    args = SimpleNamespace(apss_yocto_root="/opt/yocto", run_command=None, apss_linux=False)
    config = DeployConfig.from_connection_config(args, target="host")
    assert config.apss_yocto_root == "/opt/yocto"
    config.check_values()
    ssh = DeployConfig(
        target="raspberrypi", backend="ssh", ssh_host="10.0.0.5", sbc_board_name="pi"
    )
    ssh.check_values()
    from aidge_deploy.connections.ssh_settings import ssh_settings_from_config

    assert ssh_settings_from_config(ssh).label == "pi (10.0.0.5)"


@pytest.mark.slow
def test_a_heterogeneous_export_is_refused_by_a_one_core_target_in_preflight(
    export_factory: object, tmp_path: Path
) -> None:
    import json
    import shutil

    from aidge_deploy.artifact import EXPORT_MANIFEST_NAME

    export = tmp_path / "export"
    shutil.copytree(export_factory("benchmark").path, export)  # type: ignore[operator]
    manifest_path = export / EXPORT_MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest["application_config"]["heterogeneous_deploy"] = True
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError) as info:
        aidge_deploy.deploy(export, DeployConfig(), work_dir=tmp_path / "run")
    assert (
        info.value.stage == "Preflight" and "heterogeneous (two-core) export" in info.value.message
    )
    assert "runs one program on one core" in info.value.message
    assert info.value.hint is not None and "mps2-an521" in info.value.hint


def test_heterogeneous_deploy_is_accepted_in_the_config() -> None:
    """The published field is honoured now (the manifest drives it): no longer refused."""
    DeployConfig(target="mps2-an521", heterogeneous_deploy=True).check_values()
