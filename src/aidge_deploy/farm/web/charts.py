"""The compare page's per-layer delta chart: inline SVG drawn here, in the style and with
the number formatting of the report's charts (``report.svg``), and the same test hooks:
every bar a ``rect.bar`` with ``data-value``, every chart an ``svg[data-chart]``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from aidge_deploy.report.compare import MetricDelta
from aidge_deploy.report.svg import fmt_number

WORSE = "#c0392b"  # larger in the candidate
BETTER = "#1f8a4c"


def _label(delta: MetricDelta) -> str:
    """``layers/<layer>/<figure>`` -> ``<layer>``."""
    return delta.key.split("/", 1)[-1].rsplit("/", 1)[0]


def delta_chart(deltas: Sequence[MetricDelta], *, chart_id: str, width: int = 1080) -> str:
    """Diverging horizontal bars of ``cand - base`` per layer, centred on zero."""
    label_w, value_w, row_h, top = 230, 190, 24, 8
    plot_w = width - label_w - value_w
    mid = label_w + plot_w / 2
    values = [d.delta for d in deltas if d.delta is not None and math.isfinite(d.delta)]
    peak = max((abs(v) for v in values), default=0.0)
    height = top * 2 + row_h * max(1, len(deltas))
    unit = deltas[0].unit if deltas else ""
    parts = [
        f'<svg class="chart" data-chart="{escape(chart_id)}" data-bars="{len(values)}" '
        f'viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(chart_id)} ({escape(unit)})" font-size="12">',
        f'<line x1="{mid:.1f}" y1="{top}" x2="{mid:.1f}" y2="{height - top}" stroke="#8a93a6"/>',
    ]
    for i, d in enumerate(deltas):
        y = top + i * row_h
        label = _label(d)
        short = label if len(label) <= 30 else label[:29] + "…"
        parts.append(
            f'<text x="{label_w - 8}" y="{y + row_h / 2 + 4}" text-anchor="end" fill="#333">'
            f"<title>{escape(label)}</title>{escape(short)}</text>"
        )
        delta = d.delta
        if delta is None or not math.isfinite(delta):
            parts.append(f'<text x="{mid + 6:.1f}" y="{y + row_h / 2 + 4}" fill="#888">n/a</text>')
            continue
        w = 0.0 if peak <= 0 else max(1.0, (plot_w / 2) * abs(delta) / peak) if delta else 0.0
        x = mid if delta >= 0 else mid - w
        color = WORSE if delta > 0 else BETTER
        pct = "" if d.pct is None else f" ({d.pct:+.1f}%)"
        text = f"{'+' if delta > 0 else ''}{fmt_number(delta)} {unit}{pct}"
        parts.append(
            f'<rect class="bar" data-value="{delta!r}" x="{x:.2f}" y="{y + 3}" width="{w:.2f}" '
            f'height="{row_h - 6}" fill="{color}" rx="3"><title>{escape(label)}: '
            f"{escape(fmt_number(d.base or 0.0))} → {escape(fmt_number(d.cand or 0.0))} "
            f"{escape(unit)}</title></rect>"
        )
        parts.append(
            f'<text x="{label_w + plot_w + 8}" y="{y + row_h / 2 + 4}" fill="#222">'
            f"{escape(text)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["delta_chart"]
