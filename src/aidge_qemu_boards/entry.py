"""The emulated boards' benchmark entry point: N timed inferences cost N inferences.

The Cortex-M exporter's benchmark entry (``inference_time.jinja``) runs ``max(10, N)``
forwards around each of its N timed iterations, because a 1 ms tick cannot time a single
forward: ``--iterations 1600`` ran 2.56 million inferences. An emulated board's cycle counter
is exact (SysTick ticks of virtual time under ``-icount``), so its entry
(``assets/<board>/templates/inference_time.jinja``) times each forward on its own, with the
same output lines and the same meaning. This module registers the project composer of the
boards' cores (``hw_targets.QEMU_CORES``): the Cortex-M exporter composes the project, then a
benchmark export's ``Src/inference_time.hpp`` is rendered from the boards' template with the
values the exporter used. The entry carries ``aidge_qemu_descriptors.LINEAR_ENTRY_MARK``, so a
runner tells an export made with it from one made before it.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from aidge_core.export_utils import ExportApplication, generate_file, register_project_composer
from aidge_core.export_utils.deploy_utils import collect_deploy_metadata
from aidge_export_arm_cortexm.targets.common import _forward_identity, compose_cortexm_project

from aidge_qemu_boards.exports import assets_root_for
from aidge_qemu_boards.hw_targets import QEMU_CORES

__all__ = ["BENCHMARK_TEMPLATE", "compose_emulated_board_project"]

#: the entry's template, under each board's ``templates/`` (one file, linked from common/)
BENCHMARK_TEMPLATE = Path("templates") / "inference_time.jinja"


@register_project_composer(*QEMU_CORES)
def compose_emulated_board_project(ctx: Any, application: ExportApplication) -> dict[str, str]:
    """The Cortex-M exporter's project, with the boards' linear benchmark entry."""
    project = compose_cortexm_project(ctx, application)
    if application.kind == "benchmark" and not application.tinymlbenchmark:
        export_path = Path(ctx.export_folder)
        meta = collect_deploy_metadata(export_path, ctx.graph, ctx.input_tensors)
        func_name, _ = _forward_identity(ctx.graph)  # the exporter's own naming rule
        generate_file(
            export_path / "Src" / "inference_time.hpp",
            assets_root_for(ctx.device.name) / BENCHMARK_TEMPLATE,
            func_name=func_name,
            board=ctx.device.hal_board,
            nb_warmup=application.nb_warmup,
            nb_iterations=application.nb_iterations,
            profiling=application.profiling,
            **asdict(meta),
        )
    return project
