"""The import surface the published Aidge packages rely on (contract section 1)."""

from __future__ import annotations

import subprocess
import sys


def test_cortexm_exporter_imports_with_aidge_deploy_installed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import aidge_deploy, aidge_export_arm_cortexm; print('ok')"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_names_the_published_packages_import() -> None:
    from aidge_deploy import DeployConfig, deploy  # graph_evaluator, execution.run
    from aidge_deploy.benchmark_api import BenchmarkApiConfig, build_results_from_uart_log
    from aidge_deploy.config import BenchmarkConfig
    from aidge_deploy.config import DeployConfig as ConfigDeployConfig
    from aidge_deploy.registry import get_deploy_target

    assert ConfigDeployConfig is DeployConfig and callable(deploy) and callable(get_deploy_target)
    assert callable(build_results_from_uart_log) and BenchmarkConfig(mode="output").mode == "output"
    api = BenchmarkApiConfig(base_url="http://127.0.0.1:8000", username="u", password="secret-pw")
    assert "secret-pw" not in repr(api)


def test_every_cortexm_board_resolves_runtime_config_without_raising(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The exporter calls this at firmware compile time, even when nothing is deployed."""
    import aidge_export_arm_cortexm  # noqa: F401

    from aidge_deploy.registry import get_deploy_target, registered_targets

    boards = [
        t
        for (t, b), cls in registered_targets().items()
        if b == "local" and hasattr(cls, "resolve_runtime_config")
    ]
    assert {"stm32h7a3", "stm32n657", "ake7", "mps2-an386"} <= set(boards)
    for board in boards:
        cfg = get_deploy_target(board, "local").resolve_runtime_config(tmp_path, None)  # type: ignore[attr-defined]
        for attr in (
            "uart_log_file",
            "serial_port",
            "baudrate",
            "uart_timeout",
            "uart_capture_duration",
            "end_keyword",
            "probe_unique_id",
            "pyocd_target",
            "flash_method",
        ):
            assert hasattr(cfg, attr), (board, attr)
