"""The campaign file: which models, on which targets, with which options, measuring what.

Why this module exists: a campaign is written once and run many times (after a crash, with
one more model, on the farm instead of the desk), so its file is validated as a whole before
anything is exported — a typo in the tenth target must not surface after an hour of runs.
The schema is pydantic (extra keys refused, with the path of the bad entry); paths are
relative to the file. Example::

    version: 1
    name: kws-variants
    models:
      - models/*.onnx
      - {path: kws.onnx, calibration: kws_calib/, dataset: kws_val/}  # its own samples
      - {path: exports/lenet_an386}                 # an export: runs on its own target
    targets: [host, mps2-an386, lab:nucleo, farm:mps3-an547]
    lab: lab.yaml                                   # boards named lab:NAME
    farm: {url: http://farm:8000/api, username: ci} # targets named farm:TARGET[@BOARD]
    options:                                        # a list is an axis, a value is fixed
      dtype: [float32, int8]
      iterations: 10
      heuristic: [nb_op, mem]
    calibration: calib/                             # int8 calibration samples (.npy/.npz)
    measure:
      counters: {mps2-an386: [emulated], host: [task-clock]}  # or a list for every target
      power: {mps2-an386: emulated, host: rapl}     # or one monitor for every target
      validation: {dataset: labelled/, samples: 50} # .npz files with x and y: accuracy
    run: {timeout: 300, jobs: 2, farm_jobs: 8}
    history: results.db                             # the results history (or a database URL)

The farm's password comes from ``AIDGE_DEPLOY_API_PASSWORD``, never from the file.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from aidge_deploy.errors import ConfigError
from aidge_deploy.lab import FarmSpec
from aidge_deploy.modelexport import Dtype, Heuristic

CAMPAIGN_VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class CampaignError(ConfigError):
    """The campaign file (or the ``--targets`` list) is missing, malformed or inconsistent."""


class TargetKind(StrEnum):
    """How a campaign target is named, and so how it is reached."""

    NAME = "name"  # a registered target run here: the host or an emulated board
    LAB = "lab"  # a board of the campaign's lab file (probe, SSH, emulated or farm)
    FARM = "farm"  # a target (or one board) of the campaign's board farm


class TargetRef(BaseModel):
    """One entry of ``targets``: ``NAME``, ``lab:BOARD`` or ``farm:TARGET[@BOARD]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: TargetKind
    name: str = Field(min_length=1)
    #: farm only: the farm board to use (default: any board of the target)
    board: str | None = None

    @classmethod
    def parse(cls, text: str) -> TargetRef:
        """``host``, ``mps2-an386``, ``lab:nucleo``, ``farm:mps2-an386``, ``farm:T@BOARD``."""
        text = text.strip()
        prefix, sep, rest = text.partition(":")
        if not sep:
            return cls(kind=TargetKind.NAME, name=text)
        if prefix == TargetKind.LAB:
            return cls(kind=TargetKind.LAB, name=rest.strip())
        if prefix == TargetKind.FARM:
            target, _, board = rest.partition("@")
            return cls(kind=TargetKind.FARM, name=target.strip(), board=board.strip() or None)
        raise ValueError(
            f"{text!r}: a target is NAME, lab:BOARD or farm:TARGET[@BOARD] (not {prefix}:)"
        )

    @property
    def label(self) -> str:
        """How tables and folders name it (unique within a campaign)."""
        if self.kind is TargetKind.NAME:
            return self.name
        board = f"@{self.board}" if self.board else ""
        return f"{self.kind.value}:{self.name}{board}"


def _target_ref(value: Any) -> Any:
    if isinstance(value, str):
        return TargetRef.parse(value)
    if isinstance(value, dict) and "kind" not in value:
        # mapping forms: {target: T}, {board: B} (lab), {target: T, farm: true, board: B}
        raw = dict(value)
        if raw.pop("farm", False):
            return {"kind": TargetKind.FARM, "name": raw.pop("target", None), **raw}
        if "board" in raw:
            return {"kind": TargetKind.LAB, "name": raw.pop("board"), **raw}
        return {"kind": TargetKind.NAME, "name": raw.pop("target", None), **raw}
    return value


