"""The models of a campaign: ONNX files and export folders, with their samples.

Why this module exists: what a model *is* for a campaign — its file or export, its name in
the tables, the int8 calibration inputs and the labelled set it is measured with — is
resolved and checked once, before any cell runs: a glob that matches nothing, two models
of one name, samples of the wrong shape or outside the [-1, 1] range Aidge's int8 export
scales into int8 are errors then, not an hour later.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path

import numpy as np

from aidge_deploy.campaign.spec import CampaignError, CampaignFile, ModelRef
from aidge_deploy.errors import ConfigError
from aidge_deploy.modelexport import Dtype


def slug(text: str) -> str:
    """A name safe in a folder name and a table: other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")[:96]


class ModelKind(StrEnum):
    ONNX = "onnx"  # exported by the campaign, once per target and option set
    EXPORT = "export"  # an export folder: its target and settings are fixed


@dataclass(frozen=True)
class Samples:
    """A set of model inputs (and labels) and where they came from."""

    source: str
    arrays: tuple[np.ndarray, ...] = field(repr=False)
    labels: tuple[int, ...] = ()

    @cached_property
    def digest(self) -> str:
        from aidge_deploy.exportcache import inputs_digest

        digest = hashlib.sha256(inputs_digest(self.arrays).encode())
        digest.update(json.dumps(list(self.labels)).encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: Path
    kind: ModelKind
    #: int8 calibration samples (None: the exporter's random input) and labelled samples
    calibration: Samples | None = None
    dataset: Samples | None = None
    #: an export's own target (EXPORT models only)
    export_target: str | None = None


def _has_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def _model_paths(ref: ModelRef, base: Path) -> list[Path]:
    pattern = str(Path(ref.path).expanduser())
    full = pattern if Path(pattern).is_absolute() else str(base / pattern)
    if _has_glob(pattern):
        found = sorted(Path(p) for p in glob.glob(full, recursive=True))
        if not found:
            raise CampaignError(
                f"models: {ref.path!r} matches nothing (relative to {base})",
                hint="Check the pattern; paths are relative to the campaign file.",
            )
        return found
    path = Path(full)
    if not path.exists():
        raise CampaignError(f"models: {ref.path} not found (relative to {base})")
    return [path]


def _model_kind(path: Path) -> ModelKind:
    from aidge_deploy.exportspec import EXPORT_MANIFEST_NAME

    if path.is_dir():
        if (path / EXPORT_MANIFEST_NAME).is_file():
            return ModelKind.EXPORT
        raise CampaignError(
            f"models: {path} is a folder without {EXPORT_MANIFEST_NAME}",
            hint="Name ONNX files or Aidge export folders.",
        )
    return ModelKind.ONNX


def load_samples(
    folder: Path, shape: tuple[int, ...], *, labelled: bool, limit: int | None = None
) -> Samples:
    """Inputs from ``.npy``/``.npz`` files (``validate --inputs``), or labelled samples from
    ``.npz`` files holding ``x`` and ``y`` (``validate --dataset``)."""
    from aidge_deploy.validation.inputs import load_dataset, load_inputs

    if not folder.is_dir():
        raise CampaignError(f"{folder} is not a folder of samples", hint="Pass a folder.")
    if labelled:
        xs, ys = load_dataset(folder, shape)
        if limit is not None:
            xs, ys = xs[:limit], ys[:limit]
        return Samples(str(folder), tuple(xs), tuple(ys))
    return Samples(str(folder), tuple(load_inputs(folder, shape)))


def resolve_models(
    spec: CampaignFile, base: Path, calibration: Path | None = None
) -> tuple[ModelEntry, ...]:
    """The campaign's models, with their calibration and labelled samples loaded."""
    from aidge_deploy.artifact import load_export_artifact
    from aidge_deploy.modelexport import check_onnx_model, onnx_input_shapes

    campaign_calib = calibration or spec.resolve(spec.calibration, base)
    validation = spec.measure.validation
    campaign_dataset = spec.resolve(validation.dataset, base) if validation else None
    limit = validation.samples if validation is not None else None
    entries: list[ModelEntry] = []
    for ref in spec.models:
        paths = _model_paths(ref, base)
        if ref.name is not None and len(paths) > 1:
            raise CampaignError(
                f"models: name {ref.name!r} given to a pattern of {len(paths)} files"
            )
        for path in paths:
            kind = _model_kind(path)
            name = ref.name or (path.name if kind is ModelKind.EXPORT else path.stem)
            if kind is ModelKind.EXPORT:
                artifact = load_export_artifact(path)
                entries.append(
                    ModelEntry(
                        slug(name), path.absolute(), kind, export_target=artifact.manifest.target
                    )
                )
                continue
            check_onnx_model(path)
            shapes = onnx_input_shapes(path)
            calib_dir = spec.resolve(ref.calibration, base) or campaign_calib
            dataset_dir = spec.resolve(ref.dataset, base) or campaign_dataset
            if len(shapes) != 1 and (calib_dir or dataset_dir):
                raise CampaignError(
                    f"{path.name} has {len(shapes)} inputs: calibration and validation sets "
                    "need models with one input (as Aidge's exporter does)"
                )
            shape = shapes[0][1]
            try:
                calib = load_samples(calib_dir, shape, labelled=False) if calib_dir else None
                data = (
                    load_samples(dataset_dir, shape, labelled=True, limit=limit)
                    if dataset_dir is not None
                    else None
                )
            except ConfigError as exc:
                raise CampaignError(
                    f"model {slug(name)}: {exc.message}",
                    hint="Give each model its own samples: models: [{path: ..., "
                    "calibration: DIR, dataset: DIR}]"
                    if len(spec.models) > 1 or len(paths) > 1
                    else exc.hint,
                ) from None
            entries.append(ModelEntry(slug(name), path.absolute(), kind, calib, data))
    names = [m.name for m in entries]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CampaignError(
            f"models: two models are named {', '.join(repeated)}",
            hint="Give them names: models: [{path: a/model.onnx, name: a-model}, ...]",
        )
    return tuple(entries)


def check_int8_inputs(models: Sequence[ModelEntry], spec: CampaignFile) -> None:
    """Aidge's int8 export scales inputs by 127 into int8: values past [-1, 1] overflow."""
    if Dtype.INT8 not in spec.options.dtype:
        return
    for model in models:
        for samples in (model.calibration, model.dataset):
            if samples is None or not samples.arrays:
                continue
            peak = max(float(np.max(np.abs(x))) for x in samples.arrays)
            if peak > 1.0:
                raise CampaignError(
                    f"{model.name}: int8 inputs from {samples.source} reach {peak:.3g}, "
                    "outside [-1, 1]",
                    hint="Aidge's int8 export scales inputs by 127 into int8: normalise them.",
                )


__all__ = [
    "ModelEntry",
    "ModelKind",
    "Samples",
    "check_int8_inputs",
    "load_samples",
    "resolve_models",
    "slug",
]
