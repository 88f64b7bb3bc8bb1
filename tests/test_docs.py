"""The reference pages in docs/ are the registries' rendering: they must not drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from aidge_deploy.docs import PAGES, render_all

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_generated_page_is_up_to_date(name: str) -> None:
    assert (DOCS / name).read_text(encoding="utf-8") == render_all()[name], (
        f"docs/{name} is stale: run `aidge-deploy docs --write docs`"
    )
