"""The part of a ``DeployConfig`` that travels with a farm job, as JSON.

Only session facts about *what to measure* travel (timeouts, counters, benchmark and
validation settings with their samples); how the board is reached (serial port, probe,
flash method) is the agent's lab file's business, and secrets (``api_password``) never
leave the client. The agent applies these values over its board's own options.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from aidge_deploy.config import Aggregation, BenchmarkConfig, DeployConfig, ValidationConfig
from aidge_deploy.errors import ConfigError

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


def _array(value: Any) -> dict[str, Any]:
    arr = np.asarray(value)
    return {"dtype": str(arr.dtype), "shape": list(arr.shape), "data": arr.reshape(-1).tolist()}


def _unarray(value: Any) -> np.ndarray:
    if not isinstance(value, dict) or not {"dtype", "shape", "data"} <= set(value):
        raise ConfigError("a validation sample is not an encoded array")
    dtype = np.dtype(str(value["dtype"]))
    if dtype.kind not in "biuf":
        raise ConfigError(f"validation samples of dtype {dtype} are not accepted")
    return np.asarray(value["data"], dtype=dtype).reshape([int(d) for d in value["shape"]])


def encode_config(config: DeployConfig) -> dict[str, Any]:
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
            raw["samples"] = None if value.samples is None else [_array(x) for x in value.samples]
            raw["labels"] = None if value.labels is None else [int(x) for x in value.labels]
            value = raw
        out[name] = value
    return out


def decode_config(data: Any) -> dict[str, Any]:
    """``DeployConfig`` keyword arguments from a job's config JSON (checked)."""
    if not isinstance(data, dict):
        raise ConfigError("the job config must be a JSON object")
    unknown = sorted(set(data) - set(JOB_FIELDS))
    if unknown:
        raise ConfigError(
            f"the job config has fields a farm job does not carry: {', '.join(unknown)}",
            hint=f"A job carries: {', '.join(JOB_FIELDS)}; the board's connection is the "
            "farm's business.",
        )
    values: dict[str, Any] = {}
    try:
        for name, value in data.items():
            if value is None:
                continue
            if name == "counters":
                values[name] = tuple(str(c) for c in value)
            elif name == "benchmark":
                values[name] = BenchmarkConfig(**value)
            elif name == "validation":
                raw = dict(value)
                if raw.get("samples") is not None:
                    raw["samples"] = [_unarray(x) for x in raw["samples"]]
                if raw.get("labels") is not None:
                    raw["labels"] = [int(x) for x in raw["labels"]]
                values[name] = ValidationConfig(**raw)
            elif name == "extra":
                if not isinstance(value, dict):
                    raise ConfigError("extra must be an object")
                values[name] = dict(value)
            elif name == "aggregation":
                values[name] = Aggregation(value)
            elif name in ("run_timeout", "uart_timeout", "uart_capture_duration"):
                values[name] = float(value)
                if values[name] <= 0:
                    raise ConfigError(f"{name} must be positive")
            elif name in ("max_counters_per_pass", "build_jobs"):
                values[name] = int(value)
            else:
                values[name] = str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad job config: {exc}") from None
    return values


__all__ = ["JOB_FIELDS", "decode_config", "encode_config"]
