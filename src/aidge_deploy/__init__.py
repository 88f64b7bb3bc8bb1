"""aidge-deploy: build, transfer or flash, run and measure Aidge exports on real targets.

Public API (the deploy guide's names)::

    import aidge_deploy
    result = aidge_deploy.deploy(export_dir_or_artifact, aidge_deploy.DeployConfig(target="host"))
"""

from __future__ import annotations

from aidge_deploy.api import deploy
from aidge_deploy.config import (
    Aggregation,
    Backend,
    BenchmarkConfig,
    DeployConfig,
    ValidationConfig,
)
from aidge_deploy.errors import DeployError, PipelineError, ProtocolError
from aidge_deploy.registry import (
    DeployTarget,
    FlashableTarget,
    RemoteBuildTarget,
    TransferableTarget,
    get_deploy_target,
    register_deploy_target,
)
from aidge_deploy.results import (
    BuildResult,
    DeployContext,
    DeployResult,
    ExecutionResult,
    MemoryPeaks,
    Metric,
    Provenance,
    TimingSeries,
)

__version__ = "0.1.0"

__all__ = [
    "Aggregation",
    "Backend",
    "BenchmarkConfig",
    "BuildResult",
    "DeployConfig",
    "DeployContext",
    "DeployError",
    "DeployResult",
    "DeployTarget",
    "ExecutionResult",
    "FlashableTarget",
    "MemoryPeaks",
    "Metric",
    "PipelineError",
    "ProtocolError",
    "Provenance",
    "RemoteBuildTarget",
    "TimingSeries",
    "TransferableTarget",
    "ValidationConfig",
    "__version__",
    "deploy",
    "get_deploy_target",
    "register_deploy_target",
]
