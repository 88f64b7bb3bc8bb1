"""A bug is an ``InternalError``: exit 3, "report it", its traceback kept in a log file.

A user error exits 2 (or the command's own code) and never 3: ``conftest`` fails any test
that ends in an internal error unless it is marked ``internal_error`` (as these are), so
every user-error test of the suite is also a check that the error is not classed a bug.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app, run_cli
from aidge_deploy.errors import InternalError, PipelineError

SRC = Path(__file__).resolve().parents[1] / "src"
runner = CliRunner()


def flat(text: str) -> str:
    return " ".join(text.split())


def test_no_user_error_type_tells_the_user_it_is_a_bug() -> None:
    """Every error raised with a hint about a bug is an ``InternalError`` (a ``ConfigError``
    saying "This is a bug." exited 2, as if the user had made a mistake)."""
    internal = {"InternalError", "PipelineError"}
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None) or ""
            if not name.endswith("Error") or name in internal:
                continue
            texts = [
                n.value
                for arg in [*node.args, *(k.value for k in node.keywords)]
                for n in ast.walk(arg)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            if any("a bug" in text.lower() for text in texts):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} {name}")
    assert offenders == []
    assert issubclass(PipelineError, InternalError)


@pytest.mark.slow
@pytest.mark.internal_error
def test_a_bug_in_a_stage_exits_3_says_report_it_and_keeps_the_traceback(
    export_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aidge_deploy.pipeline.stages import parse_output

    def broken(self: object, ctx: object) -> None:
        raise KeyError("no such field")

    monkeypatch.setattr(parse_output.ParseOutputStage, "run", broken)
    res = runner.invoke(app, ["run", str(export_factory("benchmark").path)])
    out = flat(res.output)
    assert res.exit_code == 3, out
    assert "Unexpected error in stage ParseOutput" in out and "report it" in out
    assert "Traceback" not in res.output
    log = Path(out.split("Log: ", 1)[1].split(" ", 1)[0])
    kept = log.read_text()
    assert "Traceback" in kept and "KeyError: 'no such field'" in kept and "in broken" in kept


@pytest.mark.internal_error
def test_an_exception_outside_any_stage_exits_3_with_its_traceback_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import aidge_deploy.cli.listing as listing

    def broken() -> None:
        raise RuntimeError("the table fell over")

    monkeypatch.setattr(listing, "print_targets", broken)
    monkeypatch.setattr(sys, "argv", ["aidge-deploy", "targets"])
    with pytest.raises(SystemExit) as info:
        run_cli()
    assert info.value.code == 3
    err = flat(capsys.readouterr().err)
    assert "Internal error: RuntimeError: the table fell over" in err and "report it" in err
    log = Path(err.split("Log: ", 1)[1].split(" ", 1)[0])
    assert "raise RuntimeError" in log.read_text()


@pytest.mark.parametrize(
    ("remote_type", "internal"),
    [("InternalError", True), ("PipelineError", True), ("BuildError", False), (None, False)],
)
def test_a_bug_on_a_farm_board_is_an_internal_error_here_too(
    remote_type: str | None, internal: bool
) -> None:
    """The farm's board host reports its error's type; a bug there (exit 3 there) is a bug
    here, exit 3, while a build failure stays the user's error (exit 2)."""
    from types import SimpleNamespace

    from aidge_deploy.errors import FarmJobFailed
    from aidge_deploy.farm.models import JobError, JobUrls, JobView
    from aidge_deploy.farm.remote import _FarmRun
    from aidge_deploy.farm.states import JobState

    urls = JobUrls(self="/j/7", events="/j/7/e", log="/j/7/log", result="/j/7/r", bundle="/j/7/b")
    error = None if remote_type is None else JobError(message="it broke", type=remote_type)
    view = JobView(id=7, state=JobState.FAILED, export="e", target="host", urls=urls, error=error)
    with pytest.raises(FarmJobFailed) as info:
        _FarmRun._raise_if_failed(None, view, None, SimpleNamespace(root="http://farm"))  # type: ignore[arg-type]
    assert isinstance(info.value, InternalError) is internal
    assert info.value.job_id == 7 and "http://farm/j/7/log" in (info.value.hint or "")
