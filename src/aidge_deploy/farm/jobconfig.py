"""The part of a ``DeployConfig`` that travels with a farm job: one typed, bounded model.

Only session facts about *what to measure* travel (timeouts, counters, benchmark and
validation settings with their samples); how the board is reached (serial port, probe,
flash method) is the agent's lab file's business, and secrets (``api_password``) never
leave the client. The agent applies these values over its board's own options.

``JobConfig`` is the one definition the client encodes with, the service validates with
(a value no board could use is a 422 naming its field, at submission: a number that is
not finite or overflows, a count out of range, a sample whose values do not fit its
dtype or whose data does not fill its shape) and the board host decodes with. Samples
are also checked against the export's own inputs at submission (``check_samples``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from aidge_deploy.config import Aggregation, BenchmarkConfig, DeployConfig, ValidationConfig
from aidge_deploy.errors import ConfigError
from aidge_deploy.farm.fields import Line

#: the DeployConfig fields a job carries
JOB_FIELDS = (
    "run_timeout",
    "counters",
    "max_counters_per_pass",
    "aggregation",
    "uart_timeout",
    "uart_capture_duration",
    "end_keyword",
    "build_jobs",
    "extra",
    "benchmark",
    "validation",
)
#: the dtypes a validation sample may have (numbers a firmware's input can hold)
SampleDtype = Literal[
    "bool",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
]
#: most values in one sample, and over all the samples of a job
MAX_SAMPLE_VALUES = 4_000_000
MAX_JOB_SAMPLE_VALUES = 16_000_000
#: a firmware's counts are C ints
INT32_MAX = 2**31 - 1
#: the longest timeout a job may ask for (s): a week
MAX_SECONDS = 7 * 24 * 3600.0
#: the serialised size of ``extra``
MAX_EXTRA_BYTES = 64 * 1024

PositiveSeconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
Label = Annotated[int, Field(ge=-(2**31), le=INT32_MAX)]
#: a JSON number of a sample: finite (``1e400`` is read as infinity, and refused)
SampleValue = Annotated[float, Field(allow_inf_nan=False)] | int | bool


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SampleArray(_Model):
    """One validation sample: a numeric array as JSON (dtype, shape, flat C-order data)."""

    dtype: SampleDtype
    shape: list[Annotated[int, Field(ge=0, le=MAX_SAMPLE_VALUES)]] = Field(max_length=8)
    data: list[SampleValue] = Field(max_length=MAX_SAMPLE_VALUES)

    @model_validator(mode="after")
    def _fits(self) -> SampleArray:
        size = math.prod(self.shape)
        if size != len(self.data):
            raise ValueError(
                f"shape {self.shape} holds {size} values, but data has {len(self.data)}"
            )
        dtype = np.dtype(self.dtype)
        if dtype.kind in "iub":
            low, high = (
                (0, 1)
                if dtype.kind == "b"
                else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
            )
            for index, value in enumerate(self.data):
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError(f"data[{index}] = {value!r} is not a whole number ({dtype})")
                if not low <= int(value) <= high:
                    raise ValueError(
                        f"data[{index}] = {value!r} does not fit {dtype} [{low}, {high}]"
                    )
        else:
            top = float(np.finfo(dtype).max)
            bad = next((i for i, v in enumerate(self.data) if abs(float(v)) > top), None)
            if bad is not None:
                raise ValueError(f"data[{bad}] = {self.data[bad]!r} overflows {dtype}")
        return self

    def array(self) -> np.ndarray:
        return np.asarray(self.data, dtype=np.dtype(self.dtype)).reshape(self.shape)

    @classmethod
    def of(cls, value: Any) -> dict[str, Any]:
        """The JSON form of a numeric array."""
        arr = np.asarray(value)
        return {"dtype": str(arr.dtype), "shape": list(arr.shape), "data": arr.reshape(-1).tolist()}


class BenchmarkSettings(_Model):
    """``aidge_core``'s ``BenchmarkConfig``, bounded."""

    mode: Literal["benchmark", "output"] = "benchmark"
    nb_warmup: Count = 10
    nb_iterations: Count = 10000
    profiling: bool = False
    tinymlbenchmark: bool = False
    tinyml_benchmark_model: Annotated[Line, Field(max_length=64)] = "ic01"
    sbc_inner_iterations: Count = 100


class ValidationSettings(_Model):
    """``aidge_core``'s ``ValidationConfig``, bounded, with its samples and labels."""

    samples: list[SampleArray] | None = Field(default=None, max_length=100_000)
    labels: list[Label] | None = Field(default=None, max_length=100_000)
    nb_validation_iterations: Count | None = None
    inference_type: Literal["auto", "classification", "autoencoder"] = "auto"
    validation_on_target: bool = False

    @model_validator(mode="after")
    def _bounded(self) -> ValidationSettings:
        total = sum(len(s.data) for s in self.samples or ())
        if total > MAX_JOB_SAMPLE_VALUES:
            raise ValueError(
                f"the samples hold {total} values, more than a job carries ({MAX_JOB_SAMPLE_VALUES})"
            )
        return self


