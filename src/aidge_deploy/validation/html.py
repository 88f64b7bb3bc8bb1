"""The validation matrix as a self-contained HTML page (linking each target's run bundle)."""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _num(value: Any, fmt: str = ".3g") -> str:
    return "—" if value is None else format(value, fmt)


def render_validation_html(doc: Mapping[str, Any], out_dir: Path) -> str:
    e = html.escape
    verdict = "PASS" if doc["passed"] else "FAIL"
    rows = []
    for cell in doc["matrix"]:
        bundle = doc["bundles"].get(cell["target"])
        link = (
            f' <a href="{e(os.path.relpath(Path(bundle) / "report.html", out_dir))}">report</a>'
            if bundle
            else ""
        )
        rows.append(
            f'<tr class="{"ok" if cell["passed"] else "bad"}"><td>{e(cell["target"])}{link}</td>'
            f"<td>{e(cell['output'])}</td><td>{_num(cell['max_abs_error'])}</td>"
            f"<td>{_num(cell['max_rel_error'])}</td><td>{_num(cell['cosine_similarity'], '.6f')}</td>"
            f"<td>{_num(cell['top1_agreement'], '.0%')}</td><td>{e(cell['tolerance'])}</td>"
            f"<td>{'pass' if cell['passed'] else 'FAIL'}</td><td>{e(cell['worst'])}</td></tr>"
        )
    errors = "".join(f"<li><b>{e(t)}</b>: {e(m)}</li>" for t, m in doc["errors"].items())
    accuracy = "".join(
        f"<tr><td>{e(a['target'])}</td><td>{_num(a['accuracy'], '.1%')}</td>"
        f"<td>{a['samples']}</td><td>{e(a['unavailable_reason'] or '')}</td></tr>"
        for a in doc["accuracy"]
    )
    acc_block = (
        f"<h2>Accuracy on target</h2><p>Reference ({e(doc['reference'])}): "
        f"{_num(doc['reference_accuracy'], '.1%')}</p><table><tr><th>target</th>"
        f"<th>accuracy</th><th>samples</th><th>note</th></tr>{accuracy}</table>"
        if doc["accuracy"]
        else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Validation of {e(Path(doc["model"]).name)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}tr.bad{{background:#fdd}}
tr.ok{{background:#efe}}</style></head><body>
<h1>Validation of {e(Path(doc["model"]).name)} ({e(doc["dtype"])}): {verdict}</h1>
<p>{doc["inputs"]} input(s); reference: {e(doc["reference"])}. Relative error is the maximum
absolute error over the largest |reference| value of the output; int8 outputs are read as
integer &times; quantisation step.</p>
<table><tr><th>target</th><th>output</th><th>max abs error</th><th>max rel error</th>
<th>cosine</th><th>top-1 agreement</th><th>tolerance</th><th>verdict</th><th>worst value</th></tr>
{"".join(rows)}</table>
{f"<h2>Targets that did not run</h2><ul>{errors}</ul>" if errors else ""}
{acc_block}
</body></html>
"""
