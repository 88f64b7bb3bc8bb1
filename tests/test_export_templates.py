"""Aidge's templates rendered through shared Jinja environments write the same export.

``modelexport.share_template_environments`` replaces Aidge's ``generate_str`` (which
compiles every template anew for each file) with one that keeps an environment per template
folder: exports take about half the time. The same model exported in one process with
Aidge's own function and with the shared one must give the same project, byte for byte (its
``stats/`` aside: a memory chart carrying its creation time, a graph drawing), up to the
order of the ``#include`` lines of a block, which Aidge's exporter itself varies from one
export to the next (it writes them from a set).
"""

from __future__ import annotations

from pathlib import Path

from aidge_deploy.modelexport import (
    _SHARED_RENDERER,
    ExportRequest,
    export_model,
    share_template_environments,
)


def _normalised(data: bytes) -> bytes:
    """Each run of consecutive ``#include`` lines sorted; everything else as it is."""
    lines = data.split(b"\n")
    out: list[bytes] = []
    run: list[bytes] = []
    for line in [*lines, b""]:
        if line.startswith(b"#include"):
            run.append(line)
            continue
        out += sorted(run)
        run = []
        out.append(line)
    return b"\n".join(out[:-1])


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): _normalised(p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] != "stats"
    }


def test_shared_environments_write_the_same_export(tiny_cnn: Path, tmp_path: Path) -> None:
    from aidge_core.export_utils import code_generation

    request = ExportRequest(model=tiny_cnn, target="mps2-an386", out_dir=tmp_path / "shared")
    export_model(request)  # installs the shared renderer
    shared = code_generation.generate_str
    assert shared is _SHARED_RENDERER["generate_str"]
    code_generation.generate_str = _SHARED_RENDERER["aidge"]
    try:
        export_model(ExportRequest(**{**request.__dict__, "out_dir": tmp_path / "aidge"}))
    finally:
        code_generation.generate_str = shared
    assert share_template_environments() is True
    assert _files(tmp_path / "shared") == _files(tmp_path / "aidge")
