"""Per-layer MACs and parameter counts, read from the export's layer configuration headers.

Deploy never sees the Aidge graph, but every exported layer has a ``dnn/include/layers/
<layer>.h`` with its output geometry and, for layers with weights, ``<PREFIX>_WEIGHTS_SIZE``
and ``<PREFIX>_BIASES_SIZE``. For convolutions and fully-connected layers alike one weight
is used once per output position, so ``MACs = weights x out_h x out_w x batch`` (groups and
kernel size are already inside the weight count). Layers without weights (transposes,
reshapes, pooling, element-wise) report 0 MACs: their cost is data movement, not MACs.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.exportspec import Export
from aidge_deploy.filememo import FileMemo, Reads

_DEFINE = re.compile(r"^\s*#define\s+(\w+)\s+(-?\d+)\s*$", re.M)


@dataclass(frozen=True)
class LayerAnalysis:
    """Static figures of one exported layer."""

    name: str
    macs: int
    params: int
    output_elements: int


def _defines(path: Path) -> dict[str, int]:
    return {
        k: int(v) for k, v in _DEFINE.findall(path.read_text(encoding="utf-8", errors="replace"))
    }


#: analyses by layer folder, kept while the folder and its headers are unchanged
_ANALYSES: FileMemo[str, tuple[LayerAnalysis, ...]] = FileMemo()


def analyze_export(artifact: Export) -> tuple[LayerAnalysis, ...]:
    """MACs and parameters of every layer header found in the export (may be empty).

    Kept for the process while the layer folder and its headers are unchanged (``filememo``):
    a warm deploy of the same export stats them instead of parsing them again.
    """
    layer_dir = Path(artifact.path) / "dnn" / "include" / "layers"
    return _ANALYSES.answer(str(layer_dir), lambda reads: _analyze(layer_dir, reads))


def _analyze(layer_dir: Path, reads: Reads) -> tuple[LayerAnalysis, ...]:
    folder = reads.sign(layer_dir)
    if folder is None or not stat.S_ISDIR(folder[5]):
        return ()
    headers = sorted(layer_dir.glob("*.h"))
    for header in headers:
        reads.sign(header)
    out = []
    for header in headers:
        name = header.stem
        prefix = name.upper()
        defs = _defines(header)
        channels = defs.get(f"{prefix}_OUTPUT_0_NB_OUTPUTS")
        if channels is None:
            continue  # a parameter header (weights, biases), not a layer
        spatial = (
            defs.get(f"{prefix}_OUTPUT_0_OUT_HEIGHT", 1)
            * defs.get(f"{prefix}_OUTPUT_0_OUT_WIDTH", 1)
            * defs.get(f"{prefix}_OUTPUT_0_OUT_BATCH", 1)
        )
        weights = defs.get(f"{prefix}_WEIGHTS_SIZE", 0)
        biases = defs.get(f"{prefix}_BIASES_SIZE", 0)
        out.append(
            LayerAnalysis(
                name=name,
                macs=weights * spatial,
                params=weights + biases,
                output_elements=channels * spatial,
            )
        )
    return tuple(out)
