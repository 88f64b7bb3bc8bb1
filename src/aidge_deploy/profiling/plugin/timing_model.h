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

enum tm_engine { TM_M4, TM_M55 };

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
    int prev_paired;          /* m55: prev was the second of a dual-issued pair */
    int32_t prev_issue;
    int32_t now, end;
    int32_t ready_core[16];
    int32_t ready_fp[32];
    int32_t pipe_busy[4];
};

/* Load "name value" lines; 0 on success, else -1 with a message on err. */
int tm_load(struct timing_model *m, const char *path, FILE *err);
void tm_reset(struct tm_state *st);
/* Cycles of ``in`` after what ``st`` holds; updates ``st``. */
unsigned tm_cost(const struct timing_model *m, struct tm_state *st, const struct insn_info *in);
/* Pipeline refill after a taken control transfer by ``branch`` to ``target`` (its first
 * instruction) at address ``target_addr``. */
unsigned tm_refill(const struct timing_model *m, const struct insn_info *branch,
                   const struct insn_info *target, uint64_t target_addr);
/* How much cheaper or dearer the block ``next`` (``n_next`` instructions) is right after the
 * block ``prev`` than on its own (its static cost assumed nothing before it): the cycles of
 * the two priced as one run, less each priced alone. Exact for code QEMU split into blocks
 * where nothing branches (a page end, the block-size limit): the sum is then what the
 * unsplit block costs, wherever the split falls. */
int tm_entry_delta(const struct timing_model *m, const struct insn_info *prev, size_t n_prev,
                   const struct insn_info *next, size_t n_next);

#endif
