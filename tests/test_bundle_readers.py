"""One reader of result bundles (issue 30): no module opens a bundle's JSON documents but
``report.reader`` (and the code that writes or rewrites a bundle of the current version).

What is checked, with ``ast``: a string ``summary.json`` / ``run_metadata.json`` /
``manifest.json`` (outside docstrings), or the names ``SUMMARY_NAME`` / ``METADATA_NAME``,
anywhere else in ``src``. A reader of its own would read one version by key and break on the
next; the typed reader reads them all.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "aidge_deploy"
FILES = {"summary.json", "run_metadata.json", "manifest.json"}
NAMES = {"SUMMARY_NAME", "METADATA_NAME"}
#: the reader, the writer, the manifest's own verifier, and ``power analyse --into`` (which
#: rewrites a current bundle through the reader's document views)
ALLOWED = {
    "report/reader.py",
    "report/bundle.py",
    "report/manifest.py",
    "report/power_into.py",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def readers_of_bundle_files() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docs and node.value in FILES:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Name) and node.id in NAMES:
                found.append(f"{rel}:{node.lineno}: {node.id}")
    return found


def test_no_module_reads_a_bundle_document_but_the_reader() -> None:
    assert readers_of_bundle_files() == []
