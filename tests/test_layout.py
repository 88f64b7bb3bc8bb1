"""Guard of the design rule "one concern per module; a module past ~600 lines is asking to be
split": the suite fails as soon as a Python module under ``src/`` grows past the limit, naming
every offender, so a split happens when the module grows, not months later."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
#: the ~600-line guideline plus a margin, so a small fix does not force a split mid-change
MAX_MODULE_LINES = 650


def module_line_counts(root: Path) -> dict[Path, int]:
    """Line count (as ``wc -l`` reports for newline-terminated files) of every ``.py`` file."""
    return {
        path.relative_to(root): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }


def test_line_counting_matches_wc(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n\ny = 2\n", encoding="utf-8")
    (tmp_path / "pkg" / "notes.txt").write_text("not a module\n" * 900, encoding="utf-8")
    assert module_line_counts(tmp_path) == {Path("pkg/a.py"): 3}


def test_no_module_exceeds_the_line_limit() -> None:
    counts = module_line_counts(SRC)
    # an empty scan (src moved, wrong root) must not pass silently
    assert any(part.parts[0] == "aidge_deploy" for part in counts), f"no modules under {SRC}"
    offenders = sorted(
        ((lines, path) for path, lines in counts.items() if lines > MAX_MODULE_LINES),
        reverse=True,
    )
    assert not offenders, (
        f"{len(offenders)} module(s) under src/ exceed {MAX_MODULE_LINES} lines; split them "
        "along their concerns (DESIGN.md: one concern per module): "
        + ", ".join(f"{path} ({lines} lines)" for lines, path in offenders)
    )
