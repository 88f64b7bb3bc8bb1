"""The core modules import each other without cycles.

``results``, ``registry``, ``artifact``, ``buildsys`` and the ``pipeline`` package (taken as one
node) must not sit on any import cycle of ``aidge_deploy``. Imports are read from the source with
``ast`` — every ``import`` statement, including those under ``if TYPE_CHECKING:`` and inside
functions: a deferred import hides a cycle from the interpreter, not from the design, and the
type checker follows TYPE_CHECKING imports like any other. Modules loaded by name at run time
(``importlib.import_module`` of the target registry) are not edges: they are plug-ins the core
looks up, not code it depends on.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "aidge_deploy"
CORE = (
    "aidge_deploy.results",
    "aidge_deploy.registry",
    "aidge_deploy.artifact",
    "aidge_deploy.buildsys",
    "aidge_deploy.pipeline",
)


def _modules(src: Path, package: str) -> dict[str, Path]:
    modules = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imported(module: str, path: Path, known: Iterable[str]) -> set[str]:
    """The package modules ``module`` imports (a ``from pkg import name`` of a submodule
    counts as importing that submodule)."""
    known = set(known)

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (owner(alias.name) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                target = owner(f"{source}.{alias.name}") or owner(source)
                if target:
                    found.add(target)
    found.discard(module)
    return found


def import_graph(src: Path, package: str, collapse: Iterable[str] = ()) -> dict[str, set[str]]:
    """``module -> modules it imports``, every package in ``collapse`` taken as one node."""
    collapse = tuple(collapse)

    def node(name: str) -> str:
        return next((c for c in collapse if name == c or name.startswith(c + ".")), name)

    modules = _modules(src, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(node(name), set())
        edges.update(node(target) for target in _imported(name, path, modules))
    for name, edges in graph.items():
        edges.discard(name)
    return graph


def cycle_through(graph: Mapping[str, set[str]], start: str) -> list[str] | None:
    """The shortest import chain from ``start`` back to itself, or None."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for name in frontier:
            for target in sorted(graph.get(name, ())):
                if target == start:
                    return [*paths[name], start]
                if target not in paths:
                    paths[target] = [*paths[name], target]
                    following.append(target)
        frontier = following
    return None


def test_core_modules_are_on_no_import_cycle() -> None:
    graph = import_graph(SRC, PACKAGE, collapse=["aidge_deploy.pipeline"])
    assert set(CORE) <= set(graph)
    cycles = {core: cycle_through(graph, core) for core in CORE}
    assert {core: " -> ".join(chain) for core, chain in cycles.items() if chain} == {}


def test_the_leaf_modules_import_nothing_of_the_package() -> None:
    """What the core shares (progress events, metrics, the cache root) sits below all of it."""
    graph = import_graph(SRC, PACKAGE)
    for leaf in ("aidge_deploy.progress", "aidge_deploy.metrics", "aidge_deploy.cachedir"):
        assert graph[leaf] == set(), leaf


@pytest.mark.parametrize(
    ("sources", "cycle"),
    [
        # a TYPE_CHECKING import closes a cycle as much as a plain one
        (
            {
                "a.py": "from pkg import b\n",
                "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import X\n",
                "c.py": "def f():\n    from pkg.a import g\n",
            },
            ["pkg.a", "pkg.b", "pkg.c", "pkg.a"],
        ),
        # relative imports and a collapsed subpackage
        (
            {
                "a.py": "from .sub.inner import x\n",
                "sub/__init__.py": "",
                "sub/inner.py": "from ..a import y\n",
            },
            ["pkg.a", "pkg.sub", "pkg.a"],
        ),
        ({"a.py": "import pkg.b\n", "b.py": "import os\n"}, None),
    ],
)
def test_the_graph_sees_every_kind_of_import(
    tmp_path: Path, sources: dict[str, str], cycle: list[str] | None
) -> None:
    for name, text in {"__init__.py": "", **sources}.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = import_graph(tmp_path, "pkg", collapse=["pkg.sub"])
    assert cycle_through(graph, "pkg.a") == cycle
