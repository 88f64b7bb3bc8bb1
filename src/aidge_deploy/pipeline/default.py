"""The default deploy pipeline: one flat, ordered list of stages."""

from __future__ import annotations

from aidge_deploy.pipeline.runner import PipelineRunner
from aidge_deploy.pipeline.stages.assemble import AssembleStage
from aidge_deploy.pipeline.stages.build import BuildStage
from aidge_deploy.pipeline.stages.execute import ExecuteStage
from aidge_deploy.pipeline.stages.flash import FlashStage
from aidge_deploy.pipeline.stages.inspect_binary import InspectBinaryStage
from aidge_deploy.pipeline.stages.parse_output import ParseOutputStage
from aidge_deploy.pipeline.stages.power import (
    BuildPowerFirmwareStage,
    CapturePowerStage,
    CollectPowerTerminalStage,
    EnsureBoardPoweredStage,
    FlashPowerFirmwareStage,
    PlanPowerRunStage,
)
from aidge_deploy.pipeline.stages.preflight import PreflightStage
from aidge_deploy.pipeline.stages.prepare import PrepareStage
from aidge_deploy.pipeline.stages.profile_passes import ProfilePassesStage
from aidge_deploy.pipeline.stages.report import ReportStage
from aidge_deploy.pipeline.stages.resolve import ResolveTargetStage
from aidge_deploy.pipeline.stages.transfer import TransferStage


def build_default_pipeline() -> PipelineRunner:
    return PipelineRunner(
        [
            PreflightStage(),  # config and tool checks; (target, backend) -> implementation
            ResolveTargetStage(),  # the runtime defaults the manifest implies
            EnsureBoardPoweredStage(),  # power: open the monitor before touching the board
            PrepareStage(),  # build location and log folder
            BuildStage(),  # local build, or remote build for RemoteBuildTarget
            InspectBinaryStage(),  # flash/RAM against the hardware model, before flashing
            TransferStage(),  # TransferableTarget only
            FlashStage(),  # FlashableTarget only
            ExecuteStage(),  # run and capture (interactive sessions included)
            ParseOutputStage(),  # the manifest's protocol parser
            ProfilePassesStage(),  # counter passes, when counters were requested
            PlanPowerRunStage(),  # power: N from the clean profile timing
            BuildPowerFirmwareStage(),  # power: the BSP's gated power variant
            FlashPowerFirmwareStage(),
            CapturePowerStage(),  # power: the gated window, monitor armed
            CollectPowerTerminalStage(),  # power: the record after the gate; figures
            AssembleStage(),  # DeployResult with units and provenance
            ReportStage(),  # result bundle, when report_dir is set
        ]
    )
