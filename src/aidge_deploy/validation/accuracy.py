"""Top-1 accuracy on a target: labelled samples sent to a validation export, one by one.

Why this module exists: ``validate --dataset`` and a campaign's cells measure accuracy the
same way and must agree on the details. A bare-metal export has Aidge's interactive UART
protocol: a ``validation`` export deployed with the samples and labels (the board asks for
each sample, the host sends it, the board prints its prediction; an int8 export's inputs
scaled by 127 into integers, as Aidge's int8 export scales its own sample input). The host's
and Linux boards' exports have no such protocol: there an ``output`` export (it prints its
output tensors) is built once and each sample run through a patched copy of that build
(``validation.feed``), its prediction the argmax of the first output.
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


def accuracy_from_outputs(
    artifact: Any,
    sample: np.ndarray,
    samples: Sequence[np.ndarray],
    labels: Sequence[int],
    *,
    config_values: Mapping[str, Any],
    work_dir: Path,
    progress: Any = None,
) -> AccuracyResult:
    """Top-1 accuracy of an ``output`` export ``artifact`` whose own sample is ``sample``:
    one build (checked to hold ``sample``), each of ``samples`` through a patched copy of it (``validation.feed``), each
    prediction the argmax of the sample's first output. A program that cannot be fed other
    inputs (built on an SSH board, run by the farm) gives no figure and says why."""
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.errors import ProgramPatchError
    from aidge_deploy.registry import remote_backend
    from aidge_deploy.validation.feed import outputs_through_one_build

    target = str(config_values.get("target") or artifact.manifest.target)
    config = DeployConfig(**{**config_values, "target": target})
    if remote_backend(config.backend_kind) is not None:
        return AccuracyResult(
            target,
            None,
            len(samples),
            f"backend {config.backend_kind!r} runs elsewhere: its program cannot be fed "
            "the samples (bare-metal exports use the interactive protocol)",
        )
    try:
        outputs, last = outputs_through_one_build(
            artifact, config, sample, samples, work_dir, progress=progress
        )
    except ProgramPatchError as exc:
        return AccuracyResult(
            target, None, len(samples), f"the samples cannot be fed to one build: {exc.message}"
        )
    predicted = [int(np.argmax(out[0])) for out in outputs]
    correct = sum(int(p == int(label)) for p, label in zip(predicted, labels, strict=True))
    return AccuracyResult(target, correct / len(samples), len(samples), None, last.provenance.value)


def reference_accuracy(
    model: Path, samples: Sequence[np.ndarray], labels: Sequence[int], engine: ReferenceEngine
) -> float:
    """Top-1 accuracy of the ONNX model itself (the reference engine) on the samples."""
    predicted = [int(np.argmax(run_reference(model, s, engine)[0])) for s in samples]
    return sum(p == y for p, y in zip(predicted, labels, strict=True)) / len(labels)


__all__ = [
    "AccuracyResult",
    "accuracy_from_outputs",
    "accuracy_on_target",
    "no_interactive_protocol",
    "reference_accuracy",
]
