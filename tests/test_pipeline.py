"""The pipeline's contracts: flat stage list, narrowing accessors, typed errors, progress."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from aidge_core.export_utils import ExportArtifact, ExportManifest

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import BuildError, InternalError, PipelineError
from aidge_deploy.pipeline.context import PRODUCERS, PipelineContext
from aidge_deploy.pipeline.default import build_default_pipeline
from aidge_deploy.pipeline.runner import PipelineRunner
from aidge_deploy.progress import ProgressKind, ProgressUpdate

SRC = Path(__file__).resolve().parents[1] / "src"
STAGES = SRC / "aidge_deploy" / "pipeline" / "stages"


def _ctx(tmp_path: Path) -> PipelineContext:
    manifest = ExportManifest(
        target="host",
        execution_domain="linux",
        environment="linux",
        build_system="cmake",
        application="benchmark",
        expected_artifact="build/run_export",
        protocol="aidge-stdout-benchmark/v1",
    )
    return PipelineContext(DeployConfig(), ExportArtifact(tmp_path, manifest), tmp_path)


def test_no_assert_narrowing_of_context_fields_in_src() -> None:
    fields = "|".join(PRODUCERS)
    ctx_assert = re.compile(rf"assert\s+(?:self\.)?ctx\.({fields})\s+is\s+not\s+None")
    self_assert = re.compile(rf"assert\s+self\.({fields})\s+is\s+not\s+None")
    offenders = []
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        offenders += [f"{path}: {m.group(0)}" for m in ctx_assert.finditer(text)]
        if path.name == "context.py":
            offenders += [f"{path}: {m.group(0)}" for m in self_assert.finditer(text)]
    assert not offenders, offenders


def test_the_guard_itself_catches_an_assert() -> None:
    fields = "|".join(PRODUCERS)
    assert re.search(
        rf"assert\s+(?:self\.)?ctx\.({fields})\s+is\s+not\s+None",
        "    assert ctx.build_result is not None",
    )


def test_every_producer_stage_writes_its_field() -> None:
    stage_sources = {p.stem: p.read_text() for p in STAGES.glob("*.py")}
    names = {
        type(s).__name__.removesuffix("Stage"): type(s).__module__.rsplit(".", 1)[-1]
        for s in build_default_pipeline().stages
    }
    for field, producer in PRODUCERS.items():
        assert producer in names, f"{producer} is not in the default pipeline"
        assert re.search(rf"ctx\.{field}\s*=", stage_sources[names[producer]]), (
            f"{producer} never sets ctx.{field}"
        )


@pytest.mark.parametrize(
    "accessor,field",
    [
        ("resolved_target", "target"),
        ("built", "build_result"),
        ("executed", "execution"),
        ("parsed_output", "parsed"),
        ("deploy_result", "result"),
        ("prepared_context", "deploy_context"),
    ],
)
def test_accessor_names_field_and_producer(tmp_path: Path, accessor: str, field: str) -> None:
    with pytest.raises(PipelineError) as info:
        getattr(_ctx(tmp_path), accessor)
    assert f"ctx.{field}" in info.value.message and PRODUCERS[field] in info.value.message


class _Boom:
    name = "Boom"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        raise self.exc


class _Skipped:
    name = "Skipped"

    def should_skip(self, ctx: PipelineContext) -> bool:
        return True

    def run(self, ctx: PipelineContext) -> None:  # pragma: no cover - must not run
        raise AssertionError("ran a skipped stage")


@pytest.mark.internal_error
def test_unexpected_exception_is_an_internal_error_with_its_traceback_kept(tmp_path: Path) -> None:
    with pytest.raises(InternalError) as info:
        PipelineRunner([_Skipped(), _Boom(ZeroDivisionError("x"))]).run(_ctx(tmp_path))
    assert info.value.stage == "Boom" and "Boom" in info.value.message
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert "report it" in (info.value.hint or "")
    assert info.value.log_path is not None
    kept = info.value.log_path.read_text()
    assert "Traceback" in kept and "ZeroDivisionError: x" in kept and "stage Boom" in kept


def test_typed_error_passes_through_with_stage(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as info:
        PipelineRunner([_Boom(BuildError("nope", hint="fix"))]).run(_ctx(tmp_path))
    assert info.value.stage == "Boom" and info.value.hint == "fix"


def test_progress_events_and_durations(tmp_path: Path) -> None:
    events: list[ProgressUpdate] = []
    ctx = _ctx(tmp_path)
    ctx.progress = events.append

    class _Ok:
        name = "Ok"

        def should_skip(self, ctx: PipelineContext) -> bool:
            return False

        def run(self, ctx: PipelineContext) -> None:
            ctx.report(self.name, ProgressKind.STATUS, "working")

    PipelineRunner([_Skipped(), _Ok()]).run(ctx)
    assert [(e.stage, e.kind) for e in events] == [
        ("Skipped", ProgressKind.SKIP),
        ("Ok", ProgressKind.START),
        ("Ok", ProgressKind.STATUS),
        ("Ok", ProgressKind.DONE),
    ]
    assert "Ok" in ctx.stage_durations_ms


def test_default_pipeline_is_flat_and_ordered() -> None:
    names = [s.name for s in build_default_pipeline().stages]
    assert names[:5] == ["Preflight", "ResolveTarget", "EnsureBoardPowered", "Prepare", "Build"]
    assert (
        names.index("InspectBinary")
        < names.index("Flash")
        < names.index("Execute")
        < names.index("ParseOutput")
    )
    # the seed's power stages: after the profile phase (its clean timing plans N)
    power = [
        "PlanPowerRun",
        "BuildPowerFirmware",
        "FlashPowerFirmware",
        "CapturePower",
        "CollectPowerTerminal",
    ]
    start = names.index("PlanPowerRun")
    assert names[start : start + 5] == power
    assert names.index("ProfilePasses") < start < names.index("Assemble")


def test_probe_board_without_serial_port_fails_in_preflight(tmp_path: Path) -> None:
    """A physical board needs its UART: said before anything is built (no probe needed)."""
    import json

    import aidge_deploy
    from aidge_deploy.errors import ConfigError

    manifest = {
        "schema_version": 1,
        "target": "stm32h7a3",
        "execution_domain": "baremetal",
        "environment": "baremetal",
        "build_system": "make",
        "application": "benchmark",
        "expected_artifact": "bin/*.elf",
        "protocol": "aidge-uart-benchmark/v1",
    }
    (tmp_path / ".aidge-export.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError) as info:
        aidge_deploy.deploy(tmp_path, DeployConfig(), work_dir=tmp_path / "run")
    assert info.value.stage == "Preflight" and "--serial-port" in (info.value.hint or "")
