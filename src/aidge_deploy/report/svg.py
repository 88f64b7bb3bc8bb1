"""Small inline-SVG charts for the HTML report, generated in Python.

The report must open offline, years later, from a CI artifact: no CDN, no JavaScript
library. Four chart shapes cover it — horizontal bars (per-layer figures, stage
durations), a histogram (latency distribution), used-versus-capacity bars (memory) and a
scatter of two quantities (a campaign's latency against memory, with its Pareto front).
Every bar is a ``rect.bar`` carrying ``data-value`` and a ``<title>`` tooltip, and every
chart an ``svg[data-chart]`` with ``data-bars``, so tests can check what was drawn.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from aidge_deploy.display import fmt_bytes
from aidge_deploy.metrics import format_figure

PALETTE = ("#3b6fd8", "#d8843b", "#3ba86b", "#a85bd8", "#d83b5e", "#2fa3b5", "#8a8f3b")
_FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"'


def fmt_number(value: float) -> str:
    """Compact, readable number: 0.000805 -> 0.000805, 123456 -> 123,456, 1.5e-9 -> 1.5e-09."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e6 or magnitude < 1e-4:
        return f"{value:.3g}" if magnitude < 1e-4 else f"{value:,.0f}"
    if float(value).is_integer():
        return f"{int(value):,}"
    if magnitude >= 100:
        return f"{value:,.1f}".rstrip("0").rstrip(".")
    return f"{value:.4g}"


