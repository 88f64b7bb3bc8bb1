"""The Cortex-M33 and Cortex-M7 timing models against microbenchmarks worked out by hand.

As in test_timing_model.py: ``tests/data/timing_firmware/bench_m33.S`` (mps2-an505) holds
one function per rule of the model, each called between two calls of ``mark()``; every
expected count below is derived from the figures of the core's sources, written here (not
read from the data file), so a change to a number of ``profiling/timing/<core>.json`` fails
these tests until the derivations are redone, and the pinned table fails on any change of the
file itself. Every interval counts, besides the benchmark's body, the bracketing: ``mark``'s
``bx lr``, the ``bl bench``, the benchmark's own ``bx lr`` and the ``bl mark`` that reaches
the next snapshot.
"""

from __future__ import annotations

import pytest

from aidge_qemu_descriptors import get_board
from timingbench import build, intervals

pytestmark = pytest.mark.qemu

# ---- Cortex-M33: jnk0le's and SLOTHY's RP2350 measurements, LLVM's (M4) model ------------------
ONE = 1  # one instruction a cycle (SLOTHY: inverse throughput 1.00)
LOAD_USE = 2  # jnk0le: load-to-use latency 2
MUL_LAT = 2  # SLOTHY, jnk0le: multiply latency 2; the accumulator path 1
SHIFTED_LAT = DSP_LAT = 2  # SLOTHY: ROR/LSR/ASR shifted operands, uadd16, pkhbt: 2 (LSL: 1)
DIV = 7  # assumption: the Cortex-M4's 2-12, its middle
REFILL_FLAGS_SET, REFILL_FLAGS_READY, REFILL_REGISTER = 2, 1, 2  # jnk0le; the last assumed
FP_MAC_LAT, FP_MAC_BLOCK, FP_DIV_LAT = 3, 2, 14  # jnk0le; LLVM's M4 model for the divide
#: mark's bx lr (1 + refill of a register branch), bl bench (1 + 1: an unconditional branch
#: tests no flags), the benchmark's bx lr (1 + 2), bl mark (1 + 1)
M33_BRACKET = (
    (ONE + REFILL_REGISTER)
    + (ONE + REFILL_FLAGS_READY)
    + (ONE + REFILL_REGISTER)
    + (ONE + REFILL_FLAGS_READY)
)