TargetField = Annotated[TargetRef, BeforeValidator(_target_ref)]


class ModelRef(BaseModel):
    """One entry of ``models``: an ONNX file, a glob of them, or an export folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1)
    #: the model's name in tables (default: the file or folder name)
    name: str | None = Field(default=None, pattern=_NAME.pattern)
    #: this model's int8 calibration inputs and labelled set (default: the campaign's)
    calibration: Path | None = None
    dataset: Path | None = None


def _model_ref(value: Any) -> Any:
    return {"path": value} if isinstance(value, str) else value


def _axis(value: Any) -> Any:
    """A scalar option is a one-value axis."""
    return list(value) if isinstance(value, list | tuple) else [value]


class OptionAxes(BaseModel):
    """The option axes: every combination of their values is run (a scalar is fixed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: Annotated[tuple[Dtype, ...], BeforeValidator(_axis)] = (Dtype.FLOAT32,)
    iterations: Annotated[tuple[Annotated[int, Field(ge=1)], ...], BeforeValidator(_axis)] = (10,)
    warmup: Annotated[tuple[Annotated[int, Field(ge=0)], ...], BeforeValidator(_axis)] = (2,)
    #: Aidge's graph-adaptation heuristic (``ExportConfig.heuristic``)
    heuristic: Annotated[tuple[Heuristic, ...], BeforeValidator(_axis)] = (Heuristic.NB_OP,)
    #: Aidge's memory wrapping (``ExportConfig.mem_wrap``)
    mem_wrap: Annotated[tuple[bool, ...], BeforeValidator(_axis)] = (False,)

    @field_validator("*")
    @classmethod
    def _not_empty_nor_repeated(cls, values: tuple[Any, ...]) -> tuple[Any, ...]:
        if not values:
            raise ValueError("an axis needs at least one value")
        if len(set(values)) != len(values):
            raise ValueError(f"a value is repeated: {list(values)}")
        return values

    def axes(self) -> dict[str, tuple[Any, ...]]:
        return {name: getattr(self, name) for name in type(self).model_fields}


class ValidationSpec(BaseModel):
    """Accuracy on target, over a labelled dataset (``.npz`` files holding ``x`` and ``y``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the labelled set of every model without one of its own
    dataset: Path | None = None
    #: use only the first N samples (the board receives every sample over its UART)
    samples: int | None = Field(default=None, ge=1)


class MeasureSpec(BaseModel):
    """What each cell measures besides latency and memory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: per-layer profile (the export's profiling); off makes smaller, faster firmware
    profile: bool = True
    #: counters (``--counters``) for every target, or per target (``{mps2-an386: [emulated],
    #: host: [task-clock]}``; the targets it does not name count none)
    counters: tuple[str, ...] | dict[str, tuple[str, ...]] = ()
    #: a power monitor (``--power``: emulated, reference, rapl, hwmon[:NAME], joulescope...)
    #: for every target, or per target (``{mps2-an386: emulated, lab:pi: hwmon}``; the
    #: targets it does not name measure no power)
    power: str | dict[str, str] | None = None
    power_window: float | None = Field(default=None, gt=0)
    validation: ValidationSpec | None = None

    def power_for(self, label: str, target: str) -> str | None:
        """The power monitor of the target named ``label`` (hardware target ``target``)."""
        if isinstance(self.power, dict):
            return self.power.get(label) or self.power.get(target)
        return self.power

    def counters_for(self, label: str, target: str) -> tuple[str, ...]:
        """The counters of the target named ``label`` (hardware target ``target``)."""
        if isinstance(self.counters, dict):
            return self.counters.get(label) or self.counters.get(target) or ()
        return self.counters

    @field_validator("counters", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        def split(item: Any) -> Any:
            if isinstance(item, str):
                return tuple(c.strip() for c in item.split(",") if c.strip())
            return item

        if isinstance(value, dict):
            return {k: split(v) for k, v in value.items()}
        return split(value)


class RunSpec(BaseModel):
    """How cells are run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: timeout of each run of a program on its target, in seconds
    timeout: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    #: emulated cells run at once (default: this machine's cores)
    jobs: int | None = Field(default=None, ge=1)
    #: farm cells submitted at once (the farm queues them for its boards)
    farm_jobs: int = Field(default=8, ge=1)


class CampaignFile(BaseModel):
    """A whole campaign file (paths still relative to ``source``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    name: str | None = Field(default=None, pattern=_NAME.pattern)
    models: tuple[Annotated[ModelRef, BeforeValidator(_model_ref)], ...] = Field(min_length=1)
    targets: tuple[TargetField, ...] = Field(min_length=1)
    lab: Path | None = None
    farm: FarmSpec | None = None
    options: OptionAxes = OptionAxes()
    calibration: Path | None = None
    measure: MeasureSpec = MeasureSpec()
    run: RunSpec = RunSpec()
    #: the results history each finished cell is recorded in (a SQLite file or a database
    #: URL; default: ``history.db`` in the campaign's folder)
    history: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> CampaignFile:
        labels = [t.label for t in self.targets]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"targets named twice: {', '.join(repeated)}")
        if any(t.kind is TargetKind.LAB for t in self.targets) and self.lab is None:
            raise ValueError("lab:BOARD targets need the campaign's 'lab' file")
        known = set(labels) | {t.name for t in self.targets}
        for what, per_target in (
            ("power", self.measure.power),
            ("counters", self.measure.counters),
        ):
            if isinstance(per_target, dict):
                unknown = sorted(set(per_target) - known)
                if unknown:
                    raise ValueError(
                        f"measure.{what} names {', '.join(unknown)}, not a target of the campaign"
                    )
        if any(t.kind is TargetKind.FARM for t in self.targets) and self.farm is None:
            raise ValueError(
                "farm:TARGET targets need the campaign's 'farm' ({url: ..., username: ...})"
            )
        return self

    def resolve(self, path: Path | None, base: Path) -> Path | None:
        """``path`` relative to the campaign file's folder ``base``."""
        if path is None:
            return None
        path = path.expanduser()
        return path if path.is_absolute() else base / path


def parse_campaign(data: Any, source: Path | None = None) -> CampaignFile:
    """Validate campaign data already read from YAML."""
    where = str(source) if source is not None else "campaign"
    if not isinstance(data, dict):
        raise CampaignError(
            f"{where}: expected a mapping with 'models' and 'targets', got {type(data).__name__}",
            hint="See `aidge-deploy campaign --help` for the format.",
        )
    try:
        return CampaignFile.model_validate(data)
    except ValidationError as exc:
        raise CampaignError(
            f"{where}: {describe_errors(exc)}",
            hint="See `aidge-deploy campaign --help` for the format.",
        ) from None


def load_campaign(path: Path) -> CampaignFile:
    """Read and validate a campaign file."""
    from aidge_deploy.yamlfile import read_yaml

    data = read_yaml(path, "campaign file", CampaignError, "Pass the campaign's YAML file.")
    return parse_campaign(data, source=path)


def parse_targets(text: str) -> tuple[TargetRef, ...]:
    """The ``--targets a,b,c`` list of ``profile`` and ``run``."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise CampaignError("--targets names no target", hint="e.g. --targets host,mps2-an386")
    refs = []
    for name in names:
        try:
            refs.append(TargetRef.parse(name))
        except (ValueError, ValidationError) as exc:
            raise CampaignError(
                f"--targets: {exc}", hint="e.g. --targets host,mps2-an386,farm:mps3-an547"
            ) from None
    labels = [r.label for r in refs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise CampaignError(f"--targets names {', '.join(repeated)} twice")
    return tuple(refs)


def describe_errors(exc: ValidationError) -> str:
    """pydantic's errors as ``path.to.field: message`` (one line each, joined)."""
    parts = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{path}: {msg}")
    return "; ".join(parts)


__all__ = [
    "CAMPAIGN_VERSION",
    "CampaignError",
    "CampaignFile",
    "MeasureSpec",
    "ModelRef",
    "OptionAxes",
    "RunSpec",
    "TargetKind",
    "TargetRef",
    "ValidationSpec",
    "load_campaign",
    "parse_campaign",
    "parse_targets",
]
