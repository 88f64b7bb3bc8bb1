"""The campaign report: one self-contained page to decide from.

Built from the arrangement of ``campaign.tables`` (the same the terminal and the CSV use):
the targets side by side (one model) or a table per quantity (models x targets, option sets
as sub-columns), a Pareto chart per target (latency against flash and against RAM, accuracy
as colour, the board's capacity drawn), the cost of int8 against float32, the failed cells
with their errors, and a link to each cell's own bundle report. Every figure carries its
provenance chip; nothing is fetched, no script runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from aidge_deploy.campaign.figures import FLASH, RAM
from aidge_deploy.campaign.tables import (
    CellState,
    MetricTable,
    SideBySide,
    TableCell,
    better_text,
    int8_costs,
    metric_tables,
    pareto_points,
    side_by_side,
)
from aidge_deploy.display import fmt_bytes, time_text, time_unit_for
from aidge_deploy.report.html import PAGE_CSS, PROVENANCE_LABELS, provenance_chip
from aidge_deploy.report.published_html import campaign_published_section
from aidge_deploy.report.svg import ScatterPoint, scatter_chart

_CSS = """
table.matrix td,table.matrix th{text-align:right;white-space:nowrap}
table.matrix th[colspan]{text-align:center;border-left:1px solid #dde2ea}
table.matrix td.m,table.matrix th.m{text-align:left}
td.failed{color:#c0392b}td.does-not-fit{color:#fff;background:#c0392b;font-weight:600}
td.missing{color:#8a90a0;font-style:italic}td.unavailable{color:#8a90a0}
td.best{font-weight:700}
.pareto{display:grid;grid-template-columns:1fr 1fr;gap:14px}
@media (max-width:900px){.pareto{grid-template-columns:1fr}}
.counts span{margin-right:18px}
"""


def _cell_html(cell: TableCell | None, best: bool = False) -> str:
    if cell is None:
        return '<td class="missing">—</td>'
    title = escape(cell.note or "")
    if cell.state is CellState.OK and cell.provenance:
        what = f"{cell.figure}, {cell.provenance}: " if cell.figure else ""
        chip = provenance_chip(cell.provenance)
        cls = ' class="best"' if best else ""
        return (
            f'<td{cls} data-cell="{escape(cell.cell_id or "")}" data-value="{cell.value!r}" '
            f'data-figure="{escape(cell.figure or "")}" data-provenance="{escape(cell.provenance)}" '
            f'title="{escape(what)}{title}">{chip}{escape(cell.text)}</td>'
        )
    return (
        f'<td class="{cell.state.value}" data-cell="{escape(cell.cell_id or "")}" '
        f'data-state="{cell.state.value}" title="{title}">{escape(cell.text)}</td>'
    )


def _best(table: MetricTable, model: str, option: str) -> str | None:
    """The target with the best value of a row (only among figures of one kind)."""
    values = []
    for target in table.targets:
        cell = table.get(model, target, option)
        if cell is not None and cell.state is CellState.OK and cell.value is not None:
            values.append(((cell.figure, cell.provenance), cell.value, target))
    # a measured latency is not ranked against an estimated one, nor cycles against
    # emulated instructions
    if len({v[0] for v in values}) != 1 or len(values) < 2:
        return None
    pick = max if table.quantity.better.value == "higher" else min
    return pick(values, key=lambda v: v[1])[2]


def _metric_table(table: MetricTable) -> str:
    q = table.quantity
    head1 = ['<th class="m" rowspan="2">model</th>']
    head2 = []
    for target in table.targets:
        head1.append(f'<th colspan="{len(table.options)}">{escape(target)}</th>')
        head2 += [f"<th>{escape(o)}</th>" for o in table.options]
    rows = []
    for model in table.models:
        tds = [f'<td class="m">{escape(model)}</td>']
        best_by_option = {o: _best(table, model, o) for o in table.options}
        for target in table.targets:
            for option in table.options:
                tds.append(
                    _cell_html(table.get(model, target, option), best_by_option[option] == target)
                )
        rows.append(f"<tr>{''.join(tds)}</tr>")
    sub = f"<tr>{''.join(head2)}</tr>" if len(table.options) > 1 or table.options[0] != "-" else ""
    if not sub:
        head1 = [h.replace(' rowspan="2"', "") for h in head1]
    return (
        f'<h3 data-quantity="{escape(q.key)}">{escape(q.title)} '
        f'<span class="u">({better_text(q)}; bold: the best target of a row, among figures of one kind and provenance)</span></h3>'
        f'<table class="matrix" data-table="{escape(q.key)}"><thead><tr>{"".join(head1)}</tr>'
        f"{sub}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _side_by_side(view: SideBySide) -> str:
    head = "".join(f"<th>{escape(t)}</th>" for t in view.targets)
    rows = []
    for quantity, cells in view.rows:
        tds = "".join(_cell_html(c) for c in cells)
        rows.append(f'<tr data-quantity="{escape(quantity.key)}"><td class="m">'
                    f"{escape(quantity.title)}</td>{tds}</tr>")  # fmt: skip
    caps = []
    for flash, ram in view.capacities:
        parts = []
        if flash:
            parts.append(f"flash {fmt_bytes(flash)}")
        if ram:
            parts.append(f"RAM {fmt_bytes(ram)}")
        caps.append(f"<td>{escape(', '.join(parts) or 'no fixed capacity')}</td>")
    rows.append(f'<tr data-quantity="capacity"><td class="m">Board memory</td>{"".join(caps)}</tr>')
    option = "" if view.option == "-" else f" ({escape(view.option)})"
    return (
        f"<h3>{escape(view.model)}{option}: targets side by side</h3>"
        f'<table class="matrix side" data-model="{escape(view.model)}"><thead><tr>'
        f'<th class="m">figure</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _ms_text(value_ms: float, unit: str) -> str:
    return time_text(value_ms, None, unit)


def _pareto(records: Sequence[Mapping[str, Any]], target: str) -> str:
    charts = []
    for memory in (FLASH, RAM):
        points, provenance, figure = pareto_points(records, target, memory)
        accuracies = [p.accuracy for p in points if p.accuracy is not None]
        lo, hi = (min(accuracies), max(accuracies)) if accuracies else (0.0, 1.0)
        span = hi - lo

        def shade(acc: float | None, lo: float = lo, span: float = span) -> float | None:
            if acc is None:
                return None
            return 1.0 if span <= 0 else (acc - lo) / span

        capacity = None
        for r in records:
            if r["target"]["label"] == target:
                cap = (r.get("memory") or {}).get(
                    "flash_capacity" if memory is FLASH else "ram_capacity"
                )
                capacity = capacity or cap
        peak = max((p.latency_ms for p in points), default=1.0)
        unit = time_unit_for(peak)
        scatter = [
            ScatterPoint(
                f"{p.model} {p.option}".strip(" -"),
                p.memory_bytes,
                p.latency_ms,
                shade(p.accuracy),
                p.on_front,
                ("" if p.accuracy is None else f"accuracy {p.accuracy:.1%}")
                + ("" if p.fits is not False else " — does not fit"),
                p.cell_id,
            )
            for p in points
        ]
        shade_title = (
            f"accuracy {lo:.1%} → {hi:.1%}" if accuracies else "accuracy not measured (grey)"
        )
        timing = next(
            (
                r.get("timing")
                for r in records
                if r["target"]["label"] == target and r.get("timing")
            ),
            None,
        )
        what = (timing or {}).get("label") or PROVENANCE_LABELS.get(provenance or "", "")
        charts.append(
            "<div>"
            + scatter_chart(
                scatter,
                chart_id=f"pareto-{target}-{memory.key}",
                quantity=f"pareto-{memory.key}",
                x_title=f"{memory.title} ({figure or memory.names[0]})",
                y_title=f"latency ({unit})",
                x_text=fmt_bytes,
                y_text=functools.partial(_ms_text, unit=unit),
                x_limit=(f"capacity {fmt_bytes(capacity)}", float(capacity)) if capacity else None,
                shade_title=shade_title,
            )
            + f'<p class="muted">Latency: {escape(what)} ({escape(provenance or "-")}). '
            "Solid points: the Pareto front "
            "(no other cell of this target is both faster and smaller).</p></div>"
        )
    return (
        f'<h3 data-pareto="{escape(target)}">{escape(target)}</h3>'
        f'<div class="pareto">{"".join(charts)}</div>'
    )


def _lost(points: float) -> str:
    if points == 0:
        return "none"
    return f"{points:.2f} pp lost" if points > 0 else f"{-points:.2f} pp gained"


def _speed(ratio: float) -> str:
    if ratio == 1:
        return "as fast"
    return f"{1 - ratio:.1%} faster" if ratio < 1 else f"{ratio - 1:.1%} slower"


def _saved(saved: int | None) -> str:
    if saved is None:
        return "n/a"
    if saved < 0:
        return f"{fmt_bytes(-saved)} more"
    return fmt_bytes(saved)


def _int8(records: Sequence[Mapping[str, Any]]) -> str:
    costs = int8_costs(records)
    if not costs:
        return ""
    rows = []
    for c in costs:
        acc = "n/a" if c.accuracy_lost_pp is None else _lost(c.accuracy_lost_pp)
        lat = (
            "n/a"
            if c.latency_ratio is None or not math.isfinite(c.latency_ratio)
            else f"×{c.latency_ratio:.3g} ({_speed(c.latency_ratio)})"
        )
        flash = _saved(c.flash_saved_bytes)
        ram = _saved(c.ram_saved_bytes)
        rows.append(
            f'<tr data-int8="{escape(c.model)}|{escape(c.target)}"><td class="m">'
            f"{escape(c.model)}</td><td class='m'>{escape(c.target)}</td>"
            f"<td class='m'>{escape(c.options)}</td><td>{acc}</td><td>{lat}</td>"
            f"<td>{flash}</td><td>{ram}</td><td class='m'>{escape(c.note)}</td></tr>"
        )
    return (
        "<section><h2>int8 against float32</h2><p class='muted'>Per model and target, the "
        "other options equal: top-1 accuracy lost (percentage points), int8 latency over "
        "float32 latency, and the flash and static RAM int8 saves. Ratios are only taken "
        "between figures of the same kind.</p>"
        '<table class="matrix" data-table="int8"><thead><tr><th class="m">model</th>'
        "<th class='m'>target</th><th class='m'>options</th><th>accuracy lost</th>"
        "<th>latency</th><th>flash saved</th><th>RAM saved</th><th class='m'>note</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _failures(records: Sequence[Mapping[str, Any]]) -> str:
    items = []
    for r in records:
        if r.get("status") != "failed":
            continue
        err = r.get("error") or {}
        mark = ' <b class="sev">does not fit</b>' if err.get("does_not_fit") else ""
        log = (
            f"<br><span class='muted'>log: <code>{escape(err['log'])}</code></span>"
            if err.get("log")
            else ""
        )
        hint = (
            f"<br><span class='muted'>hint: {escape(err['hint'])}</span>" if err.get("hint") else ""
        )
        items.append(
            f'<li data-failed="{escape(str(r["id"]))}"><b>{escape(r["model"]["name"])} on '
            f"{escape(r['target']['label'])} ({escape(r['option_label'])})</b>{mark}: "
            f"{escape(str(err.get('type')))}: {escape(str(err.get('message')))}{hint}{log}</li>"
        )
    if not items:
        return ""
    return f"<section><h2>Failed cells</h2><ul class='issues'>{''.join(items)}</ul></section>"


def _cells(records: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in records:
        status = r.get("status") or "not run"
        link = (
            f"<a href='cells/{escape(str(r['id']))}/bundle/report.html'>report</a>"
            if r.get("bundle")
            else ""
        )
        quant = r.get("quantisation") or {}
        q = ""
        if quant.get("calibration") == "random":
            q = "1 random input (no calibration set)"
        elif quant:
            q = f"{quant.get('calibration_samples')} sample(s) from {quant.get('calibration_source')}"
        farm = r.get("farm") or {}
        where = (
            f"farm job {farm['job_id']} on {farm['board']}" if farm else str(r.get("ran_on") or "")
        )
        rows.append(
            f'<tr data-status="{escape(status)}"><td class="m">{escape(r["model"]["name"])}</td>'
            f"<td class='m'>{escape(r['target']['label'])}</td>"
            f"<td class='m'>{escape(r['option_label'])}</td><td class='m'>{escape(status)}</td>"
            f"<td class='m'>{escape(q)}</td><td class='m'>{escape(where)}</td>"
            f"<td class='m'>{link}</td></tr>"
        )
    return (
        "<section><h2>Cells</h2><table class='matrix'><thead><tr><th class='m'>model</th>"
        "<th class='m'>target</th><th class='m'>options</th><th class='m'>status</th>"
        "<th class='m'>int8 quantisation</th><th class='m'>ran on</th>"
        "<th class='m'>bundle</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _legend(records: Sequence[Mapping[str, Any]]) -> str:
    used = set()
    for r in records:
        for entry in (r.get("figures") or {}).values():
            used.add(str(entry.get("provenance")))
    items = "".join(
        f'<span data-legend="{escape(p)}">{provenance_chip(p)}<b>{escape(p)}</b>'
        f"{escape(label)}</span>"
        for p, label in PROVENANCE_LABELS.items()
        if p in used
    )
    return f'<div class="legend" data-provenance-legend="1">{items}</div>' if items else ""


def render_campaign_html(
    plan_doc: Mapping[str, Any], records: Sequence[Mapping[str, Any]], *, generated: str
) -> str:
    """The whole page (``records``: every cell of the plan, run or not)."""
    name = str(plan_doc.get("name"))
    statuses = [r.get("status") or "not run" for r in records]
    fits = sum(1 for r in records if (r.get("error") or {}).get("does_not_fit"))
    counts = (
        f"<span><b>{len(records)}</b> cells</span><span><b>{statuses.count('done')}</b> done"
        f"</span><span><b>{statuses.count('failed')}</b> failed ({fits} do not fit)</span>"
        f"<span><b>{statuses.count('not run')}</b> not run</span>"
    )
    combos = {(r["model"]["name"], r["option_label"]) for r in records}
    if len(combos) == 1:
        main = "".join(_side_by_side(v) for v in side_by_side(records))
        figures = f"<section><h2>Side by side</h2>{main}</section>"
    else:
        figures = (
            "<section><h2>Figures</h2>"
            + "".join(_metric_table(t) for t in metric_tables(records))
            + "</section>"
        )
    targets = list(dict.fromkeys(r["target"]["label"] for r in records))
    pareto = (
        "<section><h2>Latency against memory, per target</h2>"
        + "".join(_pareto(records, t) for t in targets)
        + "</section>"
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>Campaign {escape(name)}</title><style>{PAGE_CSS}{_CSS}</style></head>"
        f"<body data-campaign='{escape(name)}'><header><h1>Campaign {escape(name)}</h1>"
        f"<div class='sub counts'>{counts} · generated {escape(generated)}</div></header>"
        f"<main>{_legend(records)}{_failures(records)}{figures}{pareto}{_int8(records)}"
        f"{campaign_published_section(records, provenance_chip)}{_cells(records)}</main></body></html>\n"
    )


__all__ = ["render_campaign_html"]
