"""Deploy results assembled from real captured logs, by the registered targets themselves.

``result_from_capture(folder, name)`` parses ``<name>.log`` with its manifest
(``tests/data/logs/<folder>``) and runs the same ``assemble_result`` the Assemble stage runs,
with the registered target of the manifest: the figures are exactly those a deploy of that
firmware would report, without building or running anything.
"""

from __future__ import annotations

import json
from pathlib import Path

from aidge_core.export_utils import ExportArtifact, ExportManifest

from aidge_deploy.config import DeployConfig
from aidge_deploy.pipeline.stages.assemble import assemble_result
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.registry import get_deploy_target
from aidge_deploy.results import BuildResult, BuildStatus, DeployResult, ExecutionResult

LOGS = Path(__file__).parent / "data" / "logs"


def load_capture(folder: str, name: str) -> tuple[str, ExportManifest]:
    base = LOGS / folder
    text = (base / f"{name}.log").read_bytes().decode("utf-8")
    manifest = ExportManifest.from_dict(
        json.loads((base / f"{name}.aidge-export.json").read_text())
    )
    return text, manifest


def result_from_capture(
    folder: str,
    name: str,
    *,
    target: str | None = None,
    backend: str = "local",
    config: DeployConfig | None = None,
) -> DeployResult:
    text, manifest = load_capture(folder, name)
    return result_from_text(
        text, manifest, LOGS / folder, target=target, backend=backend, config=config
    )


def result_from_text(
    text: str,
    manifest: ExportManifest,
    export_dir: Path,
    *,
    target: str | None = None,
    backend: str = "local",
    config: DeployConfig | None = None,
) -> DeployResult:
    """``text`` as the firmware of ``manifest`` printed it, assembled by the target."""
    name_of_target = target or manifest.target
    config = config or DeployConfig(target=name_of_target, backend=backend)
    deploy_target = get_deploy_target(name_of_target, backend, config)
    parsed = get_protocol(manifest.protocol).parse(text, manifest)
    return assemble_result(
        deploy_target,
        parsed,
        ExportArtifact(export_dir, manifest),
        config,
        ExecutionResult(raw_output=text, exit_status=None, duration_s=0.0),
        BuildResult(Path("firmware.elf"), (), BuildStatus.PREBUILT, ""),
        target_name=name_of_target,
    )