def _truncate(label: str, limit: int = 28) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def bar_chart(
    items: Sequence[tuple[str, float | None]],
    *,
    unit: str,
    chart_id: str,
    quantity: str,
    color: str = PALETTE[0],
    resolution: float | None = None,
    width: int = 1080,
) -> str:
    """Horizontal bars, one per (label, value); ``None`` values are drawn as 'n/a'.

    Values are labelled by the rules of ``metrics`` (to ``resolution``, counts as integers);
    ``quantity`` names what is charted (``data-quantity``: a page charts each one once).
    """
    label_w, value_w, row_h, top = 210, 180, 24, 8
    plot_w = width - label_w - value_w
    values = [v for _, v in items if v is not None and math.isfinite(v)]
    peak = max(values, default=0.0)
    height = top * 2 + row_h * max(1, len(items))
    parts = [
        f'<svg class="chart" data-chart="{escape(chart_id)}" data-quantity="{escape(quantity)}" '
        f'data-bars="{len(values)}" '
        f'viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(chart_id)} ({escape(unit)})" {_FONT} font-size="12">'
    ]
    for i, (label, value) in enumerate(items):
        y = top + i * row_h
        parts.append(
            f'<text x="{label_w - 8}" y="{y + row_h / 2 + 4}" text-anchor="end" fill="#333">'
            f"<title>{escape(label)}</title>{escape(_truncate(label))}</text>"
        )
        parts.append(
            f'<rect x="{label_w}" y="{y + 3}" width="{plot_w}" height="{row_h - 6}" '
            f'fill="#f1f3f7" rx="3"/>'
        )
        if value is None or not math.isfinite(value):
            parts.append(f'<text x="{label_w + 6}" y="{y + row_h / 2 + 4}" fill="#888">n/a</text>')
            continue
        w = 0.0 if peak <= 0 else max(1.0, plot_w * value / peak) if value > 0 else 0.0
        text = format_figure(value, unit, resolution)
        parts.append(
            f'<rect class="bar" data-value="{value!r}" x="{label_w}" y="{y + 3}" '
            f'width="{w:.2f}" height="{row_h - 6}" fill="{color}" rx="3">'
            f"<title>{escape(label)}: {escape(text)}</title></rect>"
        )
        parts.append(
            f'<text x="{label_w + plot_w + 8}" y="{y + row_h / 2 + 4}" fill="#222">'
            f"{escape(text)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


#: a histogram has at least this many bins (fewer is a bar chart, not a distribution) ...
MIN_BINS = 12
#: ... and at most this many
MAX_BINS = 40


def histogram_bins(
    samples: Sequence[float], resolution: float | None = None
) -> tuple[float, float, list[int]]:
    """``(low edge, high edge, counts)`` of a histogram of ``samples``.

    The number of bins follows Rice's rule (2·n^(1/3)), kept within [MIN_BINS, MAX_BINS].
    When the samples are quantised to ``resolution`` and span fewer steps than that, every
    step gets its own bin centred on it (bins never straddle two timer readings). The range
    is widened around a single value so one bar does not fill the plot.
    """
    lo, hi = min(samples), max(samples)
    rice = math.ceil(2 * len(samples) ** (1 / 3))
    n_bins = max(MIN_BINS, min(MAX_BINS, rice))
    if resolution is not None and resolution > 0:
        steps = round((hi - lo) / resolution)
        if steps + 1 <= MAX_BINS:
            extra = max(0, MIN_BINS - (steps + 1))
            # empty bins on both sides, but none below one step when no sample is negative
            # (a time or a count never is; a bin at 0 or below would be a reading never made)
            room = max(0, math.floor(lo / resolution + 1e-9) - 1) if lo >= 0 else extra
            below = min(extra // 2, room)
            lo_edge = lo - resolution * (below + 0.5)
            n_bins = steps + 1 + extra
            counts = [0] * n_bins
            for s in samples:
                counts[min(n_bins - 1, max(0, int((s - lo_edge) / resolution)))] += 1
            return lo_edge, lo_edge + n_bins * resolution, counts
    if hi <= lo:
        half = abs(lo) * 0.05 or 1.0
        lo, hi = lo - half, hi + half
    counts = [0] * n_bins
    step = (hi - lo) / n_bins
    for s in samples:
        counts[min(n_bins - 1, max(0, int((s - lo) / step)))] += 1
    return lo, hi, counts


def histogram(
    samples: Sequence[float],
    *,
    unit: str,
    chart_id: str,
    quantity: str,
    resolution: float | None = None,
    markers: Sequence[tuple[str, float]] = (),
    color: str = PALETTE[0],
    width: int = 1080,
    height: int = 240,
) -> str:
    """Vertical-bar histogram of ``samples`` with labelled vertical marker lines."""
    left, right, bottom = 50, 20, 40
    top = 16 + 14 * len(markers)  # marker labels sit above the plot, one line each
    plot_w, plot_h = width - left - right, height - top - bottom
    lo, hi, counts = histogram_bins(samples, resolution)

    def text(value: float) -> str:
        return (
            format_figure(value, unit, resolution, with_unit=False)
            if resolution
            else (fmt_number(value))
        )

    peak = max(counts)
    span = hi - lo
    bar_w = plot_w / len(counts)
    parts = [
        f'<svg class="chart" data-chart="{escape(chart_id)}" data-quantity="{escape(quantity)}" '
        f'data-bars="{len(counts)}" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(chart_id)}" {_FONT} font-size="12">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        f'stroke="#999"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#999"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" fill="#555">{peak}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" fill="#555">0</text>',
        f'<text x="14" y="{top + plot_h / 2}" fill="#555" transform="rotate(-90 14 '
        f'{top + plot_h / 2})" text-anchor="middle">samples</text>',
    ]
    for i, count in enumerate(counts):
        h = plot_h * count / peak if peak else 0
        b_lo = lo + span * i / len(counts)
        b_hi = lo + span * (i + 1) / len(counts)
        # on a timer's grid a bin is one reading (its centre); otherwise an interval
        where = text((b_lo + b_hi) / 2) if resolution else f"{text(b_lo)}–{text(b_hi)}"
        parts.append(
            f'<rect class="bar" data-value="{count}" x="{left + i * bar_w + 1:.2f}" '
            f'y="{top + plot_h - h:.2f}" width="{max(1.0, bar_w - 2):.2f}" height="{h:.2f}" '
            f'fill="{color}" opacity="0.85"><title>{escape(where)} {escape(unit)}: '
            f"{count} sample(s)</title></rect>"
        )
    first = lo + span / len(counts) / 2 if resolution else lo
    last = hi - span / len(counts) / 2 if resolution else hi
    parts.append(
        f'<text x="{left}" y="{height - 12}" fill="#555">{escape(text(first))} '
        f"{escape(unit)}</text>"
    )
    parts.append(
        f'<text x="{left + plot_w}" y="{height - 12}" text-anchor="end" fill="#555">'
        f"{escape(text(last))} {escape(unit)}</text>"
    )
    for i, (name, value) in enumerate(markers):
        x = left + (plot_w * (value - lo) / span if span else plot_w / 2)
        color_m = PALETTE[(i + 3) % len(PALETTE)]
        parts.append(
            f'<line class="marker" x1="{x:.2f}" y1="{10 + 14 * i}" x2="{x:.2f}" '
            f'y2="{top + plot_h}" stroke="{color_m}" stroke-width="2" stroke-dasharray="4 3">'
            f"<title>{escape(name)}: {escape(text(value))} {escape(unit)}</title></line>"
        )
        # labels near the right edge are drawn to the left of their line, not clipped
        anchor = 'text-anchor="end"' if x > width - right - 80 else ""
        text_x = x - 4 if anchor else x + 4
        parts.append(
            f'<text x="{text_x:.2f}" y="{14 + 14 * i}" fill="{color_m}" {anchor}>'
            f"{escape(name)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def capacity_bars(
    rows: Sequence[tuple[str, int | None, int | None]],
    *,
    chart_id: str,
    quantity: str = "memory",
    width: int = 1080,
) -> str:
    """One bar per (label, used bytes, capacity bytes or None): fill shows use of capacity.

    Without a capacity the bar is scaled against the largest figure of the chart and
    drawn hatched-grey behind, so it is not mistaken for a fraction of a budget.
    """
    label_w, value_w, row_h, top = 210, 210, 30, 8
    plot_w = width - label_w - value_w
    drawn = [r for r in rows if r[1] is not None]
    scale_ref = max([r[1] or 0 for r in drawn if r[2] is None] or [0])
    height = top * 2 + row_h * max(1, len(rows))
    parts = [
        f'<svg class="chart" data-chart="{escape(chart_id)}" data-quantity="{escape(quantity)}" '
        f'data-bars="{len(drawn)}" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="memory" {_FONT} font-size="12">'
    ]
    for i, (label, used, cap) in enumerate(rows):
        y = top + i * row_h
        parts.append(
            f'<text x="{label_w - 8}" y="{y + row_h / 2 + 4}" text-anchor="end" fill="#333">'
            f"{escape(label)}</text>"
        )
        parts.append(
            f'<rect x="{label_w}" y="{y + 5}" width="{plot_w}" height="{row_h - 10}" '
            f'fill="{"#e4e8f0" if cap else "#f6f6f6"}" rx="3"/>'
        )
        if used is None:
            parts.append(f'<text x="{label_w + 6}" y="{y + row_h / 2 + 4}" fill="#888">n/a</text>')
            continue
        if cap:
            frac = used / cap
            color = "#d73027" if frac > 0.9 else "#f0a030" if frac > 0.7 else "#3ba86b"
            text = f"{fmt_bytes(used)} of {fmt_bytes(cap)} ({frac:.1%})"
        else:
            frac = used / scale_ref if scale_ref else 0.0
            color = PALETTE[0]
            text = f"{fmt_bytes(used)} (no capacity)"
        w = max(1.0, plot_w * min(frac, 1.0)) if used > 0 else 0.0
        parts.append(
            f'<rect class="bar" data-value="{used}" x="{label_w}" y="{y + 5}" width="{w:.2f}" '
            f'height="{row_h - 10}" fill="{color}" rx="3"><title>{escape(label)}: '
            f"{escape(text)}</title></rect>"
        )
        parts.append(
            f'<text x="{label_w + plot_w + 8}" y="{y + row_h / 2 + 4}" fill="#222">'
            f"{escape(text)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class ScatterPoint:
    """One point of a scatter chart; ``shade`` in [0, 1] colours it on the chart's scale
    (None: grey, no value), ``emphasis`` draws it solid (e.g. on a Pareto front)."""

    label: str
    x: float
    y: float
    shade: float | None = None
    emphasis: bool = True
    note: str = ""
    key: str = ""


def _scale(lo: float, hi: float, log: bool) -> tuple[float, float]:
    if log:
        return math.log10(lo), math.log10(hi)
    return lo, hi


def _shade_color(shade: float | None) -> str:
    """Red (0) through amber to green (1); grey without a value."""
    if shade is None:
        return "#9aa1b0"
    s = min(1.0, max(0.0, shade))
    red = (0xD7, 0x30, 0x27)
    mid = (0xF0, 0xA0, 0x30)
    green = (0x1F, 0x8A, 0x4C)
    a, b, t = (red, mid, s * 2) if s < 0.5 else (mid, green, (s - 0.5) * 2)
    r, g, bl = (round(a[i] + (b[i] - a[i]) * t) for i in range(3))
    return f"#{r:02x}{g:02x}{bl:02x}"


def scatter_chart(
    points: Sequence[ScatterPoint],
    *,
    chart_id: str,
    quantity: str,
    x_title: str,
    y_title: str,
    x_text: Callable[[float], str],
    y_text: Callable[[float], str],
    x_limit: tuple[str, float] | None = None,
    front: bool = True,
    shade_title: str | None = None,
    width: int = 540,
    height: int = 360,
) -> str:
    """Points on two axes (log-scaled when they span more than a decade and a half).

    ``front`` joins the emphasised points in x order with a step line (a Pareto front, lower
    left is better); ``x_limit`` draws a labelled vertical line (a board's capacity).
    Every point is a ``circle.point`` with ``data-x``/``data-y`` and a ``<title>``.
    """
    left, right, top, bottom = 70, 34, 18, 46 + (16 if shade_title else 0)
    plot_w, plot_h = width - left - right, height - top - bottom
    # a limit far beyond the points (a 4 MiB flash for 30 KiB firmwares) is named at the
    # edge, not drawn: the points would be squeezed into a corner
    limit_drawn = x_limit is not None and x_limit[1] <= 10 * max((p.x for p in points), default=0)
    xs = [p.x for p in points] + ([x_limit[1]] if x_limit is not None and limit_drawn else [])
    ys = [p.y for p in points]
    parts = [
        f'<svg class="chart scatter" data-chart="{escape(chart_id)}" '
        f'data-quantity="{escape(quantity)}" data-points="{len(points)}" '
        f'viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(chart_id)}" {_FONT} font-size="11">'
    ]
    if not points:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">'
            "no cell of this target has both figures</text></svg>"
        )
        return "".join(parts)
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    x_log = x_lo > 0 and x_hi / x_lo > 30
    y_log = y_lo > 0 and y_hi / y_lo > 30
    if not x_log:
        x_lo = 0.0
    if not y_log:
        y_lo = 0.0
    if x_hi <= x_lo:
        x_hi = x_lo + 1.0
    if y_hi <= y_lo:
        y_hi = y_lo + 1.0
    (ax_lo, ax_hi), (ay_lo, ay_hi) = _scale(x_lo, x_hi, x_log), _scale(y_lo, y_hi, y_log)
    pad_x, pad_y = (ax_hi - ax_lo) * 0.06, (ay_hi - ay_lo) * 0.08
    ax_lo, ax_hi = ax_lo - (pad_x if x_log else 0), ax_hi + pad_x
    ay_lo, ay_hi = ay_lo - (pad_y if y_log else 0), ay_hi + pad_y

    def px(v: float) -> float:
        u = math.log10(v) if x_log else v
        return left + plot_w * (u - ax_lo) / (ax_hi - ax_lo)

    def py(v: float) -> float:
        u = math.log10(v) if y_log else v
        return top + plot_h - plot_h * (u - ay_lo) / (ay_hi - ay_lo)

    parts.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fbfcfe" '
        f'stroke="#d5dae3"/>'
    )
    for i in range(5):
        fx = ax_lo + (ax_hi - ax_lo) * i / 4
        fy = ay_lo + (ay_hi - ay_lo) * i / 4
        vx = 10**fx if x_log else fx
        vy = 10**fy if y_log else fy
        gx = left + plot_w * i / 4
        gy = top + plot_h - plot_h * i / 4
        parts.append(
            f'<line x1="{gx:.1f}" y1="{top}" x2="{gx:.1f}" y2="{top + plot_h}" stroke="#eceff4"/>'
            f'<text x="{gx:.1f}" y="{top + plot_h + 14}" text-anchor="middle" fill="#555">'
            f"{escape(x_text(vx) if vx > 0 or not x_log else '')}</text>"
        )
        parts.append(
            f'<line x1="{left}" y1="{gy:.1f}" x2="{left + plot_w}" y2="{gy:.1f}" stroke="#eceff4"/>'
            f'<text x="{left - 6}" y="{gy + 4:.1f}" text-anchor="end" fill="#555">'
            f"{escape(y_text(vy))}</text>"
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{top + plot_h + 32}" text-anchor="middle" '
        f'fill="#333">{escape(x_title)}{" (log)" if x_log else ""}</text>'
        f'<text x="14" y="{top + plot_h / 2}" fill="#333" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2})">{escape(y_title)}'
        f"{' (log)' if y_log else ''}</text>"
    )
    if x_limit is not None and not limit_drawn:
        parts.append(
            f'<text class="limit" data-x="{x_limit[1]!r}" x="{left + plot_w - 4}" '
            f'y="{top + 12}" text-anchor="end" fill="#c0392b">{escape(x_limit[0])} →</text>'
        )
    elif x_limit is not None:
        lx = px(x_limit[1])
        parts.append(
            f'<line class="limit" data-x="{x_limit[1]!r}" x1="{lx:.1f}" y1="{top}" x2="{lx:.1f}" '
            f'y2="{top + plot_h}" stroke="#c0392b" stroke-dasharray="5 3" stroke-width="1.5">'
            f"<title>{escape(x_limit[0])}</title></line>"
            f'<text x="{lx - 4:.1f}" y="{top + 12}" text-anchor="end" fill="#c0392b">'
            f"{escape(x_limit[0])}</text>"
        )
    on_front = sorted((p for p in points if p.emphasis), key=lambda p: (p.x, p.y))
    if front and len(on_front) > 1:
        path = [f"M{px(on_front[0].x):.1f},{py(on_front[0].y):.1f}"]
        for _, b in itertools.pairwise(on_front):
            path.append(f"H{px(b.x):.1f}V{py(b.y):.1f}")
        parts.append(
            f'<path class="front" d="{"".join(path)}" fill="none" stroke="#3b6fd8" '
            f'stroke-width="1.5" stroke-dasharray="3 2"/>'
        )
    for p in points:
        color = _shade_color(p.shade)
        solid = 'stroke="#1d2330" stroke-width="1.2"' if p.emphasis else 'fill-opacity="0.45"'
        note = f" — {p.note}" if p.note else ""
        parts.append(
            f'<circle class="point{" front" if p.emphasis else ""}" data-key="{escape(p.key)}" '
            f'data-x="{p.x!r}" data-y="{p.y!r}" cx="{px(p.x):.1f}" cy="{py(p.y):.1f}" r="6" '
            f'fill="{color}" {solid}><title>{escape(p.label)}: {escape(x_text(p.x))}, '
            f"{escape(y_text(p.y))}{escape(note)}</title></circle>"
        )
        parts.append(
            f'<text x="{px(p.x) + 8:.1f}" y="{py(p.y) - 7:.1f}" fill="#39425a" font-size="10">'
            f"{escape(_truncate(p.label, 22))}</text>"
        )
    if shade_title:
        y = height - 12
        for i in range(11):
            parts.append(
                f'<rect x="{left + i * 14}" y="{y - 9}" width="14" height="9" '
                f'fill="{_shade_color(i / 10)}"/>'
            )
        parts.append(
            f'<text x="{left + 11 * 14 + 6}" y="{y}" fill="#555">{escape(shade_title)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
