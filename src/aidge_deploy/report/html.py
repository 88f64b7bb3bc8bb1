"""The HTML report of a bundle: one self-contained file that works offline.

It is rendered from the bundle's own ``summary.json`` and ``run_metadata.json`` documents,
so what the page shows is exactly what the files say. Charts are inline SVG (``report.svg``),
styles are inline, and no resource is fetched: the page opens from a CI artifact or an
e-mail attachment. Provenance is stated next to every figure; emulated figures are labelled
as emulated instruction counts, never as cycles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from aidge_deploy.report.power_html import power_section
from aidge_deploy.report.svg import (
    PALETTE,
    bar_chart,
    capacity_bars,
    fmt_bytes,
    fmt_number,
    histogram,
    time_scale,
)

PROVENANCE_LABELS: Mapping[str, str] = {
    "silicon": "measured on target silicon",
    "host": "measured on the host",
    "emulated": "EMULATED — emulated instruction counts, not cycles",
    "estimated": "ESTIMATED — the output of a model, not a measurement",
    "static": "static — a fact of the build",
}
_STATUS_COLORS = {"valid": "#1f8a4c", "degraded": "#b7791f", "invalid": "#c0392b"}
_SEVERITY_COLORS = {"error": "#c0392b", "warning": "#b7791f", "info": "#2f6fb5"}

_CSS = """
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
.prov-silicon{background:#1f8a4c}.prov-host{background:#2f6fb5}.prov-emulated{background:#8e44ad}.prov-estimated{background:#b9770e}.prov-static{background:#566573}
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
    return f'<span class="badge prov-{escape(provenance)}">{escape(label)}</span>'


def _value_text(value: Any, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "B":
        return fmt_bytes(float(value))
    if unit == "ratio":
        return f"{float(value):.2%}"
    if unit == "ms":
        factor, shown = time_scale(abs(float(value)))
        return f"{fmt_number(float(value) * factor)} {shown}"
    return f"{fmt_number(float(value))} {unit}"


def _cards(summary: Mapping[str, Any]) -> str:
    metrics = summary["metrics"]
    cycles = summary.get("cycles_name", "cycles")
    order = [
        ("latency", "Latency / inference"),
        (cycles, f"{cycles} / inference"),
        ("mlperf_latency", "MLPerf latency"),
        ("accuracy", "Accuracy"),
        ("flash_bytes", "Flash"),
        ("ram_bytes", "Static RAM"),
        ("activation_memory", "Activation memory"),
        ("peak_rss", "Peak RSS"),
    ]
    cards = []
    for key, title in order:
        metric = metrics.get(key)
        if metric is None:
            continue
        prov = PROVENANCE_LABELS.get(metric["provenance"], metric["provenance"])
        cards.append(
            f'<div class="card" data-metric="{escape(key)}"><div class="k">{escape(title)}</div>'
            f'<div class="v">{escape(_value_text(metric["value"], metric["unit"]))}</div>'
            f'<div class="p">{escape(metric.get("description") or "")}<br>{escape(prov)}</div></div>'
        )
    if not cards:
        return '<p class="muted">This run reported no headline figure.</p>'
    return f'<div class="cards">{"".join(cards)}</div>'


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


def _layers(summary: Mapping[str, Any]) -> str:
    columns = summary["layer_columns"]
    layers = summary["layers"]
    if not layers:
        return (
            "<h2>Per-layer profile</h2><p class='muted'>No per-layer figures: export with "
            "profiling enabled to get them.</p>"
        )
    charts = []
    for i, col in enumerate(columns):
        items = [
            (layer["name"], (layer["metrics"].get(col["key"]) or {}).get("value"))
            for layer in layers
        ]
        unit = col["unit"]
        if unit == "ms":
            peak = max((v for _, v in items if v is not None), default=0.0)
            factor, unit = time_scale(peak)
            items = [(name, None if v is None else v * factor) for name, v in items]
        title = "Time per call" if col["key"] == "time" else col["key"]
        charts.append(
            f"<h3>{escape(title)} ({escape(unit)}) "
            f"{_prov_badge(col['provenance'])}</h3>"
            + bar_chart(
                items,
                unit=unit,
                chart_id=f"layer-{col['key']}",
                color=PALETTE[i % len(PALETTE)],
            )
        )
    scales: dict[str, tuple[float, str]] = {}
    for c in columns:
        if c["unit"] == "ms":
            peak = max(
                (
                    f["value"]
                    for layer in layers
                    if (f := layer["metrics"].get(c["key"])) and f["value"] is not None
                ),
                default=0.0,
            )
            scales[c["key"]] = time_scale(peak)
        else:
            scales[c["key"]] = (1.0, c["unit"])
    head = "".join(
        f'<th class="num">{escape(c["key"])} ({escape(scales[c["key"]][1])})</th>' for c in columns
    )
    rows = []
    for layer in layers:
        cells = "".join(
            f'<td class="num">{escape(fmt_number(f["value"] * scales[c["key"]][0])) if (f := layer["metrics"].get(c["key"])) and f["value"] is not None else "—"}</td>'
            for c in columns
        )
        rows.append(f"<tr><td>{layer['index']}</td><td>{escape(layer['name'])}</td>{cells}</tr>")
    table = f"<table><tr><th>#</th><th>layer</th>{head}</tr>{''.join(rows)}</table>"
    return "<h2>Per-layer profile</h2>" + "".join(charts) + "<h3>Table</h3>" + table


def _latency(summary: Mapping[str, Any]) -> str:
    latency = summary.get("latency")
    if not latency:
        return (
            "<h2>Latency</h2><p class='muted'>No per-inference timings (output or "
            "validation-only export).</p>"
        )
    agg = summary["metrics"].get("latency", {})
    markers: list[tuple[str, float]] = [("median", latency["median"]), ("mean", latency["mean"])]
    if agg.get("value") is not None and summary["aggregation"] != "median":
        markers.append((summary["aggregation"], agg["value"]))
    factor, unit = (
        time_scale(float(latency["max"])) if latency["unit"] == "ms" else (1.0, latency["unit"])
    )
    chart = histogram(
        [s * factor for s in latency["samples"]],
        unit=unit,
        chart_id="latency-histogram",
        markers=[(name, v * factor) for name, v in markers],
    )
    keys = ("n", "mean", "median", "p90", "min", "max", "std")
    head = "".join(
        f'<th class="num">{k}{"" if k == "n" else f" ({escape(unit)})"}</th>' for k in keys
    )
    cells = "".join(
        f'<td class="num">{escape(fmt_number(float(latency[k]) * (1 if k == "n" else factor)))}</td>'
        for k in keys
    )
    agg_text = escape(agg.get("description", ""))
    return (
        f"<h2>Latency distribution {_prov_badge(latency['provenance'])}</h2>{chart}"
        f"<table><tr>{head}</tr><tr>{cells}</tr></table>"
        f"<p class='muted'>Unit: {escape(unit)} per inference. Headline figure: "
        f"{agg_text}.</p>"
    )


def _memory(summary: Mapping[str, Any]) -> str:
    mem = summary["memory"]
    rows: list[tuple[str, int | None, int | None]] = []
    if mem.get("flash_bytes") is not None:
        rows.append(("Flash (program)", mem["flash_bytes"], mem.get("flash_capacity")))
    if mem.get("ram_bytes") is not None:
        rows.append(("Static RAM (data+bss)", mem["ram_bytes"], mem.get("ram_capacity")))
    if mem.get("activation_bytes") is not None:
        rows.append(("Activation memory", mem["activation_bytes"], mem.get("ram_capacity")))
    if mem.get("peak_rss_bytes") is not None:
        rows.append(("Peak RSS (process)", mem["peak_rss_bytes"], None))
    if not rows:
        return "<h2>Memory</h2><p class='muted'>No memory figure for this run.</p>"
    note = (
        "Bars are the share of the target's capacity (green &lt; 70%, amber &lt; 90%, red "
        "above). Figures without a capacity (host programs) are scaled to each other."
    )
    return (
        "<h2>Memory</h2>" + capacity_bars(rows, chart_id="memory") + f"<p class='muted'>{note}</p>"
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
        f"{m['name']} {fmt_bytes(m['capacity_bytes']) if m.get('capacity_bytes') else '?'}"
        for m in hw.get("memories", [])
    )
    clock = hw.get("clock_hz")
    target_pairs = [
        ("target", target.get("name")),
        ("backend", target.get("backend")),
        ("hardware model", hw.get("name")),
        ("CPU", " ".join(str(x) for x in (hw.get("cpu"), hw.get("arch")) if x) or None),
        ("clock", f"{clock / 1e6:g} MHz" if clock else None),
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
        + bar_chart(durations, unit="ms", chart_id="stage-durations", color=PALETTE[5])
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
    if provenance == "emulated":
        cyc = summary.get("cycles_name", "instructions")
        banner = (
            '<div class="banner" data-provenance="emulated">EMULATED run: every timing and '
            f"counter ({escape(cyc)}) on this page comes from QEMU — emulated instruction "
            "counts, not cycles. Compare emulated figures only with emulated figures.</div>"
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
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body data-run-id='{escape(str(summary['run_id']))}'>"
        f"<header><h1>{escape(title)}</h1><div class='sub'>{_prov_badge(provenance)} "
        f"backend {escape(str(summary.get('backend')))} · protocol "
        f"{escape(str(summary.get('protocol')))} · {escape(str(summary['timestamp']))}</div></header>"
        f"<main>{banner}"
        f"<section>{_cards(summary)}</section>"
        f"<section>{_validity(summary)}</section>"
        f"<section>{_layers(summary)}</section>"
        f"<section>{_latency(summary)}</section>"
        f"<section>{_memory(summary)}</section>"
        + (f"<section>{power}</section>" if (power := power_section(summary, _prov_badge)) else "")
        + f"<section>{_run(summary, metadata)}</section>"
        f"{files_section}</main></body></html>\n"
    )
