"""The results dict the published Aidge exporter's helpers read, built in one place.

``aidge_export_arm_cortexm``'s benchmark helpers read a plain dict (``timings``,
``accuracy``, ``predictions``, ``labels``, ``validation_metric``, ``cycles``,
``layer_timings``, ``layer_cycles``, ``outputs``, ``compare_timings``) from two places:
``DeployResult.output`` of a benchmark/validation deploy and
``benchmark_api.build_results_from_uart_log``. Both build it here, so they cannot disagree.

Nothing in it is invented: ``accuracy`` is the top-1 accuracy of the predictions the
*target* printed against the labels, or None (no prediction in the log, or an autoencoder
whose figure is an MSE: that goes to ``validation_metrics``, never under ``accuracy``);
``timings`` are the per-inference samples the program printed — an MLPerf Tiny session
prints one mean over N inferences, which is not a series of one sample, so it stays out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: the validation inference type whose on-target figure is a reconstruction error
AUTOENCODER = "autoencoder"


def top1_accuracy(predictions: Sequence[int] | None, labels: Sequence[int] | None) -> float | None:
    """Fraction of the target's predictions equal to the labels (over the pairs both have)."""
    if not predictions or not labels:
        return None
    n = min(len(predictions), len(labels))
    hits = sum(1 for p, lab in zip(predictions[:n], labels[:n], strict=True) if int(p) == int(lab))
    return hits / n


def legacy_results(
    *,
    timings_ms: Sequence[float] | None,
    predictions: Sequence[int] | None,
    labels: Sequence[int] | None,
    inference_type: str | None,
    validation_metrics: Sequence[float] | None,
    cycles: Sequence[int] | None,
    layer_timings_ms: Mapping[str, float] | None,
    layer_cycles: Mapping[str, float] | None,
    outputs: Sequence[np.ndarray] | None,
) -> dict[str, Any]:
    """The exporter's results dict from what the target printed (see the module doc)."""
    autoencoder = inference_type == AUTOENCODER
    out: dict[str, Any] = {
        "timings": [float(t) for t in timings_ms or ()],
        "accuracy": None if autoencoder else top1_accuracy(predictions, labels),
        "predictions": [int(p) for p in predictions or ()],
        "labels": [int(v) for v in labels or ()],
        "validation_metric": "mse" if autoencoder else "accuracy",
        "cycles": [round(float(c)) for c in cycles] if cycles is not None else None,
        "layer_timings": dict(layer_timings_ms) if layer_timings_ms else None,
        "layer_cycles": dict(layer_cycles) if layer_cycles else None,
        "outputs": [np.asarray(o).tolist() for o in outputs] if outputs else None,
        "compare_timings": None,
    }
    if autoencoder and validation_metrics:
        out["validation_metrics"] = [float(v) for v in validation_metrics]
    return out


__all__ = ["AUTOENCODER", "legacy_results", "top1_accuracy"]
