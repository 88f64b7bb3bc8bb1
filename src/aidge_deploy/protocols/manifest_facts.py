"""What the export manifest says that the parsers need: tensor specs, application settings.

The manifest describes the firmware's outputs (C type, size) and its real settings; reading
them once here gives every protocol the same dtype mapping and the same refusal of values an
output's C type cannot hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aidge_deploy.protocols.lines import Line, protocol_error
from aidge_deploy.protocols.numbers import parse_float_list, parse_int_list

if TYPE_CHECKING:
    from aidge_deploy.exportspec import Manifest


# --- manifest facts ----------------------------------------------------------------------

#: C type of a manifest tensor -> numpy dtype
C_TYPE_TO_NUMPY: Mapping[str, np.dtype[Any]] = {
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "bool": np.dtype(np.bool_),
    "int8_t": np.dtype(np.int8),
    "int16_t": np.dtype(np.int16),
    "int32_t": np.dtype(np.int32),
    "int64_t": np.dtype(np.int64),
    "uint8_t": np.dtype(np.uint8),
    "uint16_t": np.dtype(np.uint16),
    "uint32_t": np.dtype(np.uint32),
    "uint64_t": np.dtype(np.uint64),
    "int": np.dtype(np.int32),
    "char": np.dtype(np.int8),
    "signed char": np.dtype(np.int8),
    "unsigned char": np.dtype(np.uint8),
    "short": np.dtype(np.int16),
    "unsigned short": np.dtype(np.uint16),
    "unsigned int": np.dtype(np.uint32),
    "long": np.dtype(np.int64),
    "unsigned long": np.dtype(np.uint64),
    "long long": np.dtype(np.int64),
    "unsigned long long": np.dtype(np.uint64),
}


def numpy_dtype(c_type: str) -> np.dtype[Any]:
    """The numpy dtype of a manifest ``dtype`` (a C type name)."""
    try:
        return C_TYPE_TO_NUMPY[c_type.strip()]
    except KeyError:
        from aidge_deploy.errors import ManifestError

        raise ManifestError(
            f"Unknown tensor dtype {c_type!r} in the manifest",
            hint="Expected a C type such as float, double, int8_t, uint8_t, int32_t or bool.",
        ) from None


@dataclass(frozen=True)
class TensorSpec:
    """One manifest input or output: C name, numpy dtype, flat size."""

    name: str
    c_type: str
    dtype: np.dtype[Any]
    size: int


def _tensor_specs(entries: Iterable[Mapping[str, Any]], kind: str) -> tuple[TensorSpec, ...]:
    from aidge_deploy.errors import ManifestError

    specs: list[TensorSpec] = []
    for index, entry in enumerate(entries):
        try:
            name = str(entry["name"])
            c_type = str(entry["dtype"])
            size = int(entry["size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(
                f"Manifest {kind}[{index}] lacks a valid name/dtype/size: {entry!r}",
                hint="Re-export the model; the manifest was edited or written by another tool.",
            ) from exc
        if size < 0:
            raise ManifestError(
                f"Manifest {kind}[{index}] has a negative size {size}",
                hint="Re-export the model.",
            )
        specs.append(TensorSpec(name, c_type, numpy_dtype(c_type), size))
    return tuple(specs)


def output_specs(manifest: Manifest) -> tuple[TensorSpec, ...]:
    return _tensor_specs(manifest.outputs, "outputs")


def input_specs(manifest: Manifest) -> tuple[TensorSpec, ...]:
    return _tensor_specs(manifest.inputs, "inputs")


def app_int(manifest: Manifest, key: str) -> int | None:
    """An integer from ``application_config`` (the firmware's real settings), if present."""
    value = (manifest.application_config or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def app_str(manifest: Manifest, key: str) -> str | None:
    value = (manifest.application_config or {}).get(key)
    return value if isinstance(value, str) else None


def profiling_enabled(manifest: Manifest) -> bool:
    """Whether the firmware prints the per-layer lines (manifest flag or application config)."""
    return bool(manifest.profiling) or bool((manifest.application_config or {}).get("profiling"))


def to_output_array(
    values: Sequence[float] | Sequence[int],
    spec: TensorSpec,
    line: Line,
    log_path: Path | None = None,
) -> np.ndarray:
    """Convert parsed values to the output's dtype, refusing values it cannot hold."""
    if spec.dtype.kind in "iub":
        info_min, info_max = (0, 1) if spec.dtype.kind == "b" else _int_bounds(spec.dtype)
        for value in values:
            if not isinstance(value, int) or not info_min <= value <= info_max:
                raise protocol_error(
                    f"Output {spec.name!r} ({spec.c_type}) got the value {value!r}, "
                    f"outside [{info_min}, {info_max}]",
                    "The program printed a value its output type cannot hold; the manifest "
                    "does not describe this program, or the capture is corrupted.",
                    line,
                    log_path,
                )
    if spec.dtype.kind == "f" and spec.dtype.itemsize < 8:
        finfo = np.finfo(spec.dtype)
        for value in values:
            if abs(value) > float(finfo.max) and abs(value) != float("inf"):
                raise protocol_error(
                    f"Output {spec.name!r} ({spec.c_type}) got {value!r}, beyond its range",
                    "A float output cannot print such a value; the capture is corrupted.",
                    line,
                    log_path,
                )
    return np.asarray(values, dtype=spec.dtype)


def _int_bounds(dtype: np.dtype[Any]) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def parse_values_for(
    line: Line, tokens: Sequence[str], spec: TensorSpec, log_path: Path | None = None
) -> np.ndarray:
    """Parse an output's printed values with the strictness its C type implies."""
    what = f"output {spec.name!r}"
    if spec.dtype.kind in "iub":
        ints = parse_int_list(line, tokens, what, log_path)
        return to_output_array(ints, spec, line, log_path)
    return to_output_array(parse_float_list(line, tokens, what, log_path), spec, line, log_path)
