"""The runtime settings object the published Cortex-M exporter reads from a deploy target.

``aidge_export_arm_cortexm.benchmark_helpers`` calls
``target.resolve_runtime_config(export_path, deploy_config)`` at firmware *compile* time and
reads these attributes; it must never raise for a registered board.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.config import DeployConfig

DEFAULT_BAUDRATE = 115200
DEFAULT_UART_TIMEOUT_S = 0.1
DEFAULT_CAPTURE_S = 120.0
DEFAULT_END_KEYWORD = "END DEMO"
DEFAULT_LOG_NAME = "uart_output.txt"


@dataclass(frozen=True)
class RuntimeConfig:
    """UART, capture and probe settings of one bare-metal run."""

    uart_log_file: Path
    serial_port: str | None
    baudrate: int
    uart_timeout: float
    uart_capture_duration: float
    end_keyword: str
    probe_unique_id: str | None
    pyocd_target: str | None
    flash_method: str | None


def resolve_runtime_config(
    export_path: Path,
    config: DeployConfig | None,
    *,
    default_flash_method: str | None,
    default_serial_port: str | None = None,
    default_pyocd_target: str | None = None,
) -> RuntimeConfig:
    cfg = config or DeployConfig()
    serial, flash = cfg.serial, cfg.flash
    log_name = serial.log_filename or DEFAULT_LOG_NAME
    return RuntimeConfig(
        uart_log_file=Path(export_path) / log_name,
        serial_port=serial.port or default_serial_port,
        baudrate=int(serial.baudrate or DEFAULT_BAUDRATE),
        uart_timeout=float(serial.timeout or DEFAULT_UART_TIMEOUT_S),
        uart_capture_duration=float(serial.capture_duration or DEFAULT_CAPTURE_S),
        end_keyword=serial.end_keyword or DEFAULT_END_KEYWORD,
        probe_unique_id=flash.probe_unique_id,
        pyocd_target=flash.pyocd_target or default_pyocd_target,
        flash_method=flash.method or default_flash_method,
    )
