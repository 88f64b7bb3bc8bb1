"""A campaign file resolved into cells: one model, one target, one option set each.

Why this module exists: everything a cell's result depends on is fixed here, before any
run, and hashed into the cell's key — the model's bytes, the export settings and int8
calibration set (through the export cache's own key, so a cell and the export it runs
agree on what "the same" means), how the target is reached, what is measured and with
which dataset. A campaign run again after a crash, or with one more model, finds the cells
whose key already has a result and runs only the others. Nothing here exports or runs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from aidge_deploy.campaign.models import (
    ModelEntry,
    ModelKind,
    check_int8_inputs,
    resolve_models,
    slug,
)
from aidge_deploy.campaign.spec import CampaignError, CampaignFile, MeasureSpec, RunSpec
from aidge_deploy.campaign.targets import TargetEntry, resolve_target
from aidge_deploy.errors import ConfigError
from aidge_deploy.lab import load_lab
from aidge_deploy.modelexport import ApplicationKind, Dtype, ExportRequest, Heuristic

CELL_SCHEMA = "aidge-deploy/campaign-cell"
CELL_SCHEMA_VERSION = 1
#: Aidge's exporter calibrates int8 on the first 100 inputs it is given (``NB_CALIB``)
AIDGE_CALIBRATION_LIMIT = 100
#: what int8 exports are quantised with (``aidge_core.export_utils.export.quantize_graph``)
QUANTISATION_METHOD = (
    "aidge_quantization post-training quantisation: int8 weights and activations, int32 "
    "biases, MAX clipping over the calibration set, single-shift rescaling"
)


@dataclass(frozen=True)
class CellOptions:
    """One combination of the option axes (None: fixed by an export, not by the campaign)."""

    dtype: Dtype
    iterations: int
    warmup: int
    heuristic: Heuristic | None = Heuristic.NB_OP
    mem_wrap: bool | None = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype.value,
            "iterations": self.iterations,
            "warmup": self.warmup,
            "heuristic": None if self.heuristic is None else self.heuristic.value,
            "mem_wrap": self.mem_wrap,
        }

    def label(self, axes: Sequence[str]) -> str:
        """The option set as a sub-column names it: only the axes that vary."""
        values = self.as_dict()
        parts = []
        for name in axes:
            value = values[name]
            if name == "dtype":
                parts.append(str(value))
            elif isinstance(value, bool):
                parts.append(f"{name}={'on' if value else 'off'}")
            else:
                parts.append(f"{name}={value}")
        return " ".join(parts) or "-"


@dataclass(frozen=True)
class Cell:
    model: ModelEntry
    target: TargetEntry
    options: CellOptions
    key: str

    @property
    def id(self) -> str:
        """The cell's folder name: readable, and unique by its key."""
        opts = self.options
        parts = [self.model.name, self.target.label, opts.dtype.value]
        if opts.heuristic not in (None, Heuristic.NB_OP):
            parts.append(f"h-{opts.heuristic}")
        if opts.mem_wrap:
            parts.append("memwrap")
        parts.append(f"it{opts.iterations}")
        return slug("-".join(parts)) + "-" + self.key[:12]

    def export_request(
        self, out_dir: Path, kind: ApplicationKind, measure: MeasureSpec
    ) -> ExportRequest:
        """The export this cell runs (``BENCHMARK``) or measures accuracy with (``VALIDATION``
        on bare-metal boards, ``OUTPUT`` elsewhere)."""
        opts = self.options
        calibration = self.model.calibration.arrays if self.model.calibration else ()
        common: dict[str, Any] = {
            "model": self.model.path,
            "target": self.target.target,
            "out_dir": out_dir,
            "dtype": opts.dtype,
            "kind": kind,
            "heuristic": opts.heuristic or Heuristic.NB_OP,
            "mem_wrap": bool(opts.mem_wrap),
            # float32 needs one sample input; int8 calibrates on all of them
            "inputs": calibration if opts.dtype is Dtype.INT8 else calibration[:1],
        }
        if kind is ApplicationKind.VALIDATION:
            dataset = self.model.dataset
            n = len(dataset.arrays) if dataset is not None else 0
            return ExportRequest(
                **common,
                nb_iterations=1,
                nb_warmup=0,
                profiling=False,
                nb_validation_iterations=n,
            )
        if kind is ApplicationKind.OUTPUT:  # the accuracy's export where boards have no protocol
            return ExportRequest(**common, nb_iterations=1, nb_warmup=0, profiling=False)
        return ExportRequest(
            **common,
            nb_iterations=opts.iterations,
            nb_warmup=opts.warmup,
            profiling=measure.profile,
        )


