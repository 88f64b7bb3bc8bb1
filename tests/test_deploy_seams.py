"""``deploy()``'s seams: a pipeline of the caller's (``pipeline=``), the target resolved
once per run, the config check in a module of its own (``aidge_deploy.configcheck``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aidge_deploy
from aidge_deploy.boards.host.local import HostLocalTarget
from aidge_deploy.errors import ConfigError
from aidge_deploy.pipeline.context import PipelineContext
from aidge_deploy.pipeline.default import build_default_pipeline
from aidge_deploy.pipeline.runner import PipelineRunner

pytestmark = pytest.mark.slow


class _Seen:
    """A stage of the caller's: records the built artifact it sees."""

    name = "Seen"

    def __init__(self) -> None:
        self.artifacts: list[Path] = []

    def should_skip(self, ctx: PipelineContext) -> bool:
        return False

    def run(self, ctx: PipelineContext) -> None:
        self.artifacts.append(ctx.built.artifact_path)


def _with(stage: object, after: str) -> list[object]:
    stages: list[object] = list(build_default_pipeline().stages)
    index = next(i for i, s in enumerate(stages) if s.name == after)
    return [*stages[: index + 1], stage, *stages[index + 1 :]]


def test_a_stage_of_the_callers_runs_in_the_pipeline(export_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark")
    seen = _Seen()
    result = aidge_deploy.deploy(
        artifact, aidge_deploy.DeployConfig(target="host"), pipeline=_with(seen, "Build")
    )
    assert seen.artifacts == [result.build.artifact_path]
    assert result.timings
    # a runner works as well as a list of its stages
    again = _Seen()
    aidge_deploy.deploy(artifact, pipeline=PipelineRunner(_with(again, "InspectBinary")))  # type: ignore[arg-type]
    assert again.artifacts == seen.artifacts


@pytest.mark.internal_error
def test_a_pipeline_without_its_producer_names_it(export_factory) -> None:  # type: ignore[no-untyped-def]
    stages = [s for s in build_default_pipeline().stages if s.name != "Build"]
    with pytest.raises(aidge_deploy.DeployError) as info:
        aidge_deploy.deploy(export_factory("benchmark"), pipeline=stages)
    assert "BuildStage has not run" in info.value.message


def test_a_pipeline_is_refused_where_it_cannot_run(export_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark")
    with pytest.raises(ConfigError, match="not a stage"):
        aidge_deploy.deploy(artifact, pipeline=["Build"])  # type: ignore[list-item]
    runs = tmp_path / "runs"
    with pytest.raises(ConfigError, match="runs no local pipeline"):
        aidge_deploy.deploy(
            artifact,
            aidge_deploy.DeployConfig(target="host", backend="api", api_url="http://127.0.0.1:9"),
            pipeline=build_default_pipeline(),
            work_dir=runs,
        )
    assert not runs.exists()  # refused before anything was made


def test_the_target_is_resolved_once_per_run(
    export_factory, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    built: list[object] = []
    original = HostLocalTarget.__init__

    def counting(self: HostLocalTarget, config: object = None) -> None:
        built.append(self)
        original(self, config)  # type: ignore[arg-type]

    monkeypatch.setattr(HostLocalTarget, "__init__", counting)
    aidge_deploy.deploy(export_factory("benchmark"), aidge_deploy.DeployConfig(target="host"))
    assert len(built) == 1


def test_check_deploy_config_has_a_module_of_its_own() -> None:
    from aidge_deploy import configcheck
    from aidge_deploy.pipeline.stages import preflight

    assert preflight.check_deploy_config is configcheck.check_deploy_config
    config = aidge_deploy.DeployConfig(target="hots")
    with pytest.raises(ConfigError, match="Did you mean 'host'"):
        configcheck.check_deploy_config(config, "hots")
    assert isinstance(configcheck.check_deploy_config(config, "host"), HostLocalTarget)
