/*
 * timing_model: the estimated cycles of decoded instructions, from a core's cost table.
 *
 * The numbers live in a data file per core (aidge_deploy/profiling/timing/<core>.json, each
 * citing its table and row); the deploy side writes them as "name value" lines and passes the
 * file to the plugin (timing=FILE). This file holds only the rules that combine them, per
 * engine:
 *
 *   m4   the Cortex-M4 TRM's rules: each instruction costs its Table 3-1 / FPU-table cycles;
 *        a single load or store right after a single load whose result it does not use for
 *        its address is pipelined (load_pipelined); a load or store whose address uses the
 *        result of the data-processing instruction just before stalls (address_dependency);
 *        an IT after a 16-bit instruction folds (it_folded).
 *   m55  an in-order scoreboard after LLVM's Cortex-M55 model: each instruction issues when
 *        its operands are ready (per-class result latencies, within a translation block) and
 *        its pipeline is free; MVE instructions take two beats on their pipeline and the next
 *        MVE instruction on another pipeline overlaps the second beat; two 16-bit
 *        instructions dual-issue when one of them is dual-issuable and they are independent.
 *   m33  an in-order scoreboard (timing_inorder.c): one instruction a cycle, result latencies
 *        per class (shifted operands, two-stage DSP operations, multiplies and loads later
 *        than the ALU, a multiply's accumulator and a store's data read late), IT and 16-bit
 *        branches issued beside the 16-bit instruction before them, a taken branch's refill
 *        one cycle shorter when its flags were not set by the instruction right before it.
 *   m7   a dual-issue in-order scoreboard (timing_inorder.c): two instructions a cycle when
 *        the pair's pipelines allow it (one store, one multiply, two loads only to different
 *        banks, DSP and shifted operations in the older slot only, single-issue multi-cycle
 *        instructions), operands read early by the address generator and the shifter, and a
 *        branch predictor: the plugin keeps a 2-bit counter and the last target per branch
 *        (tm_predict); a mispredicted branch pays the penalty, a predicted one nothing.
 *
 * Costs are whole cycles per instruction, computed at translation time for the instructions
 * of a block in order; the dynamic parts (taken branches and their pipeline refill, the first
 * instruction of a block entered sequentially, exception entry, memory wait states) are
 * priced by the plugin as they happen, with the helpers below.
 */
#ifndef AIDGE_TIMING_MODEL_H
#define AIDGE_TIMING_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "thumb_decode.h"

enum tm_engine { TM_M4, TM_M55, TM_M33, TM_M7 };

enum tm_param {
    TP_STORE_REGISTER_OFFSET,
    TP_LOAD_PIPELINED,
    TP_ADDRESS_DEPENDENCY,
    TP_MULTI_PER_REGISTER,
    TP_FP_MULTI_PER_REGISTER,
    TP_FP_LOAD_DOUBLE,
    TP_FP_STORE_DOUBLE,
    TP_FP_MOVE_DOUBLE,
    TP_MULTI_REGISTERS_PER_CYCLE,
    TP_IT_FOLDED,
    TP_REFILL_DIRECT,
    TP_REFILL_REGISTER,
    TP_REFILL_LOAD,
    TP_REFILL_UNALIGNED_WIDE,
    TP_REFILL_MAX,
    TP_REFILL_LOOP_END,
    TP_EXCEPTION_ENTRY,
    TP_DUAL_ISSUE,
    TP_MVE_BEATS,
    TP_STORE_DATA_ADVANCE,
    TP_ACC_ADVANCE,            /* a multiply's accumulator is read this much later */
    TP_FP_ACC_ADVANCE,         /* a floating-point MAC's accumulator, likewise */
    TP_FP_STORE_DATA_ADVANCE,  /* a VSTR's data, likewise */
    TP_EARLY_READ,             /* extra latency to an early read (address, shifter) from any
                                  producer but a plain ALU operation */
    TP_LATENCY_SHIFTED,        /* result latency of an operation with a shifted operand 2 */
    TP_SHIFT_LSL_FREE,         /* 1: ... except a left shift */
    TP_LATENCY_DSP_LATE,       /* result latency of the two-stage DSP operations */
    TP_LATENCY_LOAD_SUBWORD,   /* result latency of a byte or halfword load */
    TP_LOAD_TO_MUL,            /* extra latency from a load to a multiply's operand */
    TP_MUL_SETS_FLAGS,         /* issue cycles of a flag-setting 16-bit MULS */
    TP_FP_MAC_BLOCKS,          /* cycles after an FP MAC during which ... */
    TP_FP_MAC_BLOCKS_ALL,      /* 1: ... no FP instruction issues, 0: no FP ALU one */
    TP_REFILL_FLAGS_READY,     /* refill of a taken direct branch whose flags were not set by
                                  the instruction right before it */
    TP_PREDICTOR,              /* 1: a dynamic branch predictor (tm_predict) */
    TP_MISPREDICT,             /* cycles lost to a mispredicted branch */
    TP_FP_MULTI_REGISTERS_PER_CYCLE, /* VLDM/VSTM registers moved a cycle (0: one) */
    TP_COUNT
};

