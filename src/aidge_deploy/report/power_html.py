"""The power section of the HTML report: figures with provenance, the trace with its window.

Kept beside ``html.py`` (which owns the layout of the other figures): one function that
turns the summary's ``power`` block into a section. An estimated figure says so next to
its value, with the model's uncertainty; nothing here is called "measured" unless the
monitor measured it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from aidge_deploy.metrics import format_figure

_W, _H, _PAD = 720, 220, 44


def _trace_svg(trace: Mapping[str, Any]) -> str:
    times: Sequence[float] = (trace.get("time") or {}).get("values") or []
    power: Sequence[float] = (trace.get("power") or {}).get("values") or []
    if len(times) < 2 or len(power) != len(times):
        return "<p class='muted'>No power trace for this run.</p>"
    ws = (trace.get("window_start") or {}).get("value")
    we = (trace.get("window_end") or {}).get("value")
    t0, t1 = float(times[0]), float(max(times[-1], we if we is not None else times[-1]))
    p_max = max(float(max(power)), 1e-12) * 1.1
    span = max(t1 - t0, 1e-12)

    def x(t: float) -> float:
        return _PAD + (float(t) - t0) / span * (_W - 2 * _PAD)

    def y(p: float) -> float:
        return _H - _PAD - float(p) / p_max * (_H - 2 * _PAD)

    parts = [
        f'<svg class="power-trace" data-chart="power-trace" viewBox="0 0 {_W} {_H}" '
        f'width="100%" role="img" aria-label="power over time with the gated window">'
    ]
    if ws is not None and we is not None:
        parts.append(
            f'<rect class="gate-window" data-window-start="{ws}" data-window-end="{we}" '
            f'x="{x(ws):.1f}" y="{_PAD / 2:.1f}" width="{max(x(we) - x(ws), 1):.1f}" '
            f'height="{_H - 1.5 * _PAD:.1f}" fill="#f1c40f" fill-opacity="0.18"/>'
            f'<text x="{x(we) - 4:.1f}" y="{_H - _PAD - 6:.1f}" font-size="11" '
            'text-anchor="end" fill="#7d6608">gate window</text>'
        )
    points = " ".join(f"{x(t):.1f},{y(p):.1f}" for t, p in zip(times, power, strict=True))
    parts.append(f'<polyline fill="none" stroke="#c0392b" stroke-width="1.4" points="{points}"/>')
    parts.append(
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#888"/>'
        f'<text x="{_PAD}" y="{_H - _PAD + 16}" font-size="11">{t0:.4g} s</text>'
        f'<text x="{_W - _PAD}" y="{_H - _PAD + 16}" font-size="11" text-anchor="end">'
        f"{t1:.4g} s</text>"
        f'<text x="4" y="{_PAD - 4}" font-size="11">{p_max * 1e3:.4g} mW</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _gate_detection(gate: Mapping[str, Any] | None) -> str:
    """What the gate detector found: every edge counted, the pulses with their widths, the
    window chosen and why, the limits it used."""
    if not gate:
        return ""

    def count(key: str) -> int:
        return int((gate.get(key) or {}).get("value") or 0)

    def widths(key: str) -> str:
        listed = gate.get(key) or {}
        starts = (listed.get("start") or {}).get("values") or []
        values = (listed.get("width") or {}).get("values") or []
        return ", ".join(f"{w:.6g} s at {t:.6g} s" for t, w in zip(starts, values, strict=False))

    chosen = gate.get("chosen_pulse")
    rows = [
        ("level changes", str(count("edges"))),
        ("glitches ignored", f"{count('glitches')} {widths('glitches_listed')}".strip()),
        ("dropouts bridged", f"{count('dropouts')} {widths('dropouts_listed')}".strip()),
        ("pulses", f"{count('pulses')}: {widths('pulses_listed')}" if count("pulses") else "0"),
        (
            "window",
            f"pulse {chosen + 1}: {gate.get('selection')}" if chosen is not None else "none",
        ),
        ("limits", str(gate.get("settings_basis") or "")),
    ]
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return (
        f"<h3>Gate detection ({escape(str(gate.get('input') or ''))})</h3>"
        f"<table class='gate-detection' data-edges='{count('edges')}'>{cells}</table>"
    )


def _issues(power: Mapping[str, Any]) -> str:
    issues = power.get("issues") or []
    if not issues:
        return ""
    items = "".join(
        f"<li data-code='{escape(str(i['code']))}'><code>{escape(str(i['code']))}</code> "
        f"({escape(str(i['severity']))}): {escape(str(i['message']))}</li>"
        for i in issues
    )
    return f"<ul class='power-issues'>{items}</ul>"


def power_section(summary: Mapping[str, Any], badge: Any) -> str:
    """``<h2>Power</h2>`` and its figures; empty string when the run had no power run."""
    power = summary.get("power")
    if not power:
        return ""
    prov = str(power["provenance"])
    invalid = power.get("invalid_reason")
    unc = (power.get("uncertainty_factor") or {}).get("value")
    kind = "estimated by a model" if prov == "estimated" else f"{prov}"
    rows = []
    for m in power["metrics"]:
        text = format_figure(m["value"], m["unit"], unavailable_reason=m.get("unavailable_reason"))
        # a figure that does not exist has no provenance to show
        exists = m["value"] is not None
        rows.append(
            f"<tr data-metric='{escape(m['name'])}' data-provenance="
            f"'{escape(m['provenance']) if exists else 'none'}'>"
            f"<td>{escape(m['name'].replace('_', ' '))}</td><td>{escape(text)}</td>"
            f"<td>{badge(m['provenance']) if exists else '—'}</td></tr>"
        )
    note = f" Model uncertainty: ×/÷{unc:g}." if unc else ""
    monitor = power.get("monitor") or {}
    ident = ", ".join(
        f"{k} {escape(str(v))}"
        for k, v in monitor.items()
        if k in ("name", "model", "serial", "firmware", "calibration_date") and v
    )
    per_layer = dict((power.get("layer_energy") or {}).get("values") or {})
    # the per-layer table shows each layer's energy already: its sum here, and a table
    # only for layers that table does not show
    shown = {row["name"] for row in summary.get("layers") or () if "energy" in row["metrics"]}
    layer_rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{value:.4g} µJ</td></tr>"
        for name, value in per_layer.items()
        if name not in shown
    )
    total = sum(value for name, value in per_layer.items() if name in shown)
    layers = (
        f"<h3>Energy per layer ({escape(kind)})</h3>"
        + (
            f"<p class='muted'>In the per-layer table (energy per call); the layers add up "
            f"to {total:.4g} µJ per inference.</p>"
            if shown & set(per_layer)
            else ""
        )
        + (
            "<table class='power-layers'><tr><th>layer</th><th>energy per call</th></tr>"
            f"{layer_rows}</table>"
            if layer_rows
            else ""
        )
        if per_layer
        else ""
    )
    trace = power.get("trace")
    source = (
        f"<p class='muted' data-power-source='{escape(power['source'])}'>Source "
        f"<code>{escape(power['source'])}</code>: {escape(str(power.get('scope') or ''))}. "
    )
    basis = escape(str(power.get("basis") or ""))
    if invalid:
        head = (
            "<h2>Power <span class='badge invalid'>invalid</span></h2>"
            + f"{source}{basis}</p>"
            + "<p class='power-invalid' data-power-invalid='1'><b>No power figure is "
            f"published:</b> {escape(str(invalid))}. The raw capture is kept in the bundle's "
            "files.</p>"
        )
        trace_html = ""
    else:
        head = (
            f"<h2>Power {badge(prov)}</h2>"
            + f"{source}Figures are <b>{escape(kind)}</b>.{escape(note)} {basis}</p>"
        )
        trace_html = _trace_svg(trace) if trace else "<p class='muted'>No power trace.</p>"
    return (
        head
        + (f"<p class='muted'>Monitor: {ident}</p>" if ident else "")
        + f"<table class='power-figures'>{''.join(rows)}</table>"
        + "".join(
            f"<p class='muted power-note'>{escape(str(n))}</p>" for n in power.get("notes") or []
        )
        + _issues(power)
        + trace_html
        + _gate_detection(power.get("gate_detection"))
        + layers
    )


__all__ = ["power_section"]
