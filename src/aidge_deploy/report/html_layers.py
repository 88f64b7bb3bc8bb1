"""The per-layer section of the HTML report: where the time goes, in one view.

One sortable table holds every layer with its share of the time (an inline bar), its time
and every counter as columns, each cell with a small bar scaled to its column, so a reader
sees at a glance which layer costs what. Below it, one chart per *quantity*
(``summary["charted_columns"]``): an emulated board's estimated time is its instruction
count ÷ the core clock, so it is charted once, as instructions; two counters measuring the
same thing are never charted twice. Sorting is a few lines of inline script: the page
stays self-contained and reads fine without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from aidge_deploy.display import column_time_unit, figure_text, time_text, time_unit_for
from aidge_deploy.metrics import Band, Metric
from aidge_deploy.profiling.layer_table import coverage_text
from aidge_deploy.report.svg import PALETTE, bar_chart

#: inline, dependency-free column sorting (click a header; click again to reverse)
SORT_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th[data-sort]').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var dir = th.getAttribute('data-dir') === 'desc' ? 1 : -1;
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-dir'); });
      th.setAttribute('data-dir', dir === 1 ? 'asc' : 'desc');
      var numeric = th.getAttribute('data-sort') === 'num';
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
        if (numeric) {
          x = x === '' ? -Infinity : parseFloat(x); y = y === '' ? -Infinity : parseFloat(y);
          return dir * (x - y);
        }
        return dir * String(x).localeCompare(String(y));
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""

_FLAG_NOTE = {
    "below": "below one step of the timer: a reading, not a measurement (no share, no time/MAC)",
    "coarse": "spans fewer than 10 steps of the timer: the quantisation alone is over 10 %",
}


def _chip(provenance: str) -> str:
    return f'<span class="prov prov-{escape(provenance)}" title="{escape(provenance)}"></span>'


def _cell(fig: Mapping[str, Any] | None, column: Mapping[str, Any], peak: float, color: str) -> str:
    if fig is None:
        return '<td class="num" data-v="">—</td>'
    value = fig.get("value")
    if value is None:
        reason = fig.get("unavailable_reason") or "not measured"
        return f'<td class="num na" data-v="" title="{escape(reason)}">n/a</td>'
    unit = column["unit"]
    band = Band.from_dict(fig.get("band"))  # an estimate: 3 digits and its model's band
    if unit == "ms":
        shown_unit = column_time_unit(peak, column.get("resolution"))
        text = time_text(
            float(value), fig.get("resolution"), shown_unit, with_unit=False, band=band
        )
    else:
        text = figure_text(float(value), unit, fig.get("resolution"), with_unit=False, band=band)
    flag = ""
    if fig.get("below_resolution"):
        flag = f' <abbr class="flag" title="{escape(_FLAG_NOTE["below"])}">&lt;1 step</abbr>'
    elif fig.get("coarse"):
        flag = f' <abbr class="flag" title="{escape(_FLAG_NOTE["coarse"])}">±1 step</abbr>'
    bar = ""
    if (peak > 0 and not column.get("derived")) or column["key"] == "share":
        width = 0.0 if peak <= 0 else max(0.0, min(100.0, 100.0 * float(value) / peak))
        bar = f'<div class="cbar"><i style="width:{width:.1f}%;background:{color}"></i></div>'
    return f'<td class="num" data-v="{float(value)!r}">{escape(text)}{flag}{bar}</td>'


def _peaks(summary: Mapping[str, Any]) -> dict[str, float]:
    peaks: dict[str, float] = {}
    for column in summary["layer_columns"]:
        values = [
            float(f["value"])
            for layer in summary["layers"]
            if (f := layer["metrics"].get(column["key"])) and f.get("value") is not None
        ]
        peaks[column["key"]] = max(values, default=0.0)
    peaks["share"] = 100.0
    return peaks


def _table(summary: Mapping[str, Any]) -> str:
    columns = summary["layer_columns"]
    peaks = _peaks(summary)
    colors = {c["key"]: PALETTE[i % len(PALETTE)] for i, c in enumerate(columns)}
    head = ['<th data-sort="num">#</th>', '<th data-sort="text">layer</th>']
    for column in columns:
        res = column.get("resolution")
        unit = (
            column_time_unit(peaks[column["key"]], res)
            if column["unit"] == "ms"
            else column["unit"]
        )
        res_note = ""
        if res is not None and column["unit"] == "ms":
            res_note = f" · step {time_text(res, res, time_unit_for(res))}"
        head.append(
            f'<th class="num" data-sort="num" data-key="{escape(column["key"])}" '
            f'title="{escape(column["provenance"])}{escape(res_note)}">'
            f"{_chip(column['provenance'])}{escape(column.get('title') or column['key'])} "
            f"<span class='u'>({escape(unit)})</span></th>"
        )
    rows = []
    for layer in summary["layers"]:
        cells = "".join(
            _cell(layer["metrics"].get(c["key"]), c, peaks[c["key"]], colors[c["key"]])
            for c in columns
        )
        rows.append(
            f'<tr><td class="num" data-v="{layer["index"]}">{layer["index"]}</td>'
            f'<td data-v="{escape(layer["name"])}">{escape(layer["name"])}</td>{cells}</tr>'
        )
    return (
        '<table class="sortable layers" data-layer-table="1"><thead><tr>'
        + "".join(head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _charts(summary: Mapping[str, Any]) -> str:
    by_key = {c["key"]: c for c in summary["layer_columns"]}
    charts = []
    for i, key in enumerate(summary.get("charted_columns") or []):
        column = by_key[key]
        items = [
            (layer["name"], (layer["metrics"].get(key) or {}).get("value"))
            for layer in summary["layers"]
        ]
        unit = column["unit"]
        resolution = column.get("resolution")
        if unit == "ms":
            peak = max((float(v) for _, v in items if v is not None), default=0.0)
            unit = column_time_unit(peak, resolution)
            factor = {"ms": 1.0, "µs": 1e3, "ns": 1e6}[unit]
            items = [(name, None if v is None else float(v) * factor) for name, v in items]
            resolution = None if resolution is None else resolution * factor
        title = "time per call" if key == "time" else str(column.get("title") or key)
        charts.append(
            f"<h3>{_chip(column['provenance'])}{escape(title)} ({escape(unit)}) "
            f"<span class='muted'>per layer</span></h3>"
            + bar_chart(
                items,
                unit=unit,
                chart_id=f"layer-{key}",
                color=PALETTE[i % len(PALETTE)],
                quantity=str(column["quantity"]),
                resolution=resolution,  # labels to the timer's step; below it "<step"
            )
        )
    return "".join(charts)


def layers_section(summary: Mapping[str, Any]) -> str:
    """The per-layer section (table + one chart per quantity), or a note without layers."""
    if not summary["layers"]:
        return (
            "<h2>Per-layer profile</h2><p class='muted'>No per-layer figures: export with "
            "profiling enabled to get them.</p>"
        )
    timing = summary.get("timing") or {}
    notes = []
    if timing.get("layer_resolution_ms") is not None:
        step = float(timing["layer_resolution_ms"])
        notes.append(
            f"Times per call, {escape(str(timing.get('label') or ''))}; the per-layer timer "
            f"steps by {escape(time_text(step, step, time_unit_for(step)))}. "
            "“±1 step” marks a time spanning fewer than 10 steps, “&lt;1 step” one below a "
            "single step (its share and time per MAC are not computed)."
        )
    coverage = summary.get("layers_share_of_latency")
    if coverage:
        notes.append(escape(coverage_text(Metric.from_dict(coverage)) or ""))
    notes.append("Click a column header to sort. Bars are scaled to each column's largest value.")
    return (
        "<h2>Per-layer profile: where the time goes</h2>"
        + _table(summary)
        + f"<p class='muted'>{' '.join(notes)}</p>"
        + _charts(summary)
    )
