"""No module of the distribution is on an import cycle, and no package imports one above it.

Every module of ``aidge_deploy``, ``aidge_qemu_boards`` and ``aidge_qemu_descriptors`` is a
node. Imports are read from the source with ``ast`` — every ``import`` statement, including
those under ``if TYPE_CHECKING:`` and inside functions: a deferred import hides a cycle from
the interpreter, not from the design, and the type checker follows TYPE_CHECKING imports like
any other. Modules loaded by name at run time (an entry point of a registry, a target's
``hardware_model_module``) are not edges: they are plug-ins the core looks up, not code it
depends on. A package is not an edge of its submodules either (``a.b.c`` importing runs
``a.b``'s ``__init__``, whose re-exports are its own imports, counted as such).

The packages and top-level modules of ``aidge_deploy`` are also in layers (``LAYERS``, the
order docs/architecture.md draws): a package imports only from its own layer or the layers
below. An import that runs up the layers is a design question answered by moving the thing
imported to the layer where both sides can reach it, never by a deferred import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "aidge_deploy"
#: the packages of the distribution
PACKAGES = ("aidge_deploy", "aidge_qemu_boards", "aidge_qemu_descriptors")
#: the layers of aidge_deploy's packages and top-level modules, lowest first (the order of
#: docs/architecture.md, "Layers"); a package imports from its own layer and those below
LAYERS: tuple[tuple[str, ...], ...] = (
    # vocabulary and primitives
    (
        "errors", "metrics", "progress", "cachedir", "defaults", "exportspec", "filememo",
        "pathsearch", "elf", "stats", "hwfacts", "legacy_results", "quantisation",
        "runcontrol", "cpupriority", "ownsources", "comparability", "yamlfile", "display",
        "mlperf", "exportfixes", "quantsteps", "firmwareid", "targetspec", "backendoptions",
    ),
    # services every layer uses: the extension registries' shape, tool checks, time units
    (
        "extensions", "boardspecs", "readiness", "bspcheck", "timing", "bugreport", "lab",
        "labscan", "lifecycle",
    ),
    # session facts: the config of a run, the export it deploys
    ("config", "artifact"),
    # mechanisms: programming a board, processes, SSH, serial, QEMU
    ("flash", "connections"),
    # measuring: counters and binaries, output parsers, power
    ("profiling", "protocols", "power"),
    # the outcome of a run, and what a target is
    ("results", "registry", "targetcaps"),
    # the targets' mechanics: builds, boards
    ("buildsys", "boards"),
    # result bundles and reports
    ("report",),
    # a model's export: its request, inputs and fit in the target's memory
    ("modelexport", "modelfit", "modelinputs"),
    # one run: the config check, the pipeline, deploy()
    ("configcheck", "pipeline", "api"),
    # what is built on deploy(): exports, listings, several runs, the results history
    (
        "exportcache", "catalog", "checkup", "docs", "benchmark_api", "benchmark_backends", "benchmark_targets", "multitarget", "validation",
        "history",
    ),
    # the plug-in for pytest, the board farm, campaigns, profiling a model, the MCP server
    ("testing", "farm", "campaign", "modelprofile", "mcpserver"),
    # the command line
    ("cli",),
)  # fmt: skip


def _modules(src: Path, package: str | tuple[str, ...]) -> dict[str, Path]:
    modules = {}
    packages = (package,) if isinstance(package, str) else package
    for path in sorted(p for name in packages for p in (src / name).rglob("*.py")):
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


def import_graph(
    src: Path, package: str | tuple[str, ...], collapse: Iterable[str] = ()
) -> dict[str, set[str]]:
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


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_graph_holds_every_module_of_the_distribution() -> None:
    """Every file is a node, and every module the interpreter finds is one of them."""
    import pkgutil

    graph = import_graph(SRC, PACKAGES)
    walked = set(PACKAGES)
    for name in PACKAGES:
        package = __import__(name)
        walked |= {m.name for m in pkgutil.walk_packages(package.__path__, f"{name}.")}
    assert set(graph) == walked
    assert len(graph) > 200


def test_no_module_is_on_an_import_cycle() -> None:
    graph = import_graph(SRC, PACKAGES)
    found = {
        component[0]: " -> ".join(cycle_through(graph, component[0]) or component)
        for component in cycles(graph)
    }
    assert found == {}


def package_graph(src: Path, package: str) -> dict[str, set[str]]:
    """``top-level package or module -> those it imports`` (``profiling``, ``config``...)."""
    tops = {name.split(".")[1] for name in _modules(src, package) if name != package}
    graph = import_graph(src, package, collapse=[f"{package}.{top}" for top in sorted(tops)])
    graph.pop(package, None)
    return {
        name.removeprefix(f"{package}."): {
            t.removeprefix(f"{package}.") for t in targets if t != package
        }
        for name, targets in graph.items()
    }


def upward_imports(graph: Mapping[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every ``a -> b`` where ``b`` is in a higher layer than ``a``, and every package that
    is in no layer (a new package is placed, not left out)."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    found = [f"{name} is in no layer" for name in sorted(graph) if name not in rank]
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if name in rank and target in rank and rank[target] > rank[name]:
                found.append(f"{name} (layer {rank[name]}) -> {target} (layer {rank[target]})")
    return found


def test_no_package_imports_one_above_it() -> None:
    graph = package_graph(SRC, PACKAGE)
    assert upward_imports(graph, LAYERS) == []
    assert cycles(graph) == []  # nor one of its own layer that imports it back
    # every layer names only what exists (a package moved or renamed is moved here too)
    assert {name for layer in LAYERS for name in layer} == set(graph)


def test_the_order_test_catches_an_upward_import(tmp_path: Path) -> None:
    """The fixture: a low package that imports a high one, even inside a function."""
    sources = {
        "__init__.py": "",
        "low.py": "def f():\n    from pkg.high.mod import g\n",
        "high/__init__.py": "",
        "high/mod.py": "from pkg import low\n",
        "side.py": "from pkg.low import f\n",
    }
    for name, text in sources.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = package_graph(tmp_path, "pkg")
    assert graph == {"low": {"high"}, "high": {"low"}, "side": {"low"}}
    assert upward_imports(graph, (("low", "side"), ("high",))) == [
        "low (layer 0) -> high (layer 1)"
    ]
    assert upward_imports(graph, (("low",), ("high",)))[0] == "side is in no layer"
    graph["low"].clear()  # the import moved to where both sides reach it
    assert upward_imports(graph, (("low", "side"), ("high",))) == []


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
    assert bool(cycles(graph)) is (cycle is not None)


def test_the_architecture_page_draws_these_layers() -> None:
    """docs/architecture.md's "Import order" table is this test's ``LAYERS``, row by row."""
    import re

    page = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Import order", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    drawn = [tuple(re.findall(r"`(\w+)`", row.split("|")[2])) for row in rows]
    assert drawn == [tuple(layer) for layer in LAYERS]
