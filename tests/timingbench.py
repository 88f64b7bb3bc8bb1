"""Builds and runs the timing-model microbenchmarks of ``tests/data/timing_firmware``.

Each benchmark is a function the firmware calls between two calls of ``mark()``, the emulated
PMU's boundary; ``intervals`` returns the counts between consecutive pairs of snapshots, one
per benchmark, in the order of the assembly file. Shared by the timing-model test modules.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from aidge_deploy.boards.baremetal.qemu.estimate import wait_states_of
from aidge_deploy.profiling.qemu_plugin import plugin_option, plugin_path, read_trace
from aidge_deploy.profiling.timing import load_model, plugin_table_path
from aidge_qemu_descriptors import get_board
from envparts import missing

FIRMWARE = Path(__file__).parent / "data" / "timing_firmware"
QEMU = shutil.which("qemu-system-arm")
GCC = shutil.which("arm-none-eabi-gcc")


def build(
    board: str, source: str, cpu_flags: list[str], out: Path, *defines: str, name: str = ""
) -> Path:
    if QEMU is None or GCC is None:
        missing("qemu-system-arm or arm-none-eabi-gcc is not installed")
    assert GCC is not None
    elf = out / f"{name or board}.elf"
    subprocess.run(
        [
            GCC,
            *cpu_flags,
            *defines,
            "-O2",
            "-ffreestanding",
            "-nostdlib",
            "-nostartfiles",
            "-Wall",
            "-Werror",
            str(FIRMWARE / "start.c"),
            str(FIRMWARE / source),
            f"-Wl,-T,{FIRMWARE / f'{board}.ld'}",
            "-o",
            str(elf),
        ],
        check=True,
        timeout=120,
    )
    return elf


def symbols(elf: Path) -> dict[str, int]:
    out = subprocess.run(
        ["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True, timeout=30
    )
    return {
        name: int(addr, 16) for addr, _, name in (line.split() for line in out.stdout.splitlines())
    }


def intervals(elf: Path, board_name: str, out: Path) -> tuple[dict[str, int], ...]:
    """Counts of each benchmark, run(): mark, bench, mark, ... in the order of the .S file."""
    board = get_board(board_name)
    model = load_model(board.cpu)
    option = plugin_option(
        plugin_path(),
        [symbols(elf)["mark"]],
        out,
        timing=plugin_table_path(model, out.parent),
        wait_states=wait_states_of(board),
        count_memory=False,
    )
    assert QEMU is not None
    done = subprocess.run(
        [QEMU, "-M", board.qemu_machine, "-nographic", "-monitor", "none", "-serial", "null",
         "-semihosting-config", "enable=on,target=native", "-kernel", str(elf), *option],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trace = read_trace(out)
    assert trace.timing_model == board.cpu
    snaps = trace.snapshots
    return tuple(b.minus(a) for a, b in zip(snaps[0::2], snaps[1::2], strict=True))
