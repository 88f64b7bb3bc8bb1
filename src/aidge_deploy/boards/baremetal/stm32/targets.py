"""The former per-board classes of the STM32 boards, kept importable.

Why this module exists: each STM32 board is one record of ``aidge_deploy.boards.records``
(its hardware model, and pyOCD's name of the part where pyOCD has it built in: other parts
need a CMSIS pack and ``--pyocd-target``); its ``local`` target is made from that record
with ``ProbeBoardTarget`` (``aidge_deploy.registry``). Memories, clocks, HAL family and UART
handle come from ``aidge_core.hw_model`` through ``self.hardware_target``. The class names
they had (``STM32H743LocalTarget``...) still name those targets.
"""

from __future__ import annotations

from aidge_deploy.boards.baremetal.probe import ProbeBoardTarget

#: the STM32 boards' common implementation, under the name it had
BaseSTM32LocalDeployTarget = ProbeBoardTarget

_ALIASES = {
    "STM32F413LocalTarget": "stm32f413",
    "STM32F746LocalTarget": "stm32f746",
    "STM32H743LocalTarget": "stm32h743",
    "STM32H7A3LocalTarget": "stm32h7a3",
    "STM32L4R5LocalTarget": "stm32l4r5",
    "STM32N657LocalTarget": "stm32n657",
}


def __getattr__(name: str) -> object:
    """``STM32H743LocalTarget`` and the others: the targets made from the boards' records."""
    board = _ALIASES.get(name)
    if board is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from aidge_deploy.registry import pipeline_target_class

    return pipeline_target_class(board, "local")


__all__ = ["BaseSTM32LocalDeployTarget"]
