"""The HTML report of a bundle: one self-contained file that works offline.

It is rendered from the bundle's own ``summary.json`` and ``run_metadata.json`` documents,
so what the page shows is exactly what the files say. Charts are inline SVG (``report.svg``),
styles are inline, and no resource is fetched: the page opens from a CI artifact or an
e-mail attachment. The provenance legend is given once at the top and every figure carries
its chip; emulated figures are labelled as emulated instruction counts, never as cycles, and
times estimated from them say so. Figures print to the resolution of their timer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from aidge_deploy.display import figure_text, fmt_bytes, time_text, time_unit_for
from aidge_deploy.metrics import Band, Provenance
from aidge_deploy.report.html_layers import SORT_SCRIPT, layers_section
from aidge_deploy.report.power_html import power_section
from aidge_deploy.report.published_html import published_section
from aidge_deploy.report.svg import PALETTE, bar_chart, capacity_bars, histogram

#: the legend: what each provenance means (shown once, at the top of the page)
PROVENANCE_LABELS: Mapping[str, str] = {
    Provenance.SILICON.value: "measured on target silicon",
    Provenance.HOST.value: "measured on the host",
    Provenance.EMULATED.value: "counted by an emulator (QEMU): emulated instruction counts, "
    "not cycles",
    Provenance.ESTIMATED.value: "the output of a model (e.g. a time at N MHz with CPI = 1), "
    "not a measurement",
    Provenance.STATIC.value: "a fact of the build or the model (ELF sizes, MACs), not of a run",
}
_STATUS_COLORS = {"valid": "#1f8a4c", "degraded": "#b7791f", "invalid": "#c0392b"}
_SEVERITY_COLORS = {"error": "#c0392b", "warning": "#b7791f", "info": "#2f6fb5"}

PAGE_CSS = """
*{box-sizing:border-box}
body{margin:0;background:#f4f6fa;color:#1d2330;font:14px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
header{background:#1d2a44;color:#fff;padding:22px 32px}
header h1{margin:0 0 6px;font-size:22px;font-weight:600}
header .sub{opacity:.8;font-size:13px}
main{max-width:1180px;margin:0 auto;padding:20px 32px 40px}
section{background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(20,30,60,.08);padding:18px 22px;margin:0 0 18px}
h2{font-size:17px;margin:0 0 12px;font-weight:600}
h3{font-size:14px;margin:16px 0 6px;font-weight:600;color:#39425a}
.badge{display:inline-block;border-radius:999px;padding:2px 10px;font-size:12px;font-weight:600;color:#fff;margin-right:6px;vertical-align:middle}
.prov-silicon{background:#1f8a4c}.prov-host{background:#2f6fb5}.prov-emulated{background:#8e44ad}
.prov-estimated{background:#c56a1b}.prov-static{background:#6b7488}
.badge.invalid{background:#c0392b}.power-invalid{color:#922b21}
.prov{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:6px;vertical-align:middle}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;font-size:13px;margin:0 0 18px;background:#fff;border-radius:10px;padding:10px 16px;box-shadow:0 1px 3px rgba(20,30,60,.08)}
.legend b{margin-right:4px}
table.layers td{vertical-align:middle}
table.sortable th[data-sort]{cursor:pointer;user-select:none}
table.sortable th[data-dir=asc]::after{content:" ▲"}table.sortable th[data-dir=desc]::after{content:" ▼"}
.cbar{height:4px;background:#eef1f6;border-radius:2px;margin-top:3px}
.cbar i{display:block;height:4px;border-radius:2px}
.flag{font-size:10px;color:#b7791f;text-decoration:none;border-bottom:1px dotted #b7791f;margin-left:4px}
td.na{color:#8a90a0}
td.nw{white-space:nowrap}
.u{font-weight:400;color:#6b7488}
.banner{border-left:5px solid #8e44ad;background:#f5ecfa;padding:10px 14px;border-radius:6px;margin:0 0 18px;font-weight:600;color:#5b2a72}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:12px}
.card{background:#f7f9fc;border:1px solid #e3e8f0;border-radius:8px;padding:12px 14px}
.card .k{font-size:12px;color:#5a6478;text-transform:uppercase;letter-spacing:.03em}
.card .v{font-size:20px;font-weight:600;margin:2px 0}
.card .p{font-size:11px;color:#6b7488}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eceff4;vertical-align:top}
th{color:#4a5368;font-weight:600;background:#f7f9fc}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.issues li{margin:4px 0}
.sev{font-weight:700;text-transform:uppercase;font-size:11px;margin-right:6px}
.muted{color:#6b7488}
code{background:#eef1f6;padding:1px 5px;border-radius:4px;font-size:12px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:18px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
"""


def _prov_badge(provenance: str) -> str:
    label = PROVENANCE_LABELS.get(provenance, provenance)
    return f'<span class="badge prov-{escape(provenance)}" title="{escape(label)}">{escape(provenance)}</span>'


def provenance_chip(provenance: str) -> str:
    return f'<span class="prov prov-{escape(provenance)}" title="{escape(provenance)}"></span>'


def _legend(summary: Mapping[str, Any]) -> str:
    """What each provenance chip means: once, for the whole page."""
    items = "".join(
        f'<span data-legend="{escape(p)}">{provenance_chip(p)}<b>{escape(p)}</b>'
        f"{escape(PROVENANCE_LABELS.get(p, p))}</span>"
        for p in summary.get("provenances") or [summary["provenance"]]
    )
    return f'<div class="legend" data-provenance-legend="1">{items}</div>'


def _cards(summary: Mapping[str, Any]) -> str:
    metrics = summary["metrics"]
    cycles = summary.get("cycles_name", "cycles")
    heads = [
        ("latency", "Latency / inference"),
        (cycles, f"{cycles.replace('_', ' ')} / inference"),
    ]
    if summary["provenance"] == Provenance.EMULATED.value:
        heads.reverse()  # the instruction count is an emulated run's primary figure
    order = [
        *heads,
        ("estimated_cycles", "Estimated cycles / inference"),
        ("mlperf_latency", "MLPerf latency"),
        ("accuracy", "Accuracy"),
        ("flash_bytes", "Flash"),
        ("ram_bytes", "Static RAM"),
        ("image_bytes", "Program image"),
        ("static_data_bytes", "Static data"),
        ("activation_memory", "Activation memory"),
        ("macs", "MACs / inference"),
        ("params", "Parameters"),
        ("peak_rss", "Peak RSS"),
    ]
    cards = []
    for key, title in order:
        metric = metrics.get(key)
        if metric is None:
            continue
        band = Band.from_dict(metric.get("band"))  # an estimate: its model's band
        text = figure_text(metric["value"], metric["unit"], metric.get("resolution"), band=band)
        note = metric.get("description") or ""
        if band is not None and metric["value"] is not None:
            low, high = band.low(metric["value"]), band.high(metric["value"])
            shown = [figure_text(v, metric["unit"], metric.get("resolution")) for v in (low, high)]
            note = f"{note}; the model's band: {shown[0]} to {shown[1]}"
        if metric["value"] is None:  # the reason under the word, not a paragraph as a figure
            text, note = "unavailable", f"{metric.get('unavailable_reason')}. {note}"
        cards.append(
            f'<div class="card" data-metric="{escape(key)}"><div class="k">'
            f"{provenance_chip(metric['provenance'])}{escape(title)}</div>"
            f'<div class="v">{escape(text)}</div>'
            f'<div class="p">{escape(note)}</div></div>'
        )
    if not cards:
        return '<p class="muted">This run reported no headline figure.</p>'
    return f'<div class="cards">{"".join(cards)}</div>'


def _timing_model(summary: Mapping[str, Any]) -> str:
    """Which timing model estimated the cycles, what it assumes and leaves out (said once)."""
    model = summary.get("timing_model")
    if not model:
        return ""
    name = escape(str(model.get("model")))
    if model.get("unavailable"):
        return (
            f'<section data-timing-model="unavailable"><h2>Estimated cycles</h2><p>'
            f"{provenance_chip('estimated')}The {name} did not run: "
            f"{escape(str(model['unavailable']))}. Times are one cycle per instruction.</p>"
            "</section>"
        )
    items = "".join(f"<li>{escape(str(a))}</li>" for a in model.get("assumptions") or [])
    left = "".join(f"<li>{escape(str(a))}</li>" for a in model.get("leaves_out") or [])
    band = Band.from_dict(model.get("band"))
    uncertainty = (
        ""
        if band is None
        else f'<h3>Uncertainty</h3><p data-band="{escape(band.describe())}">The model states '
        f"a band of {escape(band.describe())} around its estimates of this run: "
        f"{escape(band.basis)}.</p>"
    )
    return (
        f'<section data-timing-model="{escape(str(model.get("core")))}"><h2>Estimated cycles: '
        f"{name}</h2><p>{provenance_chip('estimated')}Estimated cycles are the output of the {name}: "
        "each instruction the emulator ran, priced from its core's published timing "
        f"(the data file cites the table and row of every number). They are estimates, "
        f"not measurements; instructions stay beside them.</p><h3>Assumptions</h3>"
        f"<ul>{items}</ul>{uncertainty}"
        "<h3>What it leaves out (and which way the estimate errs)</h3>"
        f"<ul>{left}</ul></section>"
    )


def _counters(summary: Mapping[str, Any]) -> str:
    """Every counter asked for, per inference: measured ones with how they were reduced,
    unavailable ones with their reason ("" when the run was asked for none)."""
    rows = []
    for name in summary.get("counters") or ():
        metric = summary["metrics"].get(name)
        if metric is None:
            continue
        text = figure_text(
            metric["value"],
            metric["unit"],
            metric.get("resolution"),
            unavailable_reason=metric.get("unavailable_reason"),
        )
        na = " na" if metric["value"] is None else ""
        rows.append(
            f'<tr data-counter="{escape(name)}"><td class="nw">{provenance_chip(metric["provenance"])}'
            f'<code>{escape(name)}</code></td><td class="num{na}">{escape(text)}</td>'
            f'<td class="muted">{escape(metric.get("description") or "")}</td></tr>'
        )
    if not rows:
        return ""
    return (
        '<h2>Counters per inference</h2><table data-counter-table="1"><tr><th>counter</th>'
        "<th class='num'>per inference</th><th>what it counts, and how it was reduced</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _validity(summary: Mapping[str, Any]) -> str:
    validity = summary["validity"]
    status = validity["status"]
    color = _STATUS_COLORS.get(status, "#555")
    head = (
        f'<h2>Validity <span class="badge" style="background:{color}" '
        f'data-validity="{escape(status)}">{escape(status)}</span></h2>'
    )
    if not validity["issues"]:
        return head + '<p class="muted">No issue found: every check passed.</p>'
    items = []
    for issue in validity["issues"]:
        sev = issue["severity"]
        items.append(
            f'<li><span class="sev" style="color:{_SEVERITY_COLORS.get(sev, "#555")}">'
            f"{escape(sev)}</span><code>{escape(issue['code'])}</code> "
            f"{escape(issue['message'])}</li>"
        )
    return head + f'<ul class="issues">{"".join(items)}</ul>'


def _latency(summary: Mapping[str, Any]) -> str:
    latency = summary.get("latency")
    if not latency:
        mlperf = summary["metrics"].get("mlperf_latency")
        why = (
            "an MLPerf Tiny session prints one mean over its inferences (see the MLPerf "
            "latency figure), not a series"
            if mlperf
            else "no per-inference timings (output or validation-only export)"
        )
        return f"<h2>Latency</h2><p class='muted'>No distribution: {escape(why)}.</p>"
    agg = summary["metrics"].get("latency", {})
    res = latency.get("resolution")
    markers: list[tuple[str, float]] = [("median", latency["median"]), ("mean", latency["mean"])]
    if agg.get("value") is not None and summary["aggregation"] != "median":
        markers.append((summary["aggregation"], agg["value"]))
    unit = time_unit_for(float(latency["max"]))
    factor = {"ms": 1.0, "µs": 1e3, "ns": 1e6}[unit]
    chart = histogram(
        [s * factor for s in latency["samples"]],
        unit=unit,
        chart_id="latency-histogram",
        quantity="latency",
        resolution=None if res is None else res * factor,
        markers=[(name, v * factor) for name, v in markers],
    )
    keys = ("mean", "median", "p90", "min", "max", "std")
    head = '<th class="num">n</th>' + "".join(
        f'<th class="num">{k} ({escape(unit)})</th>' for k in keys
    )
    cells = f'<td class="num">{int(latency["n"])}</td>' + "".join(
        f'<td class="num">{escape(time_text(float(latency[k]), res, unit, with_unit=False))}</td>'
        for k in keys
    )
    step = "" if res is None else f" The timer steps by {escape(time_text(res, res))}."
    return (
        f"<h2>{provenance_chip(latency['provenance'])}Latency distribution "
        f"<span class='muted'>({escape(str(latency.get('label') or ''))})</span></h2>{chart}"
        f"<table><tr>{head}</tr><tr>{cells}</tr></table>"
        f"<p class='muted'>{escape(unit)} per inference, {int(latency['n'])} samples.{step} "
        f"Headline figure: {escape(agg.get('description', ''))}.</p>"
    )


def _memory(summary: Mapping[str, Any]) -> str:
    mem = summary["memory"]
    rows: list[tuple[str, int | None, int | None]] = []
    if mem.get("flash_bytes") is not None:
        rows.append(("Flash (firmware)", mem["flash_bytes"], mem.get("flash_capacity")))
    if mem.get("image_bytes") is not None:
        rows.append(("Program image (ELF loadable)", mem["image_bytes"], None))
    if mem.get("ram_bytes") is not None:
        what = "Static RAM (data+bss)" if mem.get("kind") == "firmware" else "Static data"
        rows.append((what, mem["ram_bytes"], mem.get("ram_capacity")))
    if mem.get("activation_bytes") is not None:
        rows.append(("Activation memory", mem["activation_bytes"], mem.get("ram_capacity")))
    peak_rss = (summary.get("metrics") or {}).get("peak_rss") or {}
    if peak_rss.get("value") is not None:
        rows.append(("Peak RSS (process)", int(peak_rss["value"]), None))
    if not rows:
        return "<h2>Memory</h2><p class='muted'>No memory figure for this run.</p>"
    note = (
        "Bars are the share of the target's capacity (green &lt; 70%, amber &lt; 90%, red "
        "above). Figures without a capacity (host programs) are scaled to each other. "
        "Sizes and planned activation memory are static facts of the build; peak RSS is "
        "measured."
    )
    return (
        "<h2>Memory</h2>"
        + capacity_bars(rows, chart_id="memory", quantity="memory")
        + f"<p class='muted'>{note}</p>"
    )


def _kv_table(pairs: Sequence[tuple[str, Any]]) -> str:
    rows = "".join(
        f"<tr><th>{escape(k)}</th><td>{escape('—' if v is None else str(v))}</td></tr>"
        for k, v in pairs
    )
    return f"<table>{rows}</table>"


def _run(summary: Mapping[str, Any], metadata: Mapping[str, Any]) -> str:
    target = metadata.get("target", {})
    hw = target.get("hardware", {}) or {}
    memories = ", ".join(
        f"{m['name']} {m.get('text') or fmt_bytes(m['capacity_bytes'])} ({m.get('source')})"
        if m.get("capacity_bytes")
        else f"{m['name']} unavailable"
        for m in hw.get("memories", [])
    )
    clock = (hw.get("clock") or {}).get("text") if hw.get("clock_hz") else None
    target_pairs = [
        ("target", target.get("name")),
        ("backend", target.get("backend")),
        ("hardware model", hw.get("name")),
        ("CPU", " ".join(str(x) for x in (hw.get("cpu"), hw.get("arch")) if x) or None),
        ("clock", f"{clock} ({(hw.get('clock') or {}).get('source')})" if clock else None),
        ("memories", memories or None),
        ("protocol", summary.get("protocol")),
        ("aggregation", summary.get("aggregation")),
    ]
    export = metadata.get("export", {})
    versions = [("aidge-deploy", metadata.get("tool", {}).get("version"))]
    versions += [(k, v) for k, v in (metadata.get("packages") or {}).items() if k != "aidge-deploy"]
    versions += [(k, v) for k, v in (metadata.get("toolchain") or {}).items()]
    ident_pairs = [
        ("run id", metadata.get("run_id")),
        ("timestamp (UTC)", metadata.get("timestamp")),
        ("model hash", summary["identity"].get("model_hash")),
        ("export hash", export.get("export_hash")),
        ("application", (export.get("manifest") or {}).get("application")),
    ]
    durations = [(k, float(v)) for k, v in (metadata.get("stage_durations_ms") or {}).items()]
    stage_chart = (
        "<h3>Stage durations</h3>"
        + bar_chart(
            durations,
            unit="ms",
            chart_id="stage-durations",
            quantity="stage duration",
            color=PALETTE[5],
            resolution=1e-3,  # stage durations are kept to the microsecond
        )
        if durations
        else ""
    )
    return (
        "<h2>Run</h2><div class='grid2'><div><h3>Target</h3>"
        + _kv_table(target_pairs)
        + "<h3>Identity</h3>"
        + _kv_table(ident_pairs)
        + "</div><div><h3>Versions</h3>"
        + _kv_table(versions)
        + "</div></div>"
        + stage_chart
    )


def render_html(
    summary: Mapping[str, Any], metadata: Mapping[str, Any], files: Sequence[str] = ()
) -> str:
    """The complete HTML page for one bundle (``files``: the bundle's other files)."""
    provenance = summary["provenance"]
    title = f"aidge-deploy report — {summary.get('target') or 'unknown target'}"
    banner = ""
    if provenance == Provenance.EMULATED.value:
        cyc = summary.get("cycles_name", "instructions")
        label = (summary.get("timing") or {}).get("label")
        times = (
            f"Times are {escape(label)}: estimates from those counts, not measurements. "
            if label
            else ""
        )
        banner = (
            '<div class="banner" data-provenance="emulated">EMULATED run: the counts on this '
            f"page ({escape(cyc)} and the emulated counters) come from QEMU — emulated "
            f"instruction counts, not cycles. {times}Compare emulated figures only with "
            "emulated figures.</div>"
        )
    file_list = "".join(f"<li><code>{escape(f)}</code></li>" for f in files)
    files_section = (
        f"<section><h2>Bundle files</h2><ul>{file_list}</ul><p class='muted'>"
        "<code>manifest.json</code> lists every file with its SHA-256; check it with "
        "<code>aidge_deploy.report.verify_bundle</code>.</p></section>"
        if files
        else ""
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{PAGE_CSS}</style></head>"
        f"<body data-run-id='{escape(str(summary['run_id']))}'>"
        f"<header><h1>{escape(title)}</h1><div class='sub'>{_prov_badge(provenance)} "
        f"backend {escape(str(summary.get('backend')))} · protocol "
        f"{escape(str(summary.get('protocol')))} · {escape(str(summary['timestamp']))}</div></header>"
        f"<main>{_legend(summary)}{banner}"
        f"<section>{_cards(summary)}</section>"
        f"{_timing_model(summary)}"
        f"{published_section(summary, metadata, provenance_chip)}"
        f"<section>{_validity(summary)}</section>"
        f"<section>{layers_section(summary)}</section>"
        + (f"<section>{counters}</section>" if (counters := _counters(summary)) else "")
        + f"<section>{_latency(summary)}</section>"
        f"<section>{_memory(summary)}</section>"
        + (f"<section>{power}</section>" if (power := power_section(summary, _prov_badge)) else "")
        + f"<section>{_run(summary, metadata)}</section>"
        f"{files_section}</main><script>{SORT_SCRIPT}</script></body></html>\n"
    )
