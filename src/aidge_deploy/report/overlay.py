"""Per-layer figures as Google Model Explorer node-data overlays.

Model Explorer colours graph nodes from a JSON file of the form
``{"<graph id>": {"results": {"<node id>": {"value": x}}, "gradient": [...]}}``. One file
is written per per-layer figure (time, cycles, each counter), with the Aidge layer names
as node ids, so a slow layer stands out in the graph view.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: green (cheap) -> yellow -> red (expensive)
GRADIENT: tuple[Mapping[str, Any], ...] = (
    {"stop": 0.0, "bgColor": "#1a9850"},
    {"stop": 0.5, "bgColor": "#fee08b"},
    {"stop": 1.0, "bgColor": "#d73027"},
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def overlay_filename(metric_key: str) -> str:
    """``me_overlay_<metric>.json`` with the key reduced to a safe file-name part."""
    safe = _UNSAFE.sub("_", metric_key).strip("._") or "metric"
    return f"me_overlay_{safe}.json"


def build_overlays(summary: Mapping[str, Any], graph_id: str) -> dict[str, str]:
    """File name -> JSON text, one overlay per per-layer figure of the summary."""
    out: dict[str, str] = {}
    for column in summary["layer_columns"]:
        if column.get("derived"):
            continue  # shares, MACs, ratios: colour the graph by what was measured
        key = column["key"]
        results = {
            layer["name"]: {"value": layer["metrics"][key]["value"]}
            for layer in summary["layers"]
            if key in layer["metrics"] and layer["metrics"][key]["value"] is not None
        }
        if not results:
            continue
        doc = {graph_id: {"results": results, "gradient": [dict(g) for g in GRADIENT]}}
        out[overlay_filename(key)] = json.dumps(doc, indent=2) + "\n"
    return out
