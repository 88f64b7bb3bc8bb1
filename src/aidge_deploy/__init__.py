"""aidge-deploy: build, transfer or flash, run and measure Aidge exports on real targets.

Public API (the deploy guide's names)::

    import aidge_deploy
    result = aidge_deploy.deploy(export_dir_or_artifact, aidge_deploy.DeployConfig(target="host"))
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from aidge_deploy.runcontrol import RunControl, RunInterrupted

#: public name -> module that defines it. Imported on first use (PEP 562), so that
#: ``import aidge_deploy.testing.plugin`` (pytest loads it in every session) or
#: ``aidge_deploy.cli`` do not pay for importing aidge_core until they need it.
_LAZY = {
    "deploy": "aidge_deploy.api",
    **dict.fromkeys(
        ("Aggregation", "Backend", "BenchmarkConfig", "DeployConfig", "ValidationConfig"),
        "aidge_deploy.config",
    ),
    **dict.fromkeys(("DeployError", "PipelineError", "ProtocolError"), "aidge_deploy.errors"),
    **dict.fromkeys(
        (
            "DeployTarget",
            "FlashableTarget",
            "RemoteBuildTarget",
            "TransferableTarget",
            "get_deploy_target",
            "register_deploy_target",
        ),
        "aidge_deploy.registry",
    ),
    **dict.fromkeys(
        (
            "BuildResult",
            "DeployContext",
            "DeployResult",
            "ExecutionResult",
            "MemoryPeaks",
            "Metric",
            "Provenance",
            "TimingSeries",
        ),
        "aidge_deploy.results",
    ),
    **dict.fromkeys(("RunControl", "RunInterrupted"), "aidge_deploy.runcontrol"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'aidge_deploy' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

# ``import aidge_deploy.<target>`` (what aidge_benchmark's command line does with a backend
# name) gives a module registering that target's aidge_benchmark backends
from aidge_deploy.benchmark_backends import install_finder  # noqa: E402

install_finder()

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
    "RunControl",
    "RunInterrupted",
    "TimingSeries",
    "TransferableTarget",
    "ValidationConfig",
    "__version__",
    "deploy",
    "get_deploy_target",
    "register_deploy_target",
]
