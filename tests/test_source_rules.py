"""Rules on the source itself (issue 30), checked on its syntax tree so that a new violation
fails here with its file and line: results are read through typed accessors, and the
untyped ``DeployResult.metrics`` dict only in its compatibility view."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "aidge_deploy"

#: the module that is the compatibility view of ``DeployResult.metrics``: the result
#: itself, with its typed accessors
METRICS_VIEW = {"results.py"}


def _sources() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(SRC).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(SRC.rglob("*.py"))
    ]


def metrics_subscripts(tree: ast.Module) -> list[int]:
    """Lines where ``<something>.metrics[...]`` is read (not ``scan.metrics[0]``, a list
    index on a parser's scan: only string keys are the result's dict)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "metrics"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ]


def test_no_metrics_dict_reads_outside_the_compatibility_view() -> None:
    found = [
        f"{name}:{line}"
        for name, tree in _sources()
        if name not in METRICS_VIEW
        for line in metrics_subscripts(tree)
    ]
    assert found == [], f"read DeployResult's typed accessors instead: {found}"


def test_the_rule_sees_a_metrics_read() -> None:
    tree = ast.parse('prov = result.metrics["provenance"]\nfirst = scan.metrics[0]\n')
    assert metrics_subscripts(tree) == [1]
