/*
 * timing_inorder.c: the Cortex-M33 and Cortex-M7 engines of the timing model (see
 * timing_model.h), and the M7's branch predictor.
 *
 * Both are in-order scoreboards over one translation block's instructions, in the
 * m55 engine's terms: ``now`` is the first cycle the next instruction may issue at, each
 * register holds the cycle its value is ready, an instruction issues when its operands
 * are ready (and, on the M7, beside the one before it when the pair's pipelines allow),
 * and its cost is how much later the last of the block's work ends. What differs per core
 * is in the data file (the latencies and the parameters the rules read); the rules are:
 *
 *   operands   a register is read at the ALU, except the registers of an address and the
 *              shifter's operand (``early``): those need it a cycle earlier (early_read)
 *              unless a plain ALU operation produced it; a multiply's accumulator
 *              (acc_advance) and a store's data (store_data_advance) are read later.
 *   results    each class's latency, later for shifted operands (latency_shifted, the left
 *              shift excepted with shift_lsl_free), two-stage DSP operations
 *              (latency_dsp_late) and byte/halfword loads (latency_load_subword); a load or
 *              store's base writeback is ready as an ALU result.
 */
#include <stdlib.h>
#include <string.h>

#include "timing_model.h"

static int32_t max32(int32_t a, int32_t b) { return a > b ? a : b; }

static int is_load(const struct insn_info *in) {
    return in->cls == IC_LOAD || in->cls == IC_FP_LOAD;
}

static int is_store(const struct insn_info *in) {
    return in->cls == IC_STORE || in->cls == IC_FP_STORE;
}

static int is_fp_arith(const struct insn_info *in) {
    return in->cls == IC_FP_ALU || in->cls == IC_FP_MUL || in->cls == IC_FP_MAC ||
           in->cls == IC_FP_DIV;
}

static int is_fp(const struct insn_info *in) {
    return is_fp_arith(in) || in->cls == IC_FP_LOAD || in->cls == IC_FP_STORE ||
           in->cls == IC_FP_MOVE || in->cls == IC_FP_LOAD_MULTI ||
           in->cls == IC_FP_STORE_MULTI || in->cls == IC_FP_SYSTEM;
}

/* a plain ALU result: the M7 forwards it to an early read in the next cycle */
static int is_plain_alu(const struct insn_info *in) {
    return in->cls == IC_ALU && !(in->flags & (IF_DSP | IF_SHIFTED));
}

/* when ``in``'s operands are ready */
static int32_t operands_ready(const struct timing_model *m, const struct tm_state *st,
                              const struct insn_info *in) {
    int32_t t = 0;
    uint16_t data = is_store(in) || in->cls == IC_STORE_DUAL ? (uint16_t)(in->src & ~in->addr) : 0;
    uint16_t early = (uint16_t)(in->early | in->addr);
    for (int r = 0; r < 15; ++r) { /* PC is always ready */
        uint16_t bit = (uint16_t)(1u << r);
        if (!(in->src & bit) && !(early & bit)) {
            continue;
        }
        int32_t need = (early & bit) ? st->ready_early[r] : st->ready_core[r];
        if (in->acc & bit) {
            need -= m->param[TP_ACC_ADVANCE];
        } else if (data & bit) {
            need -= m->param[TP_STORE_DATA_ADVANCE];
        } else if (in->cls == IC_MUL && (st->loaded & bit)) {
            need += m->param[TP_LOAD_TO_MUL];
        }
        t = max32(t, need);
    }
    uint32_t fp_acc = in->cls == IC_FP_MAC ? (in->fsrc & in->fdst) : 0;
    for (int s = 0; s < 32; ++s) {
        uint32_t bit = 1u << s;
        if (!(in->fsrc & bit)) {
            continue;
        }
        int32_t need = st->ready_fp[s];
        if (fp_acc & bit) {
            need -= m->param[TP_FP_ACC_ADVANCE];
        } else if (in->cls == IC_FP_STORE || in->cls == IC_FP_STORE_MULTI) {
            need -= m->param[TP_FP_STORE_DATA_ADVANCE];
        }
        t = max32(t, need);
    }
    return t;
}

/* the first cycle the FP unit takes ``in`` after a MAC */
static int32_t fp_free_for(const struct tm_state *st, const struct insn_info *in) {
    int32_t t = is_fp(in) ? st->fp_free : 0;
    return in->cls == IC_FP_ALU ? max32(t, st->fp_alu_free) : t;
}

static uint16_t result_latency(const struct timing_model *m, const struct insn_info *in,
                               unsigned issue) {
    uint16_t lat = (in->flags & IF_DOUBLE) && m->latency_double[in->cls]
                       ? m->latency_double[in->cls]
                       : m->latency[in->cls];
    if (lat == 0) {
        lat = (uint16_t)issue;
    }
    if ((in->flags & IF_SUBWORD) && in->cls == IC_LOAD && m->param[TP_LATENCY_LOAD_SUBWORD]) {
        lat = m->param[TP_LATENCY_LOAD_SUBWORD];
    }
    if ((in->flags & IF_SHIFTED) &&
        !((in->flags & IF_SHIFT_LSL) && m->param[TP_SHIFT_LSL_FREE]) &&
        m->param[TP_LATENCY_SHIFTED] > lat) {
        lat = m->param[TP_LATENCY_SHIFTED];
    }
    if ((in->flags & IF_DSP_LATE) && m->param[TP_LATENCY_DSP_LATE] > lat) {
        lat = m->param[TP_LATENCY_DSP_LATE];
    }
    return lat;
}

