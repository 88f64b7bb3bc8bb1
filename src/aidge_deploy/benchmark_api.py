"""Names the published Aidge packages import from ``aidge_deploy.benchmark_api``.

``aidge_export_arm_cortexm.benchmark_helpers.execution`` imports
``build_results_from_uart_log`` at module level (so the exporter cannot be imported without
this module) and ``benchmark.backend_from_args`` builds a ``BenchmarkApiConfig`` for the
board-farm backend. Both are real implementations over our protocol parsers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidge_deploy.errors import ProtocolError
from aidge_deploy.legacy_results import legacy_results


@dataclass
class BenchmarkApiConfig:
    """Connection settings of the board-farm HTTP API (``--api-*`` flags)."""

    base_url: str
    username: str
    password: str
    board_name: str | None = None
    poll_interval_seconds: float = 2.0
    request_timeout_seconds: float = 30.0

    def __repr__(self) -> str:  # the password never reaches a log through repr()
        return (
            f"BenchmarkApiConfig(base_url={self.base_url!r}, username={self.username!r}, "
            f"password='***', board_name={self.board_name!r})"
        )


def build_results_from_uart_log(
    uart_log_file: Path,
    predictions: list[Any],
    validation_labels: list[int] | None,
    validation_enabled: bool,
    tinymlbenchmark: bool,
    validation_inference_type: str = "classification",
) -> dict[str, Any]:
    """Parse a captured Cortex-M UART log into the results dict the exporter's charts use.

    The dict of ``legacy_results`` (the same one ``deploy()`` returns as ``output``):
    ``timings`` (ms per inference, empty when the log has none — an MLPerf session's mean is
    not a series), ``accuracy`` (top-1 of the log's predictions, else None; an autoencoder's
    MSE goes to ``validation_metrics``), ``predictions``, ``labels``, ``validation_metric``,
    ``cycles``, ``layer_timings`` and ``layer_cycles`` (name -> value), ``outputs`` and
    ``compare_timings``.
    """
    from aidge_deploy.protocols.uart import parse_uart_log_text

    path = Path(uart_log_file)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ProtocolError(
            f"Cannot read UART log {path}: {exc.strerror}",
            hint="Capture the board's UART output first (aidge-deploy run ...).",
        ) from exc
    parsed = parse_uart_log_text(text, tinymlbenchmark=tinymlbenchmark, log_path=path)
    # ``predictions`` (the caller's, e.g. from a host run) are not the target's: accuracy and
    # the returned predictions come from the log only
    del predictions
    return legacy_results(
        timings_ms=parsed.timings_ms,
        predictions=parsed.predictions,
        labels=validation_labels if validation_enabled else None,
        inference_type=validation_inference_type if validation_enabled else None,
        validation_metrics=parsed.validation_metrics,
        cycles=parsed.cycles,
        layer_timings_ms=parsed.layer_times_ms,
        layer_cycles=parsed.layer_cycles,
        outputs=parsed.outputs,
    )


__all__ = ["BenchmarkApiConfig", "build_results_from_uart_log"]