#: benchmark -> (cycles of its body besides the bracket, taken branches in the interval)
M33_EXPECTED: dict[str, tuple[int, int]] = {
    "t_empty": (0, 4),
    # four ADDS: arithmetic never pairs with arithmetic
    "t_alu": (4 * ONE, 4),
    # ADDS, NOP beside it, ADDS, NOP beside it
    "t_nop": (2 * ONE, 4),
    # LDR r2; ADDS r3, r2 waits for the load: issued at 2
    "t_load_use": (LOAD_USE + ONE, 4),
    "t_load_independent": (3 * ONE, 4),
    # LDR r2; STR r2 reads its data a cycle late: issued at 1
    "t_load_store": (2 * ONE, 4),
    # the second LDR's address is the first's result
    "t_pointer_chase": (LOAD_USE + ONE, 4),
    # ADD.W ..., ROR #8, then its consumer at 2
    "t_shifted": (SHIFTED_LAT + ONE, 4),
    # ADD.W ..., LSL #2: latency 1
    "t_shifted_lsl": (2 * ONE, 4),
    "t_dsp": (DSP_LAT + ONE, 4),
    # three MLA chained through the accumulator: issued at 0, 1, 2
    "t_mac_chain": (3 * ONE, 4),
    # three MUL.W chained through a multiplicand: issued at 0, 2, 4
    "t_mul_chain": (2 * MUL_LAT + ONE, 4),
    # MULS (16-bit, flag-setting: 2 cycles); ADDS
    "t_muls": (2 + ONE, 4),
    # SDIV, then its consumer
    "t_divide": (DIV + ONE, 4),
    # LDM of 4, PUSH of 4 (reads the LDM's r4, r5 a cycle late: no wait), POP of 4
    "t_multiple": (4 + 4 + 4, 4),
    # LDRD (2); STRD of its registers (data a cycle late: issued at 2)
    "t_dual": (2 + 2, 4),
    # CMP, IT beside it, MOV; CMP.W, IT alone (after a 32-bit instruction), MOV
    "t_it": (ONE + 0 + ONE + ONE + ONE + ONE, 4),
    # MOVS, then 3 x (SUBS; BNE beside it); two taken, each refilled in 2 (the flags set
    # right before the branch)
    "t_branch_loop": (ONE + 3 * ONE + 2 * REFILL_FLAGS_SET, 6),
    # the same with a MOV r8, r8 (no flags) between SUBS and BNE: each refill 1
    "t_branch_flags_ready": (ONE + 3 * 2 * ONE + 2 * REFILL_FLAGS_READY, 6),
    # PUSH {r4, lr} (2), POP {r4, pc} (2 + refill 2) in place of the bracket's bx lr (1 + 2)
    "t_pop_pc": (2 + 2 + 2 - (ONE + REFILL_REGISTER), 4),
    # VLDR s0 (latency 2); VADD (at 2, latency 1); VMUL (at 3); VFMA (at 4, latency 3, no FP
    # instruction for 2 cycles); VADD (at 7); VSTR reads s4 a cycle late: at 8, ends at 9
    "t_fp": (LOAD_USE + ONE + ONE + FP_MAC_LAT + ONE + ONE, 4),
    # VDIV (1, latency 14), two ADDS beside the divide, VADD of its result at 14
    "t_vdiv_overlap": (FP_DIV_LAT + ONE, 4),
    # TBB (2) and its refill (2), one more taken branch
    "t_table_branch": (2 + 2, 5),
}


