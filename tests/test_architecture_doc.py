"""docs/architecture.md names only what exists, and the README leads to it (not outside).

Every dotted name of the distribution's packages in the page is a module, or a module and a
name it defines at its top level; every file path it names is in the repository. The README
links the page and no file beside the clone.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from aidge_deploy.extensions import GROUPS

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PAGE = ROOT / "docs" / "architecture.md"
PACKAGES = ("aidge_deploy", "aidge_qemu_boards", "aidge_qemu_descriptors")
_DOTTED = re.compile(rf"\b(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+")
_PATH = re.compile(r"`((?:tests|docs|src|benchmarks|scripts)/[\w./-]+|pyproject\.toml)`")


def _module_file(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def resolves(dotted: str) -> bool:
    """A module, or a module and one name defined at its top level."""
    if _module_file(dotted) is not None:
        return True
    module, _, attribute = dotted.rpartition(".")
    path = _module_file(module)
    return path is not None and attribute in _top_level_names(path)


def test_every_module_the_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    named = set(_DOTTED.findall(text)) - set(GROUPS.values())  # entry-point groups
    assert len(named) > 40, "the page names the modules it describes"
    assert sorted(n for n in named if not resolves(n)) == []


def test_every_file_the_page_names_exists() -> None:
    paths = _PATH.findall(PAGE.read_text(encoding="utf-8"))
    assert paths
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def test_the_resolver_refuses_what_does_not_exist() -> None:
    assert resolves("aidge_deploy.registry.register_deploy_target")
    assert resolves("aidge_deploy.pipeline.stages")
    assert not resolves("aidge_deploy.registry.no_such_name")
    assert not resolves("aidge_deploy.no_such_module")


def test_the_readme_links_the_page_and_nothing_outside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/architecture.md" in readme
    assert "../" not in readme, "the README must not point outside the repository"
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if not target.startswith(("http://", "https://", "mailto:")):
            assert (ROOT / target).exists(), target
