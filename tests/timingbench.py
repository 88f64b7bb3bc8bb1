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


#: every number of the Cortex-M33 and M7 data files, as test_timing_m33_m7.py's derivations
#: assume them (test_timing_model.py pins them with the others)
PINNED_NEW_CORES = {
    "cortex-m33": {
        "cost.alu": 1, "latency.alu": 1, "latency_shifted": 2, "shift_lsl_free": 1,
        "latency_dsp_late": 2, "early_read": 0, "cost.mul": 1, "latency.mul": 2,
        "acc_advance": 1, "mul_sets_flags": 2, "load_to_mul": 0, "cost.div": 7,
        "cost.load": 1, "latency.load": 2, "store_data_advance": 1, "cost.store": 1,
        "store_register_offset": 1, "cost.load_dual": 2, "latency.load_dual": 3,
        "cost.store_dual": 2, "cost.load_multi": 0, "cost.store_multi": 0,
        "multi_per_register": 1, "multi_registers_per_cycle": 1, "cost.branch": 1,
        "refill_direct": 2, "refill_flags_ready": 1, "cost.branch_reg": 1,
        "refill_register": 2, "cost.load_pc": 1, "refill_load": 2, "cost.table_branch": 2,
        "refill_unaligned_wide": 0, "refill_max": 0, "cost.loop_end": 1, "refill_loop_end": 0,
        "cost.it": 1, "it_folded": 0, "cost.nop": 1, "dual_issue": 1, "cost.system": 1,
        "cost.barrier": 1, "cost.other": 1, "cost.fp_alu": 1, "latency.fp_alu": 1,
        "cost.fp_mul": 1, "latency.fp_mul": 1, "cost.fp_mac": 1, "latency.fp_mac": 3,
        "fp_acc_advance": 0, "fp_mac_blocks": 2, "fp_mac_blocks_all": 1, "cost.fp_div": 1,
        "latency.fp_div": 14, "cost.fp_load": 1, "latency.fp_load": 2, "fp_load_double": 2,
        "cost.fp_store": 1, "fp_store_double": 2, "fp_store_data_advance": 1,
        "cost.fp_load_multi": 0, "cost.fp_store_multi": 0, "fp_multi_per_register": 1,
        "cost.fp_move": 1, "latency.fp_move": 1, "fp_move_double": 1, "cost.fp_system": 1,
        "exception_entry": 12,
    },
    "cortex-m7": {
        "dual_issue": 1, "cost.alu": 1, "latency.alu": 1, "latency_shifted": 1,
        "early_read": 1, "cost.mul": 1, "latency.mul": 2, "acc_advance": 1, "load_to_mul":
        1, "cost.div": 7, "cost.load": 1, "latency.load": 1, "latency_load_subword": 2,
        "cost.store": 1, "store_register_offset": 1, "store_data_advance": 3,
        "cost.load_dual": 1, "latency.load_dual": 1, "cost.store_dual": 1,
        "cost.load_multi": 0, "cost.store_multi": 0, "multi_per_register": 1,
        "multi_registers_per_cycle": 2, "cost.branch": 1, "cost.branch_reg": 1,
        "cost.load_pc": 1, "cost.table_branch": 2, "predictor": 1, "mispredict": 8,
        "cost.it": 1, "cost.nop": 1, "cost.system": 1, "latency.system": 3, "cost.barrier":
        1, "cost.other": 1, "cost.fp_alu": 1, "latency.fp_alu": 3, "latency_double.fp_alu":
        4, "cost.fp_mul": 1, "latency.fp_mul": 3, "latency_double.fp_mul": 7, "cost.fp_mac":
        1, "latency.fp_mac": 5, "latency_double.fp_mac": 11, "fp_acc_advance": 2,
        "fp_mac_blocks": 3, "fp_mac_blocks_all": 0, "cost.fp_div": 16, "latency.fp_div": 16,
        "latency_double.fp_div": 30, "cost.fp_load": 1, "latency.fp_load": 1,
        "fp_load_double": 1, "latency_double.fp_load": 2, "cost.fp_store": 1,
        "fp_store_double": 1, "fp_store_data_advance": 2, "cost.fp_load_multi": 0,
        "cost.fp_store_multi": 0, "fp_multi_per_register": 1,
        "fp_multi_registers_per_cycle": 2, "cost.fp_move": 1, "latency.fp_move": 3,
        "fp_move_double": 1, "cost.fp_system": 1, "exception_entry": 12,
    },
}  # fmt: skip
