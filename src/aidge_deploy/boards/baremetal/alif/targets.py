"""Alif Ensemble boards of the hardware model, reached locally through a probe and a UART."""

from __future__ import annotations

from aidge_deploy.boards.baremetal.probe import ProbeBoardTarget
from aidge_deploy.registry import register_deploy_target


@register_deploy_target("ake7", "local")
class AlifE7LocalTarget(ProbeBoardTarget):
    """Alif Ensemble E7 (M55 HP core): its exports build with Make into ``out/**/*.elf``."""