/* record ``in``, issued at ``t`` for ``issue`` cycles, and return its cost */
static unsigned retire(const struct timing_model *m, struct tm_state *st,
                       const struct insn_info *in, int32_t t, unsigned issue, int paired) {
    uint16_t lat = result_latency(m, in, issue);
    int32_t early_extra = is_plain_alu(in) ? 0 : m->param[TP_EARLY_READ];
    /* a load's or store's base writeback comes from the address generator: an ALU result */
    uint16_t writeback = (uint16_t)(in->dst & in->addr);
    for (int r = 0; r < 15; ++r) {
        uint16_t bit = (uint16_t)(1u << r);
        if (!(in->dst & bit)) {
            continue;
        }
        if (writeback & bit) {
            st->ready_core[r] = st->ready_early[r] = t + 1;
            st->loaded &= (uint16_t)~bit;
            continue;
        }
        st->ready_core[r] = t + lat;
        st->ready_early[r] = t + lat + early_extra;
        if (in->cls == IC_LOAD || in->cls == IC_LOAD_DUAL || in->cls == IC_LOAD_MULTI) {
            st->loaded |= bit;
        } else {
            st->loaded &= (uint16_t)~bit;
        }
    }
    for (int s = 0; s < 32; ++s) {
        if (in->fdst & (1u << s)) {
            st->ready_fp[s] = t + lat;
        }
    }
    if (in->cls == IC_FP_MAC && m->param[TP_FP_MAC_BLOCKS]) {
        int32_t until = t + 1 + m->param[TP_FP_MAC_BLOCKS];
        if (m->param[TP_FP_MAC_BLOCKS_ALL]) {
            st->fp_free = max32(st->fp_free, until);
        } else {
            st->fp_alu_free = max32(st->fp_alu_free, until);
        }
    }
    int32_t done = t + (int32_t)issue;
    st->now = paired ? max32(st->now, done) : done;
    int32_t end = max32(st->end, done);
    unsigned c = (unsigned)(end - st->end);
    st->end = end;
    st->prev = *in;
    st->prev_valid = 1;
    st->prev_paired = paired;
    st->prev_issue = t;
    return c;
}

/* ---- Cortex-M33 ------------------------------------------------------------------------- */

/* the 16-bit instructions the M33 issues beside the 16-bit one before it */
static int m33_pairs(const struct tm_state *st, const struct insn_info *in) {
    const struct insn_info *p = &st->prev;
    if (!st->prev_valid || st->prev_paired || in->size != 2 || p->size != 2 ||
        (p->flags & IF_CONTROL)) {
        return 0;
    }
    return in->cls == IC_IT || in->cls == IC_NOP || in->cls == IC_BRANCH;
}

unsigned tm_cost_m33(const struct timing_model *m, struct tm_state *st, const struct insn_info *in) {
    unsigned issue = tm_base_cost(m, in);
    if (in->cls == IC_MUL && in->size == 2 && m->param[TP_MUL_SETS_FLAGS]) {
        issue = m->param[TP_MUL_SETS_FLAGS]; /* MULS: the flags from its second stage */
    }
    int32_t ready = max32(operands_ready(m, st, in), fp_free_for(st, in));
    int32_t t = max32(st->now, ready);
    int paired = 0;
    if (m->param[TP_DUAL_ISSUE] && m33_pairs(st, in) && ready <= st->prev_issue) {
        t = st->prev_issue;
        paired = 1;
    }
    return retire(m, st, in, t, issue, paired);
}

/* ---- Cortex-M7 -------------------------------------------------------------------------- */

/* multi-cycle or whole-pipeline instructions: they issue alone */
static int m7_single_issue(const struct insn_info *in) {
    switch (in->cls) {
    case IC_LOAD_MULTI:
    case IC_STORE_MULTI:
    case IC_LOAD_DUAL:
    case IC_STORE_DUAL:
    case IC_DIV:
    case IC_SYSTEM:
    case IC_BARRIER:
    case IC_OTHER:
    case IC_FP_LOAD_MULTI:
    case IC_FP_STORE_MULTI:
    case IC_FP_SYSTEM:
    case IC_FP_DIV:
    case IC_TABLE_BRANCH:
    case IC_LOAD_PC:
        return 1;
    case IC_FP_MOVE:
    case IC_FP_LOAD:
    case IC_FP_STORE:
        return (in->flags & IF_DOUBLE) != 0;
    default:
        return 0;
    }
}

/* two loads go together only to different banks (even and odd words): same base, offsets
 * 4 apart modulo 8 */
