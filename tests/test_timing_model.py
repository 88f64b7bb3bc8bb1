"""The emulated PMU's timing models against microbenchmarks whose cycles are worked out by hand.

``tests/data/timing_firmware`` holds one function per row of each model (bench_m4.S for the
Cortex-M4 boards, bench_m55.S for the Cortex-M55 one), each called between two calls of
``mark()``, the plugin's boundary. Below, every expected count is derived from the figures of
the core's sources, written here (not read from the data file): a change to a number in
``profiling/timing/<core>.json`` fails these tests until the derivations are redone, and the
pinned tables at the end fail on any change of the file itself.

Every interval counts, besides the benchmark's body, the bracketing: ``mark``'s ``bx lr``
back to ``bl bench``, the ``bl bench`` into the benchmark, the benchmark's own return and the
``bl mark`` that reaches the next snapshot (a snapshot holds everything before the boundary
instruction, the branch that reached it included). Every bracketing instruction and every
benchmark starts on a 4-byte boundary (the .S files align them), so no bracketing branch
lands on a 32-bit instruction at a halfword-aligned address.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import aidge_deploy
from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ConfigError
from aidge_deploy.history.identity import Comparability
from aidge_deploy.metrics import Provenance
from aidge_deploy.profiling.timing import CORES, load_model
from aidge_deploy.report.compare import (
    DimensionDiff,
    DimensionKind,
    Direction,
    Figure,
    ThresholdRule,
    Thresholds,
    Verdict,
    evaluate_figures,
)
from aidge_qemu_descriptors import get_board, list_boards
from browser import screenshot
from envparts import missing
from timingbench import PINNED_NEW_CORES
from timingbench import build as _build
from timingbench import intervals as _intervals
from timingbench import symbols as _symbols

QEMU = shutil.which("qemu-system-arm")
GCC = shutil.which("arm-none-eabi-gcc")

# ---- Cortex-M4: Arm Cortex-M4 TRM r0p1 (DDI 0439B), Table 3-1, FPU table, 3.3.2 ---------------
ALU = 1  # Table 3-1 ADD/MOV/CMP... : 1
MUL = 1  # Table 3-1 MLA: 1; Table 3-2 SMLAD: 1
DIV = 7  # Table 3-1 SDIV/UDIV: 2 to 12; the model takes the middle of the range
LOAD = 2  # Table 3-1 LDR: 2
PIPELINED = 1  # 3.3.2: a load/store after an independent single load costs one cycle less
STORE_IMM = 1  # 3.3.2: "STR Rx,[Ry,#imm] is always one cycle"
STORE_REG = 2  # Table 3-1 STR with a register offset: 2
ADDRESS_STALL = 1  # 3.3.2: address from the preceding data-processing result: +1
MULTI = 1  # Table 3-1 LDM/STM/PUSH/POP: 1 + N
BRANCH = 1  # Table 3-1 branches: 1 (+ P when taken)
P_DIRECT, P_REGISTER, P_LOAD, P_UNALIGNED_WIDE = 1, 2, 3, 1  # Table 3-1 P: 1 to 3
TABLE_BRANCH = 3  # 3.3.2: TBB is two cycles of load, one of add, then the reload (P_LOAD)
IT, IT_FOLDED = 1, 0  # Table 3-1 IT: 1, note d: 0 after a 16-bit instruction
VLDR, VSTR, VADD, VMUL, VFMA, VDIV = 2, 2, 1, 1, 3, 14  # FPU table (.F32)
FLASH_WS = 5  # netduinoplus2 at 168 MHz: RM0090 Table 10

#: mark's bx lr (1 + P, a register branch) to bl bench (32-bit, word-aligned); bl bench
#: (1 + P direct); the benchmark's bx lr back to bl mark (1 + P register); bl mark into mark's
#: 16-bit bx lr (1 + P direct)
M4_BRACKET = (
    (BRANCH + P_REGISTER) + (BRANCH + P_DIRECT) + (BRANCH + P_REGISTER) + (BRANCH + P_DIRECT)
)

#: benchmark -> (cycles on mps2-an386, taken branches in the interval, data reads from flash)
M4_EXPECTED: dict[str, tuple[int, int, int]] = {
    "b_empty": (M4_BRACKET, 4, 0),
    # four independent ADDS
    "b_alu": (M4_BRACKET + 4 * ALU, 4, 0),
    # LDR; LDR; LDR, each address from r1: the 2nd and 3rd pipeline (TRM: "four cycles total")
    "b_load_independent": (M4_BRACKET + LOAD + 2 * PIPELINED, 4, 0),
    # the 2nd LDR's address is the 1st's result: no pipelining
    "b_load_dependent": (M4_BRACKET + 2 * LOAD, 4, 0),
    # LDR; STR #imm (pipelined after the load: 1); STR [r1, r3] after a store: not pipelined
    "b_load_store": (M4_BRACKET + LOAD + PIPELINED + STORE_REG, 4, 0),
    # LDR; STR [r1, r3]: the register-offset store pipelines after the load
    "b_store_after_load": (M4_BRACKET + LOAD + PIPELINED, 4, 0),
    # ADDS r5; LDR [r5]: the address waits for the data-processing result
    "b_address_dependency": (M4_BRACKET + ALU + LOAD + ADDRESS_STALL, 4, 0),
    # MLA; MLA; SMLAD; SMLAD: single-cycle multiply-accumulates, chained
    "b_mac": (M4_BRACKET + 4 * MUL, 4, 0),
    "b_divide": (M4_BRACKET + 2 * DIV, 4, 0),
    # MOVS; 4 x (SUBS; BNE), three taken back to the 16-bit SUBS
    "b_loop": (M4_BRACKET + ALU + 4 * (ALU + BRANCH) + 3 * P_DIRECT, 7, 0),
    # the same to a 32-bit SUBS.W at a halfword-aligned address: each refill one more
    "b_loop_wide_target": (
        M4_BRACKET + ALU + 4 * (ALU + BRANCH) + 3 * (P_DIRECT + P_UNALIGNED_WIDE),
        7,
        0,
    ),
    # LDM of 4, STM of 2, PUSH of 4, POP of 4: 1 + N each, never pipelined
    "b_multiple": (M4_BRACKET + (MULTI + 4) + (MULTI + 2) + (MULTI + 4) + (MULTI + 4), 4, 0),
    # PUSH {r4, lr}; POP {r4, pc}: the POP is the return, a load to the PC (P_LOAD) in place
    # of the bracket's bx lr (BRANCH + P_REGISTER)
    "b_pop_pc": (
        M4_BRACKET - (BRANCH + P_REGISTER) + (MULTI + 2) + (MULTI + 2) + P_LOAD,
        4,
        0,
    ),
    # CMP; IT (folded after a 16-bit instruction); MOV; CMP.W; IT (after a 32-bit one); MOV
    "b_it": (M4_BRACKET + ALU + IT_FOLDED + ALU + ALU + IT + ALU, 4, 0),
    "b_vfp": (M4_BRACKET + VLDR + VADD + VMUL + VFMA + VDIV + VSTR, 4, 0),
    # VLDM of 4 singles, VPUSH of 2, VPOP of 2: 1 + N each
    "b_vfp_multiple": (M4_BRACKET + (MULTI + 4) + (MULTI + 2) + (MULTI + 2), 4, 0),
    # TBB (two of load, one of add) then the reload to the 16-bit bx lr: one more taken; its
    # table byte is read from the code's memory (flash on netduinoplus2)
    "b_table_branch": (M4_BRACKET + TABLE_BRANCH + P_LOAD, 5, 1),
    # one LDR of read-only data: from flash on netduinoplus2
    "b_flash_load": (M4_BRACKET + LOAD, 4, 1),
}

# ---- Cortex-M55: LLVM ARMScheduleM55.td (issue, latencies, beats), Armv8.1-M LOB -------------
ISSUE = 1  # every scalar instruction takes one issue cycle
LOAD_LATENCY = MUL_LATENCY = 2  # CX: Latency 2, no ALU forwarding
FP_LATENCY = 2  # M55WriteFloatE3 (VADD.F32)
FP_DIV_LATENCY = 16  # WriteFPDIV32
BEATS = 2  # each MVE instruction: two beats on its pipeline
REFILL = 3  # MispredictPenalty
LE_REFILL = 0  # a loop-back LE with cached loop information
#: as M4_BRACKET: mark's bx lr, bl bench, the benchmark's bx lr, bl mark, each 1 + REFILL
#: (when the benchmark's bx lr takes its own cycle; some benchmarks hide it, below)
M55_BRACKET_WITHOUT_RETURN = 3 * (ISSUE + REFILL) + REFILL

M55_EXPECTED: dict[str, int] = {
    "m_empty": M55_BRACKET_WITHOUT_RETURN + ISSUE,
    # ADDS+MOVS dual-issue, ADDS+MOVS dual-issue, ADD.W alone, then the bx lr alone (a
    # 32-bit instruction before it: no pair)
    "m_dual_issue": M55_BRACKET_WITHOUT_RETURN + 1 + 1 + ISSUE + ISSUE,
    # LDR r2 (1); ADD.W r4, r2 waits for the load: issues at 2, ends at 3; LDR r3 (1);
    # ADD.W r5, r2 (1); bx lr (1)
    "m_load_use": M55_BRACKET_WITHOUT_RETURN + ISSUE + LOAD_LATENCY + ISSUE + ISSUE + ISSUE,
    # three chained MUL.W: issued at 0, 2, 4 (latency 2), the last ends at 5; bx lr (1)
    "m_mul_chain": M55_BRACKET_WITHOUT_RETURN + 2 * MUL_LATENCY + ISSUE + ISSUE,
    # SDIV (LLVM: latency 2) then its consumer: 1 + 2; bx lr (1)
    "m_divide": M55_BRACKET_WITHOUT_RETURN + ISSUE + 2 + ISSUE,
    # LDM of 4 over the 64-bit interface: 1 + 4 / 2; bx lr (1)
    "m_multiple": M55_BRACKET_WITHOUT_RETURN + ISSUE + 2 + ISSUE,
    # VLDR; VADD.I32; VMUL.F32; VSTR on four pipelines, each overlapping the previous one's
    # second beat (LLVM's example: 5 cycles); the bx lr issues in the store's second beat (0)
    "m_mve_pipes": M55_BRACKET_WITHOUT_RETURN + 5 + 0,
    # VLDR; VLDRB on the same pipeline (no overlap); VADD; VSTR (LLVM's example: 6 cycles)
    "m_mve_same_pipe": M55_BRACKET_WITHOUT_RETURN + 6 + 0,
    # two VMLADAVA into r2: the second waits for the first's accumulator (latency 2) and its
    # pipeline: issued at 0 and 2, ends at 4; bx lr in its second beat (0)
    "m_mve_reduce": M55_BRACKET_WITHOUT_RETURN + BEATS + BEATS + 0,
    # VADD s0; VADD s0 (waits 2); VDIV s2, s0 (waits 2, latency 16); VADD s3, s2 (waits 16):
    # issued at 0, 2, 4, 20, ends at 21; bx lr (1)
    "m_vfp_chain": M55_BRACKET_WITHOUT_RETURN + 2 * FP_LATENCY + FP_DIV_LATENCY + ISSUE + ISSUE,
    # MOV.W; 3 x (SUBS.W; BNE.W), two taken (each + REFILL), the fall-through to bx lr
    "m_branch_loop": M55_BRACKET_WITHOUT_RETURN + ISSUE + 3 * 2 * ISSUE + 2 * REFILL + ISSUE,
    # PUSH {r7, lr} (1 + 2/2); MOV.W; DLS; 3 x (ADD.W; LE), the LE loop-backs cost no
    # refill; POP {r7, pc} (1 + 2/2) returns (REFILL) in place of the bracket's bx lr
    "m_low_overhead_loop": (
        M55_BRACKET_WITHOUT_RETURN
        - REFILL
        + 2
        + ISSUE
        + ISSUE
        + 3 * 2 * ISSUE
        + 2 * LE_REFILL
        + 2
        + REFILL
    ),
}


M4_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]


@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "netduinoplus2"])
def test_cortex_m4_microbenchmarks_reproduce_the_trm_counts(board: str, tmp_path: Path) -> None:
    elf = _build(board, "bench_m4.S", M4_FLAGS, tmp_path)
    first = _intervals(elf, board, tmp_path / "run1.trace")
    assert first == _intervals(elf, board, tmp_path / "run2.trace"), "deterministic"
    ws = sum(r.wait_states for r in get_board(board).wait_states)
    assert ws == (FLASH_WS if board == "netduinoplus2" else 0)
    names = list(M4_EXPECTED)
    assert len(first) == len(names)
    got = {name: counts["estimated_cycles"] for name, counts in zip(names, first, strict=True)}
    # on netduinoplus2 code and read-only data sit in flash: each taken branch refetches from
    # it and each data read from it waits, FLASH_WS cycles each
    expected = {
        name: cycles + ws * (taken + flash_reads)
        for name, (cycles, taken, flash_reads) in M4_EXPECTED.items()
    }
    assert got == expected
    taken = {name: counts["branches_taken"] for name, counts in zip(names, first, strict=True)}
    assert taken == {name: t for name, (_, t, _) in M4_EXPECTED.items()}


@pytest.mark.qemu
def test_cortex_m55_microbenchmarks_reproduce_the_model_counts(tmp_path: Path) -> None:
    flags = ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"]
    elf = _build("mps3-an547", "bench_m55.S", flags, tmp_path)
    first = _intervals(elf, "mps3-an547", tmp_path / "run1.trace")
    assert first == _intervals(elf, "mps3-an547", tmp_path / "run2.trace"), "deterministic"
    names = list(M55_EXPECTED)
    assert len(first) == len(names)
    got = {name: counts["estimated_cycles"] for name, counts in zip(names, first, strict=True)}
    assert got == M55_EXPECTED


# ---- layout: an instruction across a page end costs what it costs inside a page ----------------

#: bench_layout.S's loop: MOVS; 4 x (MULS; ADDS; ADD.W; SUBS; BNE), three taken
M4_LAYOUT = M4_BRACKET + ALU + 4 * (MUL + ALU + ALU + ALU + BRANCH) + 3 * P_DIRECT
#: MOVS and MULS pair (a MOV immediate beside an independent 16-bit instruction); ADDS
#: alone (after a pair); ADD.W waits for the MULS (latency 2): issued at 2; SUBS at 3, BNE
#: beside it: 4 cycles. Each loop-back block: MULS and ADDS pair, ADD.W at 2, SUBS and BNE
#: at 3: 4 cycles and the refill; then the bx lr (1)
M55_LAYOUT = M55_BRACKET_WITHOUT_RETURN + 4 + 3 * (4 + REFILL) + ISSUE
#: Cortex-M33 (test_timing_m33_m7.py's sources): MOVS (1); MULS (16-bit, flag-setting: 2,
#: latency 2); ADDS (1); ADD.W at the MULS's result (1); SUBS (1), BNE beside it: 6 cycles.
#: Each loop-back block: MULS (2), ADDS, ADD.W, SUBS and BNE beside it: 5, and a refill of 2
#: (the flags set right before the branch). The bracket: mark's bx lr (1 + 2), bl (1 + 1),
#: the bx lr (1 + 2), bl mark (1 + 1)
M33_LAYOUT = 10 + 6 + 3 * (5 + 2)
#: Cortex-M7 (test_timing_m33_m7.py's sources): MOVS and MULS pair, ADDS, ADD.W at the MULS's
#: result (2) with SUBS beside it, BNE: 4 cycles; each loop-back block: MULS + ADDS, ADD.W +
#: SUBS, BNE: 4. The BNE is taken unpredicted (8), taken twice predicted, then falls through
#: predicted taken (8); the bx lr (1). The bracket's four branches, each seen once,
#: mispredict: 3 x (1 + 8) + 8
M7_LAYOUT = 3 * (1 + 8) + 8 + 4 + 3 * 4 + 2 * 8 + 1
LAYOUT_EXPECTED = {
    "cortex-m4": M4_LAYOUT,
    "cortex-m7": M7_LAYOUT,
    "cortex-m33": M33_LAYOUT,
    "cortex-m55": M55_LAYOUT,
}
#: LAYOUT_PAD of each layout: the loop's ADD.W across a page end, or inside a page
LAYOUT_PADS = {"across a page end": 1016, "inside a page": 256}
#: taken branches in the interval: the bracket's four and three loop-backs
LAYOUT_TAKEN = 7


@pytest.mark.qemu
@pytest.mark.parametrize("board", [b.name for b in list_boards() if b.cpu in CORES])
def test_an_instruction_across_a_page_end_costs_what_it_costs_inside_a_page(
    board: str, tmp_path: Path
) -> None:
    """QEMU 7.2 gives an instruction that ends 2 bytes before a page end the size of the
    halfword its translator peeked at past it: sized so, the block ends at the page, the
    next one seems reached by an exception, and the 16-bit instruction decodes as a 32-bit
    one. Lengths come from the first halfword; the two blocks QEMU splits the loop into are
    priced as the one run they are."""
    descriptor = get_board(board)
    counts = {}
    for layout, pad in LAYOUT_PADS.items():
        elf = _build(
            board,
            "bench_layout.S",
            list(descriptor.gcc_cpu_flags),
            tmp_path,
            f"-DLAYOUT_PAD={pad}",
            name=f"{board}-{pad}",
        )
        wide = _symbols(elf)["l_straddle_wide"]
        assert (wide % 1024 == 1022) is (pad == 1016), hex(wide)  # the layout is as meant
        (interval,) = _intervals(elf, board, tmp_path / f"{pad}.trace")
        counts[layout] = interval
    straddled, inside = counts.values()
    assert straddled == inside
    ws = sum(r.wait_states for r in descriptor.wait_states)
    assert inside["estimated_cycles"] == LAYOUT_EXPECTED[descriptor.cpu] + ws * LAYOUT_TAKEN
    assert inside["branches_taken"] == LAYOUT_TAKEN


#: every number of the data files, as the derivations above assume them: a change of the
#: data file fails here until the microbenchmarks' expectations are worked out again
PINNED = {
    "cortex-m4": {
        "cost.alu": 1, "cost.mul": 1, "cost.div": 7, "cost.load": 2, "load_pipelined": 1,
        "cost.store": 1, "store_register_offset": 2, "address_dependency": 1,
        "cost.load_dual": 3, "cost.store_dual": 3, "cost.load_multi": 1, "cost.store_multi": 1,
        "multi_per_register": 1, "multi_registers_per_cycle": 1, "cost.branch": 1,
        "cost.branch_reg": 1, "refill_direct": 1, "refill_register": 2, "refill_load": 3,
        "refill_unaligned_wide": 1, "refill_max": 3, "refill_loop_end": 0, "cost.load_pc": 2,
        "cost.table_branch": 3, "cost.loop_end": 1, "cost.it": 1, "it_folded": 0,
        "cost.nop": 1, "cost.system": 2, "cost.barrier": 1, "cost.other": 1, "cost.fp_alu": 1,
        "cost.fp_mul": 1, "cost.fp_mac": 3, "cost.fp_div": 14, "cost.fp_load": 2,
        "fp_load_double": 3, "cost.fp_store": 2, "fp_store_double": 3, "cost.fp_load_multi": 1,
        "cost.fp_store_multi": 1, "fp_multi_per_register": 1, "cost.fp_move": 1,
        "fp_move_double": 2, "cost.fp_system": 1, "exception_entry": 12,
    },
    "cortex-m55": {
        "cost.alu": 1, "latency.alu": 1, "cost.mul": 1, "latency.mul": 2, "cost.div": 1,
        "latency.div": 2, "cost.load": 1, "latency.load": 2, "cost.store": 1,
        "store_register_offset": 1, "load_pipelined": 1, "address_dependency": 0,
        "cost.load_dual": 1, "latency.load_dual": 2, "cost.store_dual": 1,
        "cost.load_multi": 1, "latency.load_multi": 2, "cost.store_multi": 1,
        "multi_per_register": 1, "multi_registers_per_cycle": 2, "cost.branch": 1,
        "cost.branch_reg": 1, "cost.load_pc": 1, "cost.table_branch": 1, "refill_direct": 3,
        "refill_register": 3, "refill_load": 3, "refill_unaligned_wide": 0, "refill_max": 3,
        "cost.loop_end": 1, "refill_loop_end": 0, "cost.it": 1, "it_folded": 0, "cost.nop": 1,
        "cost.system": 1, "cost.barrier": 1, "cost.other": 1, "dual_issue": 1,
        "cost.fp_alu": 1, "latency.fp_alu": 2, "latency_double.fp_alu": 15, "cost.fp_mul": 1,
        "latency.fp_mul": 2, "latency_double.fp_mul": 21, "cost.fp_mac": 1,
        "latency.fp_mac": 2, "latency_double.fp_mac": 24, "cost.fp_div": 1,
        "latency.fp_div": 16, "latency_double.fp_div": 30, "cost.fp_load": 1,
        "fp_load_double": 1, "latency.fp_load": 2, "cost.fp_store": 1, "fp_store_double": 1,
        "cost.fp_load_multi": 1, "cost.fp_store_multi": 1, "fp_multi_per_register": 1,
        "cost.fp_move": 1, "latency.fp_move": 2, "fp_move_double": 1, "cost.fp_system": 1,
        "mve_beats": 2, "cost.mve_load": 2, "latency.mve_load": 1, "cost.mve_store": 2,
        "store_data_advance": 1, "cost.mve_int": 2, "latency.mve_int": 1,
        "cost.mve_fpmul": 2, "latency.mve_fpmul": 2, "cost.mve_sys": 1, "exception_entry": 12,
    },
    **PINNED_NEW_CORES,
}  # fmt: skip


@pytest.mark.parametrize("core", CORES)
def test_data_file_is_pinned_and_cites_every_number(core: str) -> None:
    model = load_model(core)
    assert {e.name: e.value for e in model.entries} == PINNED[core]
    raw = json.loads((Path(__file__).parents[1] / "src" / "aidge_deploy" / "profiling"
                      / "timing" / f"{core}.json").read_text())  # fmt: skip
    cited = set(raw["sources"])
    for entry in model.entries:
        # each number names its table and row in one of the file's sources, or says it is
        # an assumption
        assert any(source in entry.source for source in cited) or entry.source.startswith(
            "assumption"
        ), entry
    assert model.assumptions and model.leaves_out
    table = model.plugin_table()
    assert table.splitlines()[1:3] == [f"engine {model.engine}", f"core {core}"]
    assert len(table.splitlines()) == 3 + len(model.entries)


# ---- the model in a deploy: estimated cycles per inference and per layer -----------------------


@pytest.fixture(scope="module")
def modelled(export_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """Two deploys of one tiny-CNN benchmark export on mps2-an386 (the second with a report)."""
    if QEMU is None or GCC is None:
        missing("qemu-system-arm or arm-none-eabi-gcc is not installed")
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=6, nb_warmup=1)
    bundle = tmp_path_factory.mktemp("timing_report") / "bundle"
    first = aidge_deploy.deploy(artifact, DeployConfig())
    second = aidge_deploy.deploy(artifact, DeployConfig(report_dir=bundle))
    return first, second


@pytest.mark.qemu
@pytest.mark.slow
def test_profile_reports_estimated_cycles_per_inference_and_layer(
    modelled: tuple[Any, Any],
) -> None:
    first, second = modelled
    metric = first.metric("estimated_cycles")
    assert metric is not None and metric.provenance == Provenance.ESTIMATED
    assert metric.unit == "cycles" and "estimated (M4 timing model)" in metric.description
    # deterministic across two runs, per inference and per layer
    assert first.metrics["estimated_cycles"] == second.metrics["estimated_cycles"]
    assert len(first.metrics["estimated_cycles"]) == 6
    layers = {layer.name: layer.counters["estimated_cycles"] for layer in first.layers}
    assert layers == {layer.name: layer.counters["estimated_cycles"] for layer in second.layers}
    assert len(layers) == 4 and all(v > 0 for v in layers.values())
    # the time is estimated cycles ÷ the core clock, instructions still beside it
    latency = first.metric("latency")
    assert latency is not None and latency.provenance == Provenance.ESTIMATED
    assert "estimated (M4 timing model) at 25 MHz" in latency.description
    assert latency.value == pytest.approx(metric.value / 25e6 * 1e3)
    instructions = first.metric("emulated_instructions")
    assert instructions is not None and instructions.value < metric.value  # CPI > 1
    assert first.timing.derived_from == "estimated_cycles"
    # reconciled as instructions are: the layers add up to most of the inference, the rest
    # (the calls between them and their timing) is outside them, in both figures
    est_share = sum(layers.values()) / metric.value
    instr = {layer.name: layer.counters["emulated_instructions"] for layer in first.layers}
    instr_share = sum(instr.values()) / instructions.value
    assert 0.9 < est_share < 1.0 and 0.9 < instr_share < 1.0
    for name, cycles in layers.items():  # every layer costs at least a cycle an instruction
        assert cycles >= instr[name] * 0.99
    model = first.metrics["timing_model"]
    assert model["model"] == "M4 timing model" and model["assumptions"] and model["leaves_out"]


@pytest.mark.qemu
@pytest.mark.slow
def test_timing_cpi1_keeps_one_cycle_per_instruction(export_factory: Any) -> None:
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=6, nb_warmup=1)
    result = aidge_deploy.deploy(artifact, DeployConfig(timing="cpi1"))
    assert result.metric("estimated_cycles") is None and result.metrics["timing_model"] is None
    latency = result.metric("latency")
    assert latency is not None and "estimated at 25 MHz, CPI = 1" in latency.description
    instructions = result.metric("emulated_instructions")
    assert instructions is not None
    assert latency.value == pytest.approx(instructions.value / 25e6 * 1e3, rel=1e-3)
    with pytest.raises(ConfigError, match="Unknown timing"):
        DeployConfig(timing="cycle-accurate")


@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.browser
def test_report_shows_estimated_cycles_with_label_and_assumptions(
    modelled: tuple[Any, Any], chromium: Any
) -> None:
    _, second = modelled
    report = Path(second.report_dir) / "report.html"
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(report.as_uri())
        card = page.locator('[data-metric="estimated_cycles"]')
        assert "estimated cycles / inference" in card.inner_text().lower()
        assert "estimated (M4 timing model)" in card.inner_text()
        section = page.locator('[data-timing-model="cortex-m4"]')
        text = section.inner_text()
        assert "Estimated cycles: M4 timing model" in text and "Assumptions" in text
        model = load_model("cortex-m4")
        assert all(a in text for a in model.assumptions)
        assert "leaves out" in text and "errs high" in text
        assert "estimated (M4 timing model) at 25 MHz" in page.content()
        screenshot(page, "report_estimated_cycles")
    finally:
        page.close()


def test_times_of_different_models_are_never_compared() -> None:
    """A timing model's time against one cycle per instruction is no regression: the history
    gate and ``compare`` leave the time figures out (with a warning) and compare the rest,
    while a bundle from before the models still compares with ``--timing cpi1``."""
    before = Comparability("emulated", "0.10.1")  # recorded before the models: CPI = 1
    cpi1 = Comparability("emulated", "0.10.1", time_model="CPI = 1")
    model = Comparability("emulated", "0.10.1", time_model="M4 timing model")
    assert before.blocking_differences(cpi1) == []
    # an instrument (comparability.Effect.FIGURES): its figures are left out, the rest compared
    assert before.blocking_differences(model) == []
    assert [d.describe() for d in before.differences(model)] == [
        "emulated time model (--timing) CPI = 1 → M4 timing model"
    ]
    assert Comparability("host", "1").blocking_differences(Comparability("host", "1")) == []
    diff = DimensionDiff(
        "time_model", DimensionKind.INFORMATIVE, "time model", "CPI = 1", "M4 timing model"
    )
    rule = ThresholdRule("*", Direction.SMALLER, max_regression_pct=1.0)
    base = {
        "latency": Figure(0.6, "ms", "estimated", 4e-5),
        "emulated_instructions": Figure(100, "instructions", "emulated"),
    }
    cand = {
        "latency": Figure(1.0, "ms", "estimated", 4e-5),
        "emulated_instructions": Figure(100, "instructions", "emulated"),
    }
    evaluation = evaluate_figures(base, cand, Thresholds((rule,)), differences=[diff])
    by_key = {c.key: c for c in evaluation.checks}
    assert (
        by_key["latency"].status is Verdict.WARN and "different models" in by_key["latency"].message
    )
    assert by_key["emulated_instructions"].status is Verdict.PASS
