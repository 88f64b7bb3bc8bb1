"""The history as one offline HTML page: a chart per figure across commits, steps marked.

Self-contained (inline SVG and CSS, no script, nothing fetched): it opens from a CI
artifact or a mail attachment. Each identity gets a section; each of its figures a line
chart whose points are its records in order, labelled with their commit, and where the
series stepped (``series``) the point is red and labelled. Test hooks: every chart is an
``svg[data-chart]`` naming identity and figure, with ``data-steps`` (the stepped commits);
every point a ``circle.point`` with ``data-commit`` and ``data-value``, ``.step`` if it
stepped.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from aidge_deploy.history.series import Series, all_series
from aidge_deploy.history.store import HistoryRecord
from aidge_deploy.report.svg import fmt_number

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
.meta { color: #5b6478; }
.chart { margin: 8px 0 18px; }
.chart h3 { font-size: 14px; margin: 0 0 4px; font-weight: 600; }
.legend span { display: inline-block; margin-right: 14px; }
.dot { display: inline-block; width: 9px; height: 9px; border-radius: 50%; }
"""
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 960, 210, 100, 20, 16, 46
LINE = "#2f6db5"
STEP = "#c0392b"


def _label(record: HistoryRecord) -> str:
    return record.vcs.short or time.strftime("%m-%d %H:%M", time.gmtime(record.recorded_at))


def chart_svg(series: Series) -> str:
    """One series as an inline SVG line chart."""
    points = [(i, v) for i, v in enumerate(series.values) if v is not None]
    values = [v for _, v in points]
    low, high = min(values), max(values)
    if high == low:
        pad = abs(high) * 0.05 or 1.0
        low, high = low - pad, high + pad
    else:
        pad = (high - low) * 0.1
        low, high = low - pad, high + pad
    count = max(1, len(series.values) - 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + plot_w * (i / count if len(series.values) > 1 else 0.5)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - low) / (high - low))

    stepped = series.stepped_ids
    step_commits = [_label(r) for r in series.records if r.id in stepped]
    e = html.escape
    parts = [
        f'<svg class="series" data-chart="{e(series.identity.key)}::{e(series.metric)}" '
        f'data-points="{len(points)}" data-steps="{e(",".join(step_commits))}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'aria-label="{e(series.metric)} ({e(series.unit)}) across commits" font-size="11">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#f7f8fb"/>',
    ]
    for frac in (0.0, 0.5, 1.0):
        v = low + (high - low) * frac
        parts.append(
            f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#5b6478">'
            f"{e(fmt_number(v))}</text>"
        )
    if len(points) > 1:
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{LINE}" stroke-width="1.5"/>')
    every = max(1, len(series.values) // 16)
    for i, record in enumerate(series.records):
        label = _label(record)
        if i % every == 0 or record.id in stepped:
            parts.append(
                f'<text x="{x(i):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                f'fill="{STEP if record.id in stepped else "#5b6478"}">{e(label)}</text>'
            )
        value = series.values[i]
        if value is None:
            continue
        step = record.id in stepped
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.recorded_at))
        parts.append(
            f'<circle class="point{" step" if step else ""}" data-commit="{e(label)}" '
            f'data-value="{value!r}" cx="{x(i):.1f}" cy="{y(value):.1f}" r="{5 if step else 3}" '
            f'fill="{STEP if step else LINE}"><title>{e(label)} ({e(when)}'
            f"{', ' + e(record.vcs.branch) if record.vcs.branch else ''}): "
            f"{e(fmt_number(value))} {e(series.unit)}</title></circle>"
        )
        if step:
            parts.append(
                f'<text x="{x(i):.1f}" y="{y(value) - 9:.1f}" text-anchor="middle" '
                f'fill="{STEP}" font-weight="600">step</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def render_history_html(records: Sequence[HistoryRecord], *, title: str = "") -> str:
    """The page of ``records`` (see the module docstring)."""
    e = html.escape
    series = all_series(records)
    sections: dict[str, list[str]] = {}
    for s in series:
        steps = ", ".join(
            f"{st.describe()} at {next(_label(r) for r in s.records if r.id == st.record_id)}"
            for st in s.steps
        )
        sections.setdefault(s.identity.describe(), []).append(
            f'<div class="chart"><h3>{e(s.metric)} <span class="meta">({e(s.unit)}, '
            f"{e(s.provenance)})</span>"
            + (f' <span style="color:{STEP}">— stepped: {e(steps)}</span>' if steps else "")
            + f"</h3>{chart_svg(s)}</div>"
        )
    commits = len({r.vcs.commit for r in records if r.vcs.commit})
    body = [
        f"<h1>{e(title or 'aidge-deploy results history')}</h1>",
        f'<p class="meta">{len(records)} runs, {commits} commits, {len(sections)} '
        f"{'identity' if len(sections) == 1 else 'identities'} (test or name, target, kind). "
        "Exact figures (emulated, static, estimated) step at any change; host and silicon "
        "times when they leave the noise band of their last 10 results (median ± 3 robust σ)."
        "</p>",
        '<p class="legend"><span><i class="dot" style="background:#2f6db5"></i> a run</span>'
        '<span><i class="dot" style="background:#c0392b"></i> the series stepped</span></p>',
    ]
    for name, charts in sections.items():
        body.append(f"<h2>{e(name)}</h2>")
        body.extend(charts)
    if not sections:
        body.append("<p>No recorded run matches.</p>")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{e(title or 'results history')}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )
