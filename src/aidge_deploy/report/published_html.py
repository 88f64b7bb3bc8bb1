"""The report's "beside published silicon" section: a run of an MLPerf Tiny reference model
on a Cortex-M core, next to the published closed-division rows of the same core.

Kept beside ``html.py``: one function from the bundle's ``summary.json`` (its MACs and
parameters identify the reference model, its timing model or target the core, its cycles
figure the estimate) and ``run_metadata.json`` (the export's dtype) to a section. Each row
shows the engine and its version, cycles, cycles/MAC and the ratio of this run's cycles
to the row's — a comparison, never a verdict. A campaign report shows the same table for
each of its cells of a reference model (``campaign_published_section``, from the cells'
records: their figures, target and dtype).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

#: the cycle figures a report can hold, most direct first
_CYCLE_FIGURES = ("cycles", "estimated_cycles")


def _value(summary: Mapping[str, Any], name: str) -> Any:
    figure = (summary.get("metrics") or {}).get(name)
    return figure.get("value") if isinstance(figure, Mapping) else None


def run_core(summary: Mapping[str, Any]) -> str | None:
    """The Cortex-M core of the run: its timing model's, else its board's descriptor's."""
    core = (summary.get("timing_model") or {}).get("core")
    if core:
        return str(core)
    target = summary.get("target")
    try:
        from aidge_qemu_descriptors import get_board

        return str(get_board(str(target)).cpu)
    except (ImportError, KeyError, ValueError):
        return None


def run_dtype(metadata: Mapping[str, Any]) -> str:
    inputs = (((metadata.get("export") or {}).get("manifest") or {}).get("inputs")) or []
    from aidge_deploy.quantisation import is_quantised

    return "int8" if inputs and is_quantised(str(inputs[0].get("dtype"))) else "float32"


def published_section(summary: Mapping[str, Any], metadata: Mapping[str, Any], chip: Any) -> str:
    """The section, or "" when the run is not of a reference model on a core with
    published rows, or has no cycle figure."""
    name = next((n for n in _CYCLE_FIGURES if _value(summary, n)), None)
    core = run_core(summary)
    if core is None or name is None:
        return ""
    return beside_published_html(
        summary.get("metrics") or {}, name, core, run_dtype(metadata), chip, "This run"
    )


def campaign_published_section(records: Sequence[Mapping[str, Any]], chip: Any) -> str:
    """The campaign report's section: each done cell of a reference model on a core with
    published rows, beside them ("" when there is none)."""
    parts = []
    for record in records:
        figures = record.get("figures") or {}
        name = next((n for n in _CYCLE_FIGURES if _value({"metrics": figures}, n)), None)
        core = run_core({"target": (record.get("target") or {}).get("target")})
        if record.get("status") != "done" or name is None or core is None:
            continue
        dtype = str((record.get("options") or {}).get("dtype") or "float32")
        label = (
            f"Cell {record.get('model', {}).get('name')} on "
            f"{(record.get('target') or {}).get('label')}, {record.get('option_label')}"
        )
        parts.append(beside_published_html(figures, name, core, dtype, chip, label, level=3))
    if not any(parts):
        return ""
    return (
        "<section data-campaign-published='1'><h2>Beside published silicon (MLPerf Tiny)</h2>"
        + "".join(parts)
        + "</section>"
    )


def beside_published_html(
    metrics: Mapping[str, Any],
    name: str,
    core: str,
    dtype: str,
    chip: Any,
    label: str,
    *,
    level: int = 2,
) -> str:
    """One estimate (``metrics[name]``, the model identified by ``metrics``' MACs and
    parameters) beside the published rows of ``core``: "" when none apply."""
    from aidge_deploy.mlperf.models import MODELS
    from aidge_deploy.mlperf.published import beside_published, identify_model

    summary = {"metrics": metrics}
    model = identify_model(_value(summary, "macs"), _value(summary, "params"))
    if model is None:
        return ""
    figure = metrics[name]
    cycles = float(figure["value"])
    beside = beside_published(model, core, cycles, dtype)
    if not beside:
        return ""
    macs = MODELS[model].macs
    rows = "".join(
        f'<tr data-engine="{escape(b.row.engine)}" data-ratio="{b.ratio:.4f}">'
        f"<td>{escape(b.row.round)}</td><td>{escape(b.row.board)}</td>"
        f"<td class='num'>{b.row.clock_hz / 1e6:g}</td><td>{escape(b.row.engine_text)}</td>"
        f"<td>{escape(b.row.dtype or 'not stated')}</td>"
        f"<td class='num'>{b.row.latency_s * 1e3:.2f}</td>"
        f"<td class='num'>{b.row.cycles:,.0f}</td><td class='num'>{b.row.cycles_per_mac:.2f}</td>"
        f"<td class='num'><b>{b.ratio:.2f}×</b></td>"
        f"<td><code>{escape(b.row.source)}</code></td></tr>"
        for b in beside
    )
    provenance = str(figure.get("provenance"))
    what = escape(str(figure.get("description") or name))
    h = f"h{level}"
    return (
        f'<section data-published="{model.value}" data-core="{escape(core)}" '
        f'data-cycles="{cycles:.0f}" data-dtype="{escape(dtype)}"><{h}>Beside published '
        f"silicon: MLPerf Tiny {model.value} on {escape(core)}</{h}><p>{chip(provenance)}"
        f"{escape(label)}: <b>{cycles:,.0f} cycles</b> per inference ({what}), "
        f"<b>{cycles / macs:.2f} cycles/MAC</b> over the model's {macs:,} MACs, {dtype}. "
        f"Below, the fastest published MLPerf Tiny closed-division row of each engine for "
        f"the same core and model (v1.0–v1.3; rows whose submission states another dtype "
        f"are left out): cycles = latency × core clock. The ratio is this run's cycles over "
        f"the row's: how far this export is from that engine on silicon — information, not "
        f"a pass or a fail.</p><table class='published'><thead><tr><th>round</th>"
        f"<th>board</th><th class='num'>MHz</th><th>engine</th><th>dtype</th>"
        f"<th class='num'>latency [ms]</th><th class='num'>cycles</th>"
        f"<th class='num'>cycles/MAC</th><th class='num'>this run ÷ row</th><th>source</th>"
        f"</tr></thead><tbody>{rows}</tbody></table><p class='muted'>Source: the "
        f"mlcommons/tiny_results repositories (each row's results file at its commit; "
        f"<code>aidge-deploy reference --core {escape(core)} --model {model.value}</code> "
        f"lists them all).</p></section>"
    )


__all__ = [
    "beside_published_html",
    "campaign_published_section",
    "published_section",
    "run_core",
    "run_dtype",
]