static int m7_loads_pair(const struct insn_info *a, const struct insn_info *b) {
    return a->base != NO_BASE && a->base == b->base && !(a->dst & (1u << a->base)) &&
           ((b->offset - a->offset) & 7) == 4;
}

/* whether ``in`` issues in the same cycle as the older ``p`` */
static int m7_pairs(const struct insn_info *p, const struct insn_info *in) {
    if (m7_single_issue(p) || m7_single_issue(in)) {
        return 0;
    }
    if (is_load(p) && is_load(in) && !m7_loads_pair(p, in)) {
        return 0;
    }
    int p_mul = p->cls == IC_MUL, in_mul = in->cls == IC_MUL;
    if ((is_store(p) && is_store(in)) || (p_mul && (in_mul || is_store(in))) ||
        (is_store(p) && in_mul)) {
        return 0; /* one store port, one multiplier, which the store shares */
    }
    if ((in->flags & IF_DSP) || ((p->flags & IF_SHIFTED) && (in->flags & IF_SHIFTED)) ||
        ((p->flags & IF_DSP) && (in->flags & IF_SHIFTED))) {
        return 0; /* one SIMD/bit-field unit, in the older slot; one early shifter */
    }
    if ((p->flags & IF_CONTROL) && (in->flags & IF_CONTROL)) {
        return 0;
    }
    if ((is_fp_arith(p) && is_fp_arith(in)) ||
        ((p->cls == IC_FP_MAC || in->cls == IC_FP_MAC) &&
         (p->cls == IC_FP_LOAD || p->cls == IC_FP_STORE || p->cls == IC_FP_MOVE ||
          in->cls == IC_FP_LOAD || in->cls == IC_FP_STORE || in->cls == IC_FP_MOVE))) {
        return 0;
    }
    int movw_movt = (p->flags & IF_MOVW) && (in->flags & IF_MOVT) && p->dst == in->dst;
    if (((in->src | in->early | in->addr) & p->dst) && !movw_movt) {
        return 0;
    }
    if ((in->dst & p->dst) && !movw_movt) {
        return 0;
    }
    return !(in->fsrc & p->fdst) && !(in->fdst & p->fdst);
}

unsigned tm_cost_m7(const struct timing_model *m, struct tm_state *st, const struct insn_info *in) {
    unsigned issue = tm_base_cost(m, in);
    int32_t ready = max32(operands_ready(m, st, in), fp_free_for(st, in));
    int32_t t = max32(st->now, ready);
    int paired = 0;
    if (m->param[TP_DUAL_ISSUE] && st->prev_valid && !st->prev_paired &&
        m7_pairs(&st->prev, in) && ready <= st->prev_issue) {
        t = st->prev_issue;
        paired = 1;
    }
    return retire(m, st, in, t, issue, paired);
}

/* ---- the M7's branch predictor ---------------------------------------------------------- */

static size_t slot_of(const struct tm_predictor *p, uint64_t branch) {
    size_t i = (size_t)((branch >> 1) * 0x9E3779B97F4A7C15ull) & (p->capacity - 1);
    while (p->branch[i] && p->branch[i] != branch) {
        i = (i + 1) & (p->capacity - 1);
    }
    return i;
}

static void grow(struct tm_predictor *p) {
    struct tm_predictor bigger = {0};
    bigger.capacity = p->capacity ? 2 * p->capacity : 1024;
    bigger.branch = calloc(bigger.capacity, sizeof *bigger.branch);
    bigger.target = calloc(bigger.capacity, sizeof *bigger.target);
    bigger.counter = calloc(bigger.capacity, sizeof *bigger.counter);
    if (!bigger.branch || !bigger.target || !bigger.counter) {
        abort();
    }
    for (size_t i = 0; i < p->capacity; ++i) {
        if (p->branch[i]) {
            size_t j = slot_of(&bigger, p->branch[i]);
            bigger.branch[j] = p->branch[i];
            bigger.target[j] = p->target[i];
            bigger.counter[j] = p->counter[i];
            ++bigger.used;
        }
    }
    free(p->branch);
    free(p->target);
    free(p->counter);
    *p = bigger;
}

unsigned tm_predict(const struct timing_model *m, struct tm_predictor *p, uint64_t branch_addr,
                    int taken, uint64_t target) {
    if (2 * (p->used + 1) > p->capacity) {
        grow(p);
    }
    uint64_t key = branch_addr | 1u; /* never 0: 0 marks a free slot */
    size_t i = slot_of(p, key);
    if (!p->branch[i]) { /* first seen: weakly not taken, no target */
        p->branch[i] = key;
        p->counter[i] = 1;
        p->target[i] = 0;
        ++p->used;
    }
    int predicted_taken = p->counter[i] >= 2;
    int hit = taken ? predicted_taken && p->target[i] == target : !predicted_taken;
    if (taken) {
        p->counter[i] = (uint8_t)(p->counter[i] < 3 ? p->counter[i] + 1 : 3);
        p->target[i] = target;
    } else if (p->counter[i] > 0) {
        --p->counter[i];
    }
    return hit ? 0 : m->param[TP_MISPREDICT];
}
