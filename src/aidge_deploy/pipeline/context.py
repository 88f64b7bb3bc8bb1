"""The state one deploy run carries from stage to stage.

Each optional field is written by exactly one stage (named in ``PRODUCERS``) and read by
later stages through a narrowing accessor that returns the non-optional type or raises
``PipelineError`` naming the field and its producer. Reads that handle ``None`` on purpose
stay on the raw field.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import PipelineError
from aidge_deploy.exportspec import Export
from aidge_deploy.progress import ProgressCallback, ProgressKind, ProgressUpdate

if TYPE_CHECKING:
    from aidge_deploy.artifact import RuntimeSettings
    from aidge_deploy.power.capability import PowerRun
    from aidge_deploy.power.protocol import PowerMonitor
    from aidge_deploy.power.result import PowerPlan, PowerResult
    from aidge_deploy.profiling.binary import BinaryInfo
    from aidge_deploy.profiling.passes import CounterProfile
    from aidge_deploy.protocols.base import ProtocolResult
    from aidge_deploy.registry import DeployTarget
    from aidge_deploy.results import BuildResult, DeployContext, DeployResult, ExecutionResult


#: context field -> the stage that produces it (checked by a test against the stages)
PRODUCERS: dict[str, str] = {
    "target_name": "Preflight",
    "target": "Preflight",
    "runtime": "ResolveTarget",
    "deploy_context": "Prepare",
    "build_result": "Build",
    "binary_info": "InspectBinary",
    "execution": "Execute",
    "parsed": "ParseOutput",
    "counter_profile": "ProfilePasses",  # counters: profiling/passes.py
    "power_monitor": "EnsureBoardPowered",  # power: pipeline/stages/power.py
    "power_plan": "PlanPowerRun",
    "power_firmware": "BuildPowerFirmware",
    "power_run": "CapturePower",
    "power_result": "CollectPowerTerminal",
    "result": "Assemble",
}

V = TypeVar("V")


@dataclass
class PipelineContext:
    """Mutable state bag of one run. Config and artifact are inputs; the rest is produced."""

    config: DeployConfig
    artifact: Export
    work_dir: Path
    progress: ProgressCallback | None = None

    target_name: str | None = None
    target: DeployTarget | None = None
    runtime: RuntimeSettings | None = None
    deploy_context: DeployContext | None = None
    build_result: BuildResult | None = None
    binary_info: BinaryInfo | None = None
    transferred: bool = False
    flashed: bool = False
    execution: ExecutionResult | None = None
    parsed: ProtocolResult | None = None
    #: counters over all passes (None when no counters were requested)
    counter_profile: CounterProfile | None = None
    #: power (None unless config.power is set): the monitor, plan, power firmware, run, result
    power_monitor: PowerMonitor | None = None
    power_monitor_closed: bool = False
    power_plan: PowerPlan | None = None
    power_firmware: BuildResult | None = None
    power_run: PowerRun | None = None
    power_result: PowerResult | None = None
    result: DeployResult | None = None
    report_paths: list[Path] = field(default_factory=list)
    stage_durations_ms: dict[str, float] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)

    @staticmethod
    def _require(value: V | None, name: str) -> V:
        if value is None:
            producer = PRODUCERS[name]
            raise PipelineError(
                f"ctx.{name} is not available — {producer}Stage has not run",
            )
        return value

    @property
    def resolved_target_name(self) -> str:
        return self._require(self.target_name, "target_name")

    @property
    def resolved_target(self) -> DeployTarget:
        return self._require(self.target, "target")

    @property
    def resolved_runtime(self) -> RuntimeSettings:
        return self._require(self.runtime, "runtime")

    @property
    def prepared_context(self) -> DeployContext:
        return self._require(self.deploy_context, "deploy_context")

    @property
    def built(self) -> BuildResult:
        return self._require(self.build_result, "build_result")

    @property
    def inspected_binary(self) -> BinaryInfo:
        return self._require(self.binary_info, "binary_info")

    @property
    def executed(self) -> ExecutionResult:
        return self._require(self.execution, "execution")

    @property
    def parsed_output(self) -> ProtocolResult:
        return self._require(self.parsed, "parsed")

    @property
    def profiled_counters(self) -> CounterProfile:
        return self._require(self.counter_profile, "counter_profile")

    @property
    def opened_power_monitor(self) -> PowerMonitor:
        return self._require(self.power_monitor, "power_monitor")

    @property
    def planned_power_run(self) -> PowerPlan:
        return self._require(self.power_plan, "power_plan")

    @property
    def power_firmware_build(self) -> BuildResult:
        return self._require(self.power_firmware, "power_firmware")

    @property
    def completed_power_run(self) -> PowerRun:
        return self._require(self.power_run, "power_run")

    @property
    def deploy_result(self) -> DeployResult:
        return self._require(self.result, "result")

    def report(
        self,
        stage: str,
        kind: ProgressKind,
        message: str = "",
        completed: float | None = None,
        total: float | None = None,
        unit: str = "",
    ) -> None:
        if self.progress is not None:
            self.progress(ProgressUpdate(stage, kind, message, completed, total, unit))
