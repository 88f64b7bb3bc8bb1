"""A ``DeployResult`` as JSON and back, losslessly: what an agent uploads and the ``api``
backend returns.

Outputs keep their dtype and shape (float32 values round-trip exactly through JSON's
doubles), every ``Metric`` keeps its unit and original provenance, ``MemoryPeaks`` and
``TimingSeries`` come back as themselves. Dataclasses are encoded field by field, so a
field added to ``Metric`` or ``LayerFigure`` travels without a change here.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.protocols.base import MlperfResult
from aidge_deploy.results import (
    BuildResult,
    BuildStatus,
    DeployResult,
    ExecutionResult,
    LayerFigure,
    MemoryPeaks,
    Metric,
    TimingSeries,
)
from aidge_deploy.timing import TimingInfo

FORMAT = "aidge-deploy-result/1"


def _enc(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {
            "__nd__": True,
            "dtype": str(value.dtype),
            "shape": list(value.shape),
            "data": value.reshape(-1).tolist(),
        }
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, MlperfResult):
        return {
            "__mlperf__": True,
            **{f.name: _enc(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _enc(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _enc(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_enc(v) for v in value]
    return value


def _dec(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("__nd__"):
            return np.asarray(value["data"], dtype=np.dtype(value["dtype"])).reshape(value["shape"])
        if value.get("__mlperf__"):
            raw = {k: v for k, v in value.items() if k != "__mlperf__"}
            return _build(MlperfResult, raw)
        return {k: _dec(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dec(v) for v in value]
    return value


def _build(cls: type, data: dict[str, Any]) -> Any:
    """``cls(**data)`` for the fields ``cls`` has, enums and tuples restored from hints."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        raw = _dec(data[f.name])
        hint = hints.get(f.name)
        for option in typing.get_args(hint) or (hint,):
            if isinstance(option, type) and issubclass(option, enum.Enum) and raw is not None:
                raw = option(raw)
                break
            # a nested frozen dataclass (a Metric's band) travels as its fields
            if (
                dataclasses.is_dataclass(option)
                and isinstance(option, type)
                and isinstance(raw, dict)
            ):
                raw = _build(option, raw)
                break
        origin = typing.get_origin(hint)
        if origin is tuple and isinstance(raw, list):
            raw = tuple(raw)
        if hint is Path or (Path in typing.get_args(hint) and isinstance(raw, str)):
            raw = Path(raw)
        kwargs[f.name] = raw
    return cls(**kwargs)


def encode_result(result: DeployResult) -> dict[str, Any]:
    output: Any
    if isinstance(result.output, list):
        output = {"kind": "arrays", "value": [_enc(np.asarray(o)) for o in result.output]}
    else:
        output = {"kind": "object", "value": _enc(result.output)}
    peaks = result.memory_peak_bytes
    return {
        "format": FORMAT,
        "output": output,
        "metrics": _enc(result.metrics),
        "memory_peak_bytes": None if peaks is None else list(peaks.per_memory),
        "timings": None if result.timings is None else [float(t) for t in result.timings],
        "accuracy": result.accuracy,
        "protocol": result.protocol,
        "target": result.target,
        "backend": result.backend,
        "log": result.log,
        "returncode": result.returncode,
        "build": _enc(result.build),
        "execution": _enc(result.execution),
        "layers": [_enc(layer) for layer in result.layers],
        "measurements": [_enc(m) for m in result.measurements],
        "stage_durations_ms": dict(result.stage_durations_ms),
        "timing": None if result.timing is None else _enc(result.timing),
    }


def decode_result(data: dict[str, Any]) -> DeployResult:
    if data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    out = data["output"]
    output: Any
    output = [_dec(o) for o in out["value"]] if out["kind"] == "arrays" else _dec(out["value"])
    build = data.get("build")
    execution = data.get("execution")
    return DeployResult(
        output=output,
        metrics=_dec(data["metrics"]),
        memory_peak_bytes=None
        if data["memory_peak_bytes"] is None
        else MemoryPeaks(data["memory_peak_bytes"]),
        timings=None if data["timings"] is None else TimingSeries(data["timings"]),
        accuracy=data.get("accuracy"),
        protocol=data.get("protocol"),
        target=data.get("target"),
        backend=data.get("backend"),
        log=data.get("log") or "",
        returncode=data.get("returncode"),
        build=None if build is None else _build(BuildResult, build),
        execution=None if execution is None else _build(ExecutionResult, execution),
        layers=tuple(_layer(x) for x in data.get("layers", [])),
        measurements=tuple(_build(Metric, m) for m in data.get("measurements", [])),
        stage_durations_ms=dict(data.get("stage_durations_ms") or {}),
        timing=None if data.get("timing") is None else _build(TimingInfo, data["timing"]),
    )


def _layer(data: dict[str, Any]) -> LayerFigure:
    layer: LayerFigure = _build(LayerFigure, data)
    return dataclasses.replace(layer, counters=dict(layer.counters))


__all__ = ["FORMAT", "BuildStatus", "decode_result", "encode_result"]