@pytest.mark.parametrize("board", ["mps2-an505"])
def test_cortex_m33_microbenchmarks_reproduce_the_hand_counts(board: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    descriptor = get_board(board)
    elf = build(board, "bench_m33.S", list(descriptor.gcc_cpu_flags), tmp_path)
    first = intervals(elf, board, tmp_path / "run1.trace")
    assert first == intervals(elf, board, tmp_path / "run2.trace"), "deterministic"
    names = list(M33_EXPECTED)
    assert len(first) == len(names)
    got = {
        name: (c["estimated_cycles"], c["branches_taken"])
        for name, c in zip(names, first, strict=True)
    }
    assert got == {name: (M33_BRACKET + body, t) for name, (body, t) in M33_EXPECTED.items()}


# ---- Cortex-M7: LLVM's ARMScheduleM7.td, jnk0le's STM32H743 measurements -----------------------
PAIR = 0  # an instruction issued beside the one before it costs nothing more
MISPREDICT = 8  # jnk0le: a mispredicted branch (the common case: flags set right before it)
W_LOAD, SUB_LOAD, M7_MUL, EARLY = 1, 2, 2, 1  # latencies; an early read one cycle sooner
M7_DIV, M7_VDIV, FP_LAT, FMA_LAT, FMA_ACC, FMA_BLOCK = 7, 16, 3, 5, 2, 3
#: each bracketing branch is seen once (mark's bx lr returns elsewhere each time): the
#: predictor has no target for it, each costs 1 + MISPREDICT; the benchmark's own bx lr
#: issues with the body (counted there) and mispredicts too
M7_BRACKET = 3 * (1 + MISPREDICT) + MISPREDICT

#: benchmark -> (cycles of its body and its bx lr, taken branches in the interval)
M7_EXPECTED: dict[str, tuple[int, int]] = {
    "s_empty": (1, 4),
    # ADDS+ADDS, ADDS+ADDS, bx lr
    "s_dual_alu": (3, 4),
    # LDR [r1] + LDR [r1, #4] (offsets 4 apart: other bank), LDR [r1, #8] + bx lr
    "s_loads_two_banks": (2, 4),
    # three loads to the same bank one by one, the bx lr beside the last
    "s_loads_one_bank": (3, 4),
    # LDR; ADDS of its result at 1 (word load latency 1), bx lr beside it
    "s_load_use": (W_LOAD + 1, 4),
    # the second load's address is the first's result: read early, at 2
    "s_pointer_chase": (W_LOAD + EARLY + 1, 4),
    # LDRB (latency 2); its consumer at 2
    "s_subword": (SUB_LOAD + 1, 4),
    # ADDS r2 (a plain ALU result reaches the address generator in time); LDR [r2] at 1
    "s_alu_to_address": (1 + 1, 4),
    # UBFX (bit field: one cycle later to an address); LDR [r2] at 2
    "s_dsp_to_address": (1 + EARLY + 1, 4),
    # two shifted operands never pair: 0, 1 (bx lr beside the second)
    "s_shifted_pair": (2, 4),
    # MUL (latency 2) into a shifted operand (read early): at 3
    "s_mul_to_shifter": (M7_MUL + EARLY + 1, 4),
    # MUL into a plain operand: at 2
    "s_mul_to_alu": (M7_MUL + 1, 4),
    # three MLA chained through the accumulator (read a cycle late): 0, 1, 2
    "s_mac_chain": (3, 4),
    # three MUL.W chained through a multiplicand: 0, 2, 4
    "s_mul_chain": (2 * M7_MUL + 1, 4),
    # LDR, then a MUL of its result: one more cycle than the ALU would wait
    "s_load_to_mul": (W_LOAD + 1 + 1, 4),
    # MUL; STR (never beside a multiply) at 1 with ADDS beside it; bx lr at 2
    "s_mul_store": (3, 4),
    # SDIV alone for 7; its consumer at 7
    "s_divide": (M7_DIV + 1, 4),
    # LDM of 4 (2 cycles), PUSH of 4 (2), POP of 4 (2), each alone; bx lr
    "s_multiple": (2 + 2 + 2 + 1, 4),
    # LDRD (1), STRD (1), each alone; bx lr
    "s_dual": (3, 4),
    # MOVS; SUBS with BNE beside it (2), then 1 a loop-back block; the BNE is seen taken
    # (mispredicted: no prediction yet), taken (predicted), taken, then falls through while
    # predicted taken (mispredicted); bx lr
    "s_branch_loop": (2 + 3 * 1 + 2 * MISPREDICT + 1, 7),
    # PUSH {r4, lr} (1), POP {r4, pc} (1, alone): its jump mispredicts in place of the bx lr's
    "s_pop_pc": (2, 4),
    # VLDR s0 (latency 1); VADD at 1 (latency 3); VMUL at 4; VFMA at 7 (latency 5, no FP ALU
    # operation for 3 cycles); VADD at 12; VSTR reads s4 two cycles late: at 13, bx lr beside
    "s_fp": (W_LOAD + FP_LAT + FP_LAT + FMA_LAT + FP_LAT - 2 + 1, 4),
    # VLDR + ADDS; VADD; VADD (never beside another FP operation) + bx lr
    "s_fp_pairs": (3, 4),
    # VDIV alone for 16; ADDS + bx lr
    "s_vdiv": (M7_VDIV + 1, 4),
    # MOVW + MOVT of the same register pair; bx lr
    "s_movw_movt": (2, 4),
    # CMP + IT; MOV + bx lr
    "s_it": (2, 4),
}


@pytest.mark.parametrize("board", ["mps2-an500"])
def test_cortex_m7_microbenchmarks_reproduce_the_hand_counts(board: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    descriptor = get_board(board)
    elf = build(board, "bench_m7.S", list(descriptor.gcc_cpu_flags), tmp_path)
    first = intervals(elf, board, tmp_path / "run1.trace")
    assert first == intervals(elf, board, tmp_path / "run2.trace"), "deterministic"
    names = list(M7_EXPECTED)
    assert len(first) == len(names)
    got = {
        name: (c["estimated_cycles"], c["branches_taken"])
        for name, c in zip(names, first, strict=True)
    }
    assert got == {name: (M7_BRACKET + body, t) for name, (body, t) in M7_EXPECTED.items()}
