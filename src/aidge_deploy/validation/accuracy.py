"""Top-1 accuracy on a target: labelled samples sent to a validation export, one by one.

Why this module exists: ``validate --dataset`` and a campaign's cells measure accuracy the
same way — a ``validation`` export (Aidge's interactive UART protocol: the board asks for
each sample, the host sends it, the board prints its prediction) deployed with the samples
and labels — and must agree on the details: which exports can do it (bare-metal ones; the
host and Linux exports have no interactive protocol), and how an int8 export's inputs are
sent (scaled by 127 into integers, as Aidge's int8 export scales its own sample input).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.validation.matrix import INT8_SCALE, ReferenceEngine, run_reference


@dataclass(frozen=True)
class AccuracyResult:
    target: str
    accuracy: float | None
    samples: int
    unavailable_reason: str | None = None
    #: what the figure is (the validation run's provenance: silicon, emulated, ...)
    provenance: str | None = None


def no_interactive_protocol(environment: str, target: str) -> str | None:
    """Why exports of ``environment`` cannot report accuracy (None: they can)."""
    if environment == "baremetal":
        return None
    return f"{target} exports have no interactive validation protocol"


def accuracy_on_target(
    artifact: Any,
    samples: Sequence[np.ndarray],
    labels: Sequence[int],
    *,
    dtype: str,
    config_values: Mapping[str, Any],
    work_dir: Path | None = None,
    progress: Any = None,
) -> AccuracyResult:
    """Deploy the ``validation`` export ``artifact`` with ``samples`` and their ``labels``.

    ``config_values`` are the ``DeployConfig`` keyword arguments (target, backend, timeout,
    connection); ``artifact``'s input layout is what the samples are sent in.
    """
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig, ValidationConfig

    target = str(config_values.get("target") or artifact.manifest.target)
    why = no_interactive_protocol(artifact.manifest.environment, target)
    if why is not None:
        return AccuracyResult(target, None, len(samples), why)
    sent = [np.round(s * INT8_SCALE) for s in samples] if dtype == "int8" else list(samples)
    result = deploy(
        artifact,
        DeployConfig(
            **{**config_values, "target": target},
            validation=ValidationConfig(
                samples=sent, labels=list(labels), validation_on_target=True
            ),
        ),
        work_dir=work_dir,
        progress=progress,
    )
    provenance = result.metrics.get("provenance")
    if result.accuracy is None:
        return AccuracyResult(
            target, None, len(samples), "the run printed no predictions", str(provenance or "")
        )
    return AccuracyResult(
        target, float(result.accuracy), len(samples), None, str(provenance) if provenance else None
    )


def reference_accuracy(
    model: Path, samples: Sequence[np.ndarray], labels: Sequence[int], engine: ReferenceEngine
) -> float:
    """Top-1 accuracy of the ONNX model itself (the reference engine) on the samples."""
    predicted = [int(np.argmax(run_reference(model, s, engine)[0])) for s in samples]
    return sum(p == y for p, y in zip(predicted, labels, strict=True)) / len(labels)


__all__ = [
    "AccuracyResult",
    "accuracy_on_target",
    "no_interactive_protocol",
    "reference_accuracy",
]
