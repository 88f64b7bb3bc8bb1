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

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aidge_core.export_utils import ExportApplication, generate_file, register_project_composer
from aidge_core.export_utils.deploy_utils import collect_deploy_metadata
from aidge_export_arm_cortexm.targets.common import _forward_identity, compose_cortexm_project

from aidge_qemu_boards.exports import assets_root_for
from aidge_qemu_boards.hw_targets import QEMU_CORES
from aidge_qemu_descriptors import get_board

__all__ = ["BENCHMARK_TEMPLATE", "compose_emulated_board_project"]

#: protocols a heterogeneous export runs on both cores (one-way: each core prints on its own
#: UART; an interactive session would need a host talking to both)
HETEROGENEOUS_PROTOCOLS = ("aidge-uart-output/v1", "aidge-uart-benchmark/v1")

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
    if application.heterogeneous_deploy:
        _write_dual_core_main(ctx, project)
    return project


def _write_dual_core_main(ctx: Any, project: dict[str, str]) -> None:
    """Render ``main.cpp`` as both cores' program: the Cortex-M exporter renders it for one
    core (it does not hand ``heterogeneous_deploy`` to its main template)."""
    board = get_board(ctx.device.name)
    if board.second_core is None:
        raise ValueError(
            f"{board.name} has one core: a heterogeneous export needs a dual-core board "
            "(mps2-an521)"
        )
    if project.get("protocol") not in HETEROGENEOUS_PROTOCOLS:
        raise ValueError(
            f"a heterogeneous export on {board.name} runs the output or benchmark application "
            f"on both cores, not {project.get('protocol')!r} (an interactive session)"
        )
    export_path = Path(ctx.export_folder)
    main_cpp = export_path / "main.cpp"
    found = re.search(r'#include "Src/(\w+)\.hpp"', main_cpp.read_text())
    if found is None:
        raise ValueError(f"{main_cpp} includes no Src/<entry>.hpp")
    generate_file(
        main_cpp,
        assets_root_for(board.name) / "templates" / "main.jinja",
        call_function=found.group(1),
        npu_enabled=False,
        heterogeneous_deploy=True,
        apss_linux=False,
    )
