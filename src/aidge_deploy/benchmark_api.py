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

    Keys: ``timings`` (ms per inference), ``accuracy``, ``predictions``, ``labels``,
    ``validation_metric``, ``cycles``, ``layer_timings`` and ``layer_cycles`` (name -> value),
    ``outputs`` and ``compare_timings``.
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
    preds = list(parsed.predictions) if parsed.predictions is not None else list(predictions)
    labels = list(validation_labels) if validation_labels is not None else []
    accuracy: float | None = None
    metric = "accuracy"
    if validation_enabled and validation_inference_type == "autoencoder":
        metric = "mse"
        if parsed.validation_metrics:
            accuracy = sum(parsed.validation_metrics) / len(parsed.validation_metrics)
    elif validation_enabled and preds and labels:
        n = min(len(preds), len(labels))
        accuracy = (
            sum(1 for p, lab in zip(preds[:n], labels[:n], strict=True) if int(p) == int(lab)) / n
        )
    timings: list[float] = list(parsed.timings_ms or ())
    if parsed.mlperf is not None and not timings:
        timings = [parsed.mlperf.latency_us / 1000.0]
    return {
        "timings": timings,
        "accuracy": accuracy,
        "predictions": preds,
        "labels": labels,
        "validation_metric": metric,
        "cycles": list(parsed.cycles) if parsed.cycles is not None else None,
        "layer_timings": dict(parsed.layer_times_ms) if parsed.layer_times_ms else None,
        "layer_cycles": dict(parsed.layer_cycles) if parsed.layer_cycles else None,
        "outputs": [o.tolist() for o in parsed.outputs] if parsed.outputs else None,
        "compare_timings": None,
    }


__all__ = ["BenchmarkApiConfig", "build_results_from_uart_log"]