class JobConfig(_Model):
    """The measurement settings of a farm job (``None``: the board's default)."""

    run_timeout: PositiveSeconds | None = None
    counters: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]] | None = Field(
        default=None, max_length=64
    )
    max_counters_per_pass: Annotated[int, Field(ge=1, le=1024)] | None = None
    aggregation: Aggregation | None = None
    uart_timeout: PositiveSeconds | None = None
    uart_capture_duration: PositiveSeconds | None = None
    end_keyword: Annotated[Line, Field(max_length=200)] | None = None
    build_jobs: Annotated[int, Field(ge=1, le=1024)] | None = None
    extra: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")], Any] | None = Field(
        default=None, max_length=64
    )
    benchmark: BenchmarkSettings | None = None
    validation: ValidationSettings | None = None

    @model_validator(mode="after")
    def _plain_extra(self) -> JobConfig:
        if self.extra is not None:
            try:
                text = json.dumps(self.extra, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"extra holds a value that is not finite JSON: {exc}") from None
            if len(text) > MAX_EXTRA_BYTES:
                raise ValueError(f"extra is larger than {MAX_EXTRA_BYTES} bytes as JSON")
        return self

    def wire(self) -> dict[str, Any]:
        """The JSON a job stores and its agent receives."""
        return self.model_dump(mode="json")

    def deploy_values(self) -> dict[str, Any]:
        """``DeployConfig`` keyword arguments (the fields that are set)."""
        values: dict[str, Any] = {}
        for name in JOB_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "counters":
                value = tuple(value)
            elif name == "benchmark":
                value = BenchmarkConfig(**value.model_dump())
            elif name == "validation":
                raw = value.model_dump(exclude={"samples"})
                raw["samples"] = (
                    None if value.samples is None else [s.array() for s in value.samples]
                )
                value = ValidationConfig(**raw)
            values[name] = value
        return values


def encode_config(config: DeployConfig) -> dict[str, Any]:
    """The job fields of ``config``, as JSON (``JobConfig``'s wire form, unchecked)."""
    out: dict[str, Any] = {}
    for name in JOB_FIELDS:
        value = getattr(config, name)
        if name == "counters":
            value = list(value)
        elif name == "aggregation":
            value = Aggregation(value).value
        elif name == "benchmark" and value is not None:
            value = dataclasses.asdict(value)
        elif name == "validation" and value is not None:
            raw = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            raw["samples"] = (
                None if value.samples is None else [SampleArray.of(x) for x in value.samples]
            )
            raw["labels"] = None if value.labels is None else [int(x) for x in value.labels]
            value = raw
        out[name] = value
    return out


def problems(exc: ValidationError, prefix: str = "") -> str:
    """Pydantic's errors as ``field.path: message``, the first five."""
    return "; ".join(
        f"{'.'.join(str(p) for p in (prefix, *e.get('loc', ())) if p != '')}: {e.get('msg', 'invalid')}"
        for e in exc.errors()[:5]
    )


def parse_config(data: Any) -> JobConfig:
    """A job's config JSON, checked (``ConfigError`` naming the field)."""
    if isinstance(data, JobConfig):
        return data
    if not isinstance(data, dict):
        raise ConfigError("the job config must be a JSON object")
    unknown = sorted(set(data) - set(JOB_FIELDS))
    if unknown:
        raise ConfigError(
            f"the job config has fields a farm job does not carry: {', '.join(unknown)}",
            hint=f"A job carries: {', '.join(JOB_FIELDS)}; the board's connection is the "
            "farm's business.",
        )
    try:
        return JobConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"bad job config: {problems(exc, 'config')}") from None


def decode_config(data: Any) -> dict[str, Any]:
    """``DeployConfig`` keyword arguments from a job's config JSON (checked)."""
    return parse_config(data).deploy_values()


def check_samples(
    config: JobConfig, inputs: Sequence[dict[str, Any]], nb_validation: int | None = None
) -> None:
    """The job's validation samples against the export's inputs (the manifest's first
    input: its C type and dims), with the board host's own checks — at submission, not on
    the board. ``ConfigError`` naming the sample."""
    validation = config.validation
    if validation is None or not validation.samples or not inputs:
        return
    from aidge_deploy.boards.baremetal.layout import to_exported_layout
    from aidge_deploy.protocols.manifest_facts import TensorSpec, numpy_dtype
    from aidge_deploy.protocols.uart_validation import format_sample

    first = inputs[0]
    try:
        dims = [int(d) for d in first.get("dims") or ()]
        c_type = str(first["dtype"])
        spec = TensorSpec(
            str(first.get("name", "input")),
            c_type,
            numpy_dtype(c_type),
            math.prod(dims) if dims else int(first["size"]),
        )
    except (KeyError, TypeError, ValueError, ConfigError):
        return  # a manifest without usable input facts: the board host says what is wrong
    for index, sample in enumerate(validation.samples):
        where = f"config.validation.samples[{index}]"
        try:
            array = sample.array()
            if dims:
                array = to_exported_layout(array, dims)
            if spec.dtype.kind == "f" and array.size:
                top = float(np.finfo(spec.dtype).max)
                if float(np.max(np.abs(array.astype(np.float64)))) > top:
                    raise ConfigError(
                        f"a value of the sample overflows the input's type ({c_type})",
                        hint="Scale the samples to the range the model's input takes.",
                    )
            format_sample(array, spec)
        except ConfigError as exc:
            raise ConfigError(
                f"{where}: {exc.message} (the export's input {spec.name!r} is {c_type} "
                f"{dims or [spec.size]})",
                hint=exc.hint,
            ) from None
    if nb_validation and len(validation.samples) < nb_validation:
        raise ConfigError(
            f"config.validation.samples: the export's firmware expects {nb_validation} "
            f"validation samples, {len(validation.samples)} given",
            hint="Pass at least nb_validation_iterations samples, or re-export with fewer.",
        )


__all__ = [
    "JOB_FIELDS",
    "BenchmarkSettings",
    "JobConfig",
    "SampleArray",
    "ValidationSettings",
    "check_samples",
    "decode_config",
    "encode_config",
    "parse_config",
    "problems",
]
