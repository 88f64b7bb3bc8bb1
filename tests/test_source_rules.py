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


#: the capability mixins of a deploy target: asked through its caps (``targetcaps``)
CAPABILITY_MIXINS = {
    "CounterCapableTarget",
    "PowerCapableTarget",
    "RepeatedRunPower",
    "TransferableTarget",
    "FlashableTarget",
    "RemoteBuildTarget",
    "RemoteBackend",
}
#: the board kinds' and backends' names: compared only where they are declared
BOARD_WORDS = {"host", "local", "ssh", "ssh_docker", "api", "linux-board", "emulated-mcu", "mcu"}
#: the registry modules: where a target's capabilities are derived from its classes and names
REGISTRY_MODULES = {"registry.py", "targetcaps.py", "targetspec.py", "boardspecs.py"}


def _names(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {n for e in node.elts for n in _names(e)}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _strings(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {s for e in node.elts for s in _strings(e)}
    return set()


def capability_tests(tree: ast.Module) -> list[int]:
    """Lines that test a target's class against a capability mixin (``isinstance``,
    ``issubclass``) or compare a value with a board kind's or backend's name (``==``,
    ``!=``, ``in``, ``not in``, ``is``)."""
    found = []
    for node in ast.walk(tree):
        mixin = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and bool(_names(node.args[1]) & CAPABILITY_MIXINS)
        )
        name = isinstance(node, ast.Compare) and any(
            _strings(side) & BOARD_WORDS for side in (node.left, *node.comparators)
        )
        if mixin or name:
            found.append(node.lineno)
    return sorted(found)


def test_no_capability_tested_by_class_or_name_outside_the_registry() -> None:
    found = [
        f"{name}:{line}"
        for name, tree in _sources()
        if name not in REGISTRY_MODULES
        for line in capability_tests(tree)
    ]
    assert found == [], f"ask the target's caps (aidge_deploy.targetcaps) instead: {found}"


def test_the_rule_sees_a_capability_test() -> None:
    tree = ast.parse(
        "a = isinstance(target, PowerCapableTarget)\n"
        "b = issubclass(cls, (DeployTarget, registry.FlashableTarget))\n"
        'c = config.backend_kind in ("ssh", "ssh_docker")\n'
        'd = target == "host"\n'
        'e = "api" != backend\n'
        "f = isinstance(target, DeployTarget)\n"
        'g = kind == "energy"\n'
        "h = caps.over_ssh\n"
    )
    assert capability_tests(tree) == [1, 2, 3, 4, 5]