struct timing_model {
    enum tm_engine engine;
    char core[64];
    uint16_t cost[IC_COUNT];     /* cycles (m4) or issue cycles (m55) of each class */
    uint16_t latency[IC_COUNT];  /* m55: cycles from issue to a usable result */
    uint16_t latency_double[IC_COUNT]; /* m55: double-precision floating point */
    uint16_t param[TP_COUNT];
};

/* What one instruction leaves for the next (a block's instructions in order). */
struct tm_state {
    struct insn_info prev;
    int prev_valid;
    int prev_paired;          /* m55, m33, m7: prev was the second of a dual-issued pair */
    int32_t prev_issue;
    int32_t now, end;
    int32_t ready_core[16];
    int32_t ready_early[16];  /* m33, m7: when an early read (address, shifter) can have it */
    uint16_t loaded;          /* m7: core registers last written by a load */
    int32_t ready_fp[32];
    int32_t pipe_busy[4];
    int32_t fp_alu_free, fp_free; /* m33, m7: FP issue blocked after a MAC until then */
};

/* A dynamic branch predictor (m7): per branch, a 2-bit counter and its last target; no
 * capacity limit. */
struct tm_predictor {
    uint64_t *branch;
    uint64_t *target;
    uint8_t *counter;
    size_t capacity, used;
};

/* Load "name value" lines; 0 on success, else -1 with a message on err. */
int tm_load(struct timing_model *m, const char *path, FILE *err);
void tm_reset(struct tm_state *st);
/* Cycles of ``in`` after what ``st`` holds; updates ``st``. */
unsigned tm_cost(const struct timing_model *m, struct tm_state *st, const struct insn_info *in);
/* Pipeline refill after a taken control transfer by ``branch`` to ``target`` (its first
 * instruction) at address ``target_addr``; ``before`` is the instruction right before the
 * branch in its block (NULL: the branch opens the block). */
unsigned tm_refill(const struct timing_model *m, const struct insn_info *before,
                   const struct insn_info *branch, const struct insn_info *target,
                   uint64_t target_addr);
/* With a predictor (TP_PREDICTOR): the cycles lost by the control transfer at
 * ``branch_addr`` that was ``taken`` (to ``target``) or fell through, and the predictor
 * updated; 0 when it was predicted. */
unsigned tm_predict(const struct timing_model *m, struct tm_predictor *p, uint64_t branch_addr,
                    int taken, uint64_t target);
/* The engines of timing_inorder.c */
unsigned tm_cost_m33(const struct timing_model *m, struct tm_state *st, const struct insn_info *in);
unsigned tm_cost_m7(const struct timing_model *m, struct tm_state *st, const struct insn_info *in);
unsigned tm_base_cost(const struct timing_model *m, const struct insn_info *in);
/* How much cheaper or dearer the block ``next`` (``n_next`` instructions) is right after the
 * block ``prev`` than on its own (its static cost assumed nothing before it): the cycles of
 * the two priced as one run, less each priced alone. Exact for code QEMU split into blocks
 * where nothing branches (a page end, the block-size limit): the sum is then what the
 * unsplit block costs, wherever the split falls. */
int tm_entry_delta(const struct timing_model *m, const struct insn_info *prev, size_t n_prev,
                   const struct insn_info *next, size_t n_next);

#endif
