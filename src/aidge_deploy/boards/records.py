"""The built-in boards, one record each (``aidge_deploy.targetspec.TargetSpec``).

Why this module exists: most boards differ from the others of their kind only in facts —
their name, their hardware model, how they are reached — and each is declared here as data,
as a plug-in declares its own: every record is an entry point of ``aidge_deploy.boards`` in
``pyproject.toml``, and the registry makes its deploy targets from the implementation of its
kind. Three boards also have a class of their own for a pair, where their mechanics differ
(``host/local``, the dual-core ``mps2-an521/local``, the Alif ``ake7/local``); their records
say what they are all the same.

The counter source and power ability of each are its kind's implementation's (``perf`` on
the host and the boards, the emulated PMU and power window in QEMU, none on a probe board):
a record names them only to add what its kind lacks or to withhold what the board cannot do.
The hardware facts (core, clock, memories, BSP) are the hardware models' (``aidge_core.hw_model``,
and ``aidge_qemu_boards`` for the emulated boards): nothing here repeats them. This module
imports nothing but the vocabulary, so that reading the records costs nothing.
"""

from __future__ import annotations

from aidge_deploy.targetspec import TargetKind, TargetSpec

_SSH = ("ssh", "ssh_docker")

#: this machine: built and run here, or reached over SSH as a board would be
HOST = TargetSpec(
    "host",
    TargetKind.HOST,
    ("local", *_SSH),
)


def _linux_board(name: str) -> TargetSpec:
    return TargetSpec(
        name,
        TargetKind.LINUX_BOARD,
        _SSH,
    )


RASPBERRYPI = _linux_board("raspberrypi")
JETSON_AGX = _linux_board("jetson-agx")
JETSON_NANO = _linux_board("jetson-nano")
JETSON_THOR = _linux_board("jetson-thor")
K230 = _linux_board("k230")


def _emulated(name: str, *, runs_heterogeneous: bool = False) -> TargetSpec:
    return TargetSpec(
        name,
        TargetKind.EMULATED_MCU,
        ("local",),
        runs_heterogeneous=runs_heterogeneous,
    )


MPS2_AN386 = _emulated("mps2-an386")
MPS2_AN500 = _emulated("mps2-an500")
MPS2_AN505 = _emulated("mps2-an505")
#: two Cortex-M33: its class (the second core's loading and logs) deploys it
MPS2_AN521 = _emulated("mps2-an521", runs_heterogeneous=True)
MPS3_AN547 = _emulated("mps3-an547")
NETDUINOPLUS2 = _emulated("netduinoplus2")


def _probe_board(
    name: str, *, pyocd_part: str | None = None, runs_heterogeneous: bool = False
) -> TargetSpec:
    """A microcontroller on a debug probe; ``pyocd_part`` is pyOCD's built-in name of the
    part (None: it needs a CMSIS pack and ``--pyocd-target``)."""
    return TargetSpec(
        name,
        TargetKind.MCU,
        ("local",),
        runs_heterogeneous=runs_heterogeneous,
        settings=(("pyocd_part", pyocd_part),),
    )


STM32F413 = _probe_board("stm32f413")
STM32F746 = _probe_board("stm32f746")
STM32H743 = _probe_board("stm32h743", pyocd_part="stm32h743xx")
STM32H7A3 = _probe_board("stm32h7a3")
STM32L4R5 = _probe_board("stm32l4r5")
STM32N657 = _probe_board("stm32n657")
#: the Alif Ensemble E7 (M55 HP core): its class flashes a program per core
AKE7 = _probe_board("ake7", runs_heterogeneous=True)

#: every built-in record (each is an entry point of ``aidge_deploy.boards``: a test checks it)
RECORDS: tuple[TargetSpec, ...] = (
    HOST,
    RASPBERRYPI,
    JETSON_AGX,
    JETSON_NANO,
    JETSON_THOR,
    K230,
    MPS2_AN386,
    MPS2_AN500,
    MPS2_AN505,
    MPS2_AN521,
    MPS3_AN547,
    NETDUINOPLUS2,
    STM32F413,
    STM32F746,
    STM32H743,
    STM32H7A3,
    STM32L4R5,
    STM32N657,
    AKE7,
)

__all__ = [
    "AKE7",
    "HOST",
    "JETSON_AGX",
    "JETSON_NANO",
    "JETSON_THOR",
    "K230",
    "MPS2_AN386",
    "MPS2_AN500",
    "MPS2_AN505",
    "MPS2_AN521",
    "MPS3_AN547",
    "NETDUINOPLUS2",
    "RASPBERRYPI",
    "RECORDS",
    "STM32F413",
    "STM32F746",
    "STM32H7A3",
    "STM32H743",
    "STM32L4R5",
    "STM32N657",
]