@dataclass(frozen=True)
class CampaignPlan:
    name: str
    source: Path | None
    models: tuple[ModelEntry, ...]
    targets: tuple[TargetEntry, ...]
    cells: tuple[Cell, ...]
    measure: MeasureSpec
    run: RunSpec
    #: the option axes with more than one value (sub-columns of the report's tables)
    varying: tuple[str, ...]
    #: the results history the file names (a path resolved against it, or a URL)
    history: str | None = None

    def cell(self, cell_id: str) -> Cell:
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(cell_id)


# ----------------------------------------------------------------------------- cells


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def cell_key(
    model: ModelEntry, target: TargetEntry, options: CellOptions, measure: MeasureSpec
) -> str:
    """The hex key of everything a cell's result depends on."""
    from aidge_deploy.exportcache import export_key

    if model.kind is ModelKind.EXPORT:
        from aidge_deploy.artifact import export_hash, load_export_artifact

        what: dict[str, Any] = {"export_sha256": export_hash(load_export_artifact(model.path))}
    else:
        cell = Cell(model, target, options, "")
        request = cell.export_request(Path("."), ApplicationKind.BENCHMARK, measure)
        what = {"export_key": export_key(request)}
        if model.dataset is not None:
            what["validation_export_key"] = export_key(
                cell.export_request(Path("."), ApplicationKind.VALIDATION, measure)
            )
    doc = {
        "schema": f"{CELL_SCHEMA}/{CELL_SCHEMA_VERSION}",
        "model": what,
        "target": target.identity(),
        "options": options.as_dict(),
        "measure": {
            "profile": measure.profile,
            "counters": list(measure.counters_for(target.label, target.target)),
            "power": measure.power_for(target.label, target.target),
            "power_window": measure.power_window,
            "dataset": None if model.dataset is None else model.dataset.digest,
        },
        "aidge_deploy": _package_version("aidge-deploy"),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _export_options(model: ModelEntry) -> CellOptions:
    from aidge_deploy.artifact import load_export_artifact

    manifest = load_export_artifact(model.path).manifest
    app = dict(manifest.application_config or {})
    int8 = any(str(t.get("dtype", "")).startswith("int8") for t in manifest.inputs)
    return CellOptions(
        dtype=Dtype.INT8 if int8 else Dtype.FLOAT32,
        iterations=int(app.get("nb_iterations") or 0),
        warmup=int(app.get("nb_warmup") or 0),
        heuristic=None,
        mem_wrap=None,
    )


def expand_cells(
    models: Sequence[ModelEntry],
    targets: Sequence[TargetEntry],
    spec: CampaignFile,
) -> tuple[Cell, ...]:
    """Every (model, target, option set) the campaign runs, in a stable order."""
    axes = spec.options.axes()
    combos = [
        CellOptions(dtype=d, iterations=i, warmup=w, heuristic=h, mem_wrap=m)
        for d, i, w, h, m in product(
            axes["dtype"], axes["iterations"], axes["warmup"], axes["heuristic"], axes["mem_wrap"]
        )
    ]
    cells = []
    for model in models:
        for target in targets:
            if model.kind is ModelKind.EXPORT:
                if target.target.lower() != (model.export_target or "").lower():
                    continue  # an export runs on its own target only
                options_list = [_export_options(model)]
            else:
                options_list = combos
            for options in options_list:
                key = cell_key(model, target, options, spec.measure)
                cells.append(Cell(model, target, options, key))
    if not cells:
        raise CampaignError(
            "the campaign has no cell: its exports are for none of its targets",
            hint="An export runs on the target it was exported for; add that target.",
        )
    return tuple(cells)


def plan_campaign(
    spec: CampaignFile,
    source: Path | None,
    *,
    calibration: Path | None = None,
    local_options: Mapping[str, Any] | None = None,
    farm_options: Mapping[str, Any] | None = None,
) -> CampaignPlan:
    """Resolve ``spec`` (read from ``source``; paths relative to its folder) into cells.

    ``calibration`` overrides the file's calibration folder (``--calibration``);
    ``local_options`` are connection options for bare target names; ``farm_options`` the
    farm's ``DeployConfig`` options when the command line gives them (``--api-url``).
    """
    base = source.parent if source is not None else Path.cwd()
    lab_path = spec.resolve(spec.lab, base)
    try:
        lab = load_lab(lab_path) if lab_path is not None else None
    except ConfigError as exc:
        raise CampaignError(exc.message, hint=exc.hint) from None
    farm: dict[str, Any] | None = dict(farm_options) if farm_options else None
    if farm is None and spec.farm is not None:
        farm = {"api_url": spec.farm.url, "api_poll_interval": spec.farm.poll_interval}
        if spec.farm.username:
            farm["api_username"] = spec.farm.username
    targets = tuple(
        resolve_target(ref, lab=lab, farm=farm, local_options=local_options) for ref in spec.targets
    )
    models = resolve_models(spec, base, calibration)
    check_int8_inputs(models, spec)
    cells = expand_cells(models, targets, spec)
    varying = tuple(name for name, values in spec.options.axes().items() if len(values) > 1)
    name = spec.name or (source.stem if source is not None else models[0].name)
    return CampaignPlan(
        slug(name),
        source,
        models,
        targets,
        cells,
        spec.measure,
        spec.run,
        varying,
        history=_history_location(spec.history, source),
    )


def _history_location(history: str | None, source: Path | None) -> str | None:
    """The file's ``history:``: a database URL as it is, a path against the file's folder."""
    if history is None or "://" in history:
        return history
    path = Path(history).expanduser()
    if not path.is_absolute() and source is not None:
        path = source.parent / path
    return str(path)


def quantisation_record(cell: Cell) -> dict[str, Any] | None:
    """What the cell's int8 export was quantised with (its manifest says it; None for
    float32 and for exports made elsewhere)."""
    if cell.options.dtype is not Dtype.INT8 or cell.model.kind is ModelKind.EXPORT:
        return None
    calibration = cell.model.calibration
    if calibration is None:
        return {
            "method": QUANTISATION_METHOD,
            "calibration": "random",
            "calibration_source": "one random input, uniform in [-1, 1] (seed 0): no "
            "calibration set was given (calibration: DIR, or --calibration DIR), so the "
            "scales are not those of real inputs",
            "calibration_samples": 1,
            "aidge_quantization": _package_version("aidge_quantization"),
        }
    used = min(len(calibration.arrays), AIDGE_CALIBRATION_LIMIT)
    return {
        "method": QUANTISATION_METHOD,
        "calibration": "samples",
        "calibration_source": calibration.source,
        "calibration_samples": used,
        "calibration_samples_given": len(calibration.arrays),
        "calibration_sha256": calibration.digest,
        "aidge_quantization": _package_version("aidge_quantization"),
    }


__all__ = [
    "AIDGE_CALIBRATION_LIMIT",
    "QUANTISATION_METHOD",
    "CampaignPlan",
    "Cell",
    "CellOptions",
    "cell_key",
    "expand_cells",
    "plan_campaign",
    "quantisation_record",
]
