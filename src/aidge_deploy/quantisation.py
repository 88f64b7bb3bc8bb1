"""The float value of a quantised export's integer outputs: scale and zero point per output.

Why this module exists: an int8 export prints its outputs as int8 codes (127 where the
float model says 0.657). Aidge's int8 export quantises symmetrically (zero point 0) with
MAX clipping over the calibration set, so each output's step is ``max |float output| / 127``
over the calibration inputs — a fact of that export, known only when it is made. The
export step (``modelexport``) therefore runs the float model on the calibration inputs and
writes each output's scale beside the export's manifest (``QUANTISATION_NAME``); a deploy
reads it and gives float outputs, keeping the codes (``DeployResult.output_raw``).
An int8 export made without it (by Aidge directly) keeps its codes as outputs, said in a
notice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QUANTISATION_NAME = ".aidge-deploy-quantisation.json"
SCHEMA = "aidge-deploy/quantisation"
#: the largest code of a symmetric int8 quantisation
INT8_MAX = 127.0


@dataclass(frozen=True)
class OutputQuantisation:
    """How one output's integer codes map to floats: ``(code - zero_point) * scale``."""

    name: str
    dtype: str
    scale: float
    zero_point: int = 0
    #: how the scale was found, for people
    basis: str = ""
    #: the codes are the logits of a Softmax the model applies and the export left out
    #: (Aidge's int8 export ends before a final Softmax): ``dequantise`` applies it
    softmax_after: bool = False

    def dequantise(self, codes: np.ndarray) -> np.ndarray:
        values = (np.asarray(codes, dtype=np.float64) - self.zero_point) * self.scale
        if not self.softmax_after:
            return values
        shifted = np.exp(values - np.max(values))
        return shifted / np.sum(shifted)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "scale": self.scale,
            "zero_point": self.zero_point,
            "basis": self.basis,
            "softmax_after": self.softmax_after,
        }


def is_quantised(c_type: str) -> bool:
    """Whether an exported tensor type holds integer codes of a float tensor."""
    return str(c_type).startswith(("int8", "uint8"))


def symmetric_int8(
    name: str, c_type: str, peak: float, samples: int, *, softmax_after: bool = False
) -> OutputQuantisation:
    """The quantisation of an output whose float values reach ``peak`` in magnitude (its
    logits' values, with ``softmax_after``)."""
    scale = peak / INT8_MAX if peak > 0 else 1.0 / INT8_MAX
    what = "logits" if softmax_after else "float output"
    basis = f"symmetric int8, MAX clipping: max |{what}| / 127 over {samples} calibration input(s)"
    if softmax_after:
        basis += "; the int8 export ends before the model's final Softmax, applied on dequantising"
    return OutputQuantisation(name, c_type, scale, 0, basis, softmax_after)


def write_quantisation(export_dir: Path, outputs: Sequence[OutputQuantisation]) -> Path:
    path = Path(export_dir) / QUANTISATION_NAME
    doc = {"schema": SCHEMA, "schema_version": 1, "outputs": [o.as_dict() for o in outputs]}
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def read_quantisation(export_dir: Path) -> tuple[OutputQuantisation, ...] | None:
    """The export's output quantisation (None: none was recorded, or it is unreadable)."""
    try:
        doc = json.loads((Path(export_dir) / QUANTISATION_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    try:
        return tuple(
            OutputQuantisation(
                str(o["name"]),
                str(o["dtype"]),
                float(o["scale"]),
                int(o.get("zero_point", 0)),
                str(o.get("basis", "")),
                bool(o.get("softmax_after", False)),
            )
            for o in doc["outputs"]
        )
    except (KeyError, TypeError, ValueError):
        return None
