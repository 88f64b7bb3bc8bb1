/*
 * timing_model.c: the rules that turn a core's cost table into cycles (see timing_model.h).
 */
#include "timing_model.h"

#include <stdlib.h>
#include <string.h>

/* names of the classes in the cost file, in enum insn_class order */
static const char *const CLASS_NAMES[IC_COUNT] = {
    "other",      "alu",       "mul",           "div",          "load",
    "store",      "load_dual", "store_dual",    "load_multi",   "store_multi",
    "branch",     "branch_reg", "load_pc",      "table_branch", "loop_end",
    "it",         "nop",       "system",        "barrier",      "fp_alu",
    "fp_mul",     "fp_mac",    "fp_div",        "fp_load",      "fp_store",
    "fp_load_multi", "fp_store_multi", "fp_move", "fp_system",  "mve_load",
    "mve_store",  "mve_int",   "mve_fpmul",     "mve_sys",
};

static const char *const PARAM_NAMES[TP_COUNT] = {
    "store_register_offset", "load_pipelined",   "address_dependency",
    "multi_per_register",    "fp_multi_per_register", "fp_load_double",
    "fp_store_double",       "fp_move_double",   "multi_registers_per_cycle",
    "it_folded",             "refill_direct",
    "refill_register",       "refill_load",      "refill_unaligned_wide",
    "refill_max",            "refill_loop_end",  "exception_entry",
    "dual_issue",            "mve_beats",        "store_data_advance",
    "acc_advance",           "fp_acc_advance",   "fp_store_data_advance",
    "early_read",            "latency_shifted",  "shift_lsl_free",
    "latency_dsp_late",      "latency_load_subword", "load_to_mul",
    "mul_sets_flags",        "fp_mac_blocks",    "fp_mac_blocks_all",
    "refill_flags_ready",    "predictor",        "mispredict",
    "fp_multi_registers_per_cycle",
};

static int find(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; ++i) {
        if (strcmp(names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

int tm_load(struct timing_model *m, const char *path, FILE *err) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < IC_COUNT; ++i) {
        m->cost[i] = 1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(err, "aidge_pmu: cannot read the timing model %s\n", path);
        return -1;
    }
    char line[256];
    int ok = 0, seen_engine = 0;
    while (fgets(line, sizeof line, f)) {
        char key[96], value[64];
        if (line[0] == '#' || sscanf(line, "%95s %63s", key, value) != 2) {
            continue;
        }
        if (strcmp(key, "engine") == 0) {
            seen_engine = 1;
            if (strcmp(value, "m4") == 0) {
                m->engine = TM_M4;
            } else if (strcmp(value, "m55") == 0) {
                m->engine = TM_M55;
            } else if (strcmp(value, "m33") == 0) {
                m->engine = TM_M33;
            } else if (strcmp(value, "m7") == 0) {
                m->engine = TM_M7;
            } else {
                fprintf(err, "aidge_pmu: %s: unknown engine %s\n", path, value);
                ok = -1;
            }
            continue;
        }
        if (strcmp(key, "core") == 0) {
            snprintf(m->core, sizeof m->core, "%s", value);
            continue;
        }
        char *end = NULL;
        long number = strtol(value, &end, 10);
        if (*end != '\0' || number < 0 || number > 1000) {
            fprintf(err, "aidge_pmu: %s: bad value for %s: %s\n", path, key, value);
            ok = -1;
            continue;
        }
        const char *dot = strchr(key, '.');
        int idx = -1;
        uint16_t *table = NULL;
        if (dot) {
            idx = find(CLASS_NAMES, IC_COUNT, dot + 1);
            if (strncmp(key, "cost.", 5) == 0) {
                table = m->cost;
            } else if (strncmp(key, "latency.", 8) == 0) {
                table = m->latency;
            } else if (strncmp(key, "latency_double.", 15) == 0) {
                table = m->latency_double;
            }
        } else {
            idx = find(PARAM_NAMES, TP_COUNT, key);
            table = m->param;
        }
        if (idx < 0 || !table) {
            fprintf(err, "aidge_pmu: %s: unknown entry %s\n", path, key);
            ok = -1;
            continue;
        }
        table[idx] = (uint16_t)number;
    }
    fclose(f);
    if (!seen_engine) {
        fprintf(err, "aidge_pmu: %s names no engine\n", path);
        ok = -1;
    }
    return ok;
}

void tm_reset(struct tm_state *st) { memset(st, 0, sizeof *st); }

static int is_single_load_store(const struct insn_info *in) {
    return in->cls == IC_LOAD || in->cls == IC_STORE;
}

static int is_data_processing(const struct insn_info *in) {
    return in->cls == IC_ALU || in->cls == IC_MUL || in->cls == IC_DIV;
}

unsigned tm_base_cost(const struct timing_model *m, const struct insn_info *in) {
    unsigned c = m->cost[in->cls];
    switch (in->cls) {
    case IC_STORE:
        return (in->flags & IF_REG_OFFSET) ? m->param[TP_STORE_REGISTER_OFFSET] : c;
    case IC_LOAD_MULTI:
    case IC_STORE_MULTI: {
        unsigned per_cycle = m->param[TP_MULTI_REGISTERS_PER_CYCLE] ? m->param[TP_MULTI_REGISTERS_PER_CYCLE] : 1;
        return c + m->param[TP_MULTI_PER_REGISTER] * ((in->nregs + per_cycle - 1) / per_cycle);
    }
    case IC_FP_MOVE:
        return (in->flags & IF_DOUBLE) ? m->param[TP_FP_MOVE_DOUBLE] : c;
    case IC_FP_LOAD_MULTI:
    case IC_FP_STORE_MULTI: {
        unsigned per_cycle = m->param[TP_FP_MULTI_REGISTERS_PER_CYCLE]
                                 ? m->param[TP_FP_MULTI_REGISTERS_PER_CYCLE]
                                 : 1;
        return c + m->param[TP_FP_MULTI_PER_REGISTER] * ((in->nregs + per_cycle - 1) / per_cycle);
    }
    case IC_FP_LOAD:
        return (in->flags & IF_DOUBLE) ? m->param[TP_FP_LOAD_DOUBLE] : c;
    case IC_FP_STORE:
        return (in->flags & IF_DOUBLE) ? m->param[TP_FP_STORE_DOUBLE] : c;
    default:
        return c;
    }
}

static unsigned cost_m4(const struct timing_model *m, struct tm_state *st,
                        const struct insn_info *in) {
    unsigned c = tm_base_cost(m, in);
    const struct insn_info *p = st->prev_valid ? &st->prev : NULL;
    if (in->cls == IC_IT && p && p->size == 2 && !(p->flags & IF_CONTROL)) {
        c = m->param[TP_IT_FOLDED];
    }
    if (p && in->addr) {
        if (is_single_load_store(in) && p->cls == IC_LOAD && !(in->addr & p->dst)) {
            if (c > m->param[TP_LOAD_PIPELINED]) {
                c = m->param[TP_LOAD_PIPELINED];
            }
        } else if (is_data_processing(p) && (in->addr & p->dst)) {
            c += m->param[TP_ADDRESS_DEPENDENCY];
        }
    }
    st->prev = *in;
    st->prev_valid = 1;
    return c;
}

/* MVE pipelines: load/store, integer, float/multiply, control */
static int mve_pipe(const struct insn_info *in) {
    switch (in->cls) {
    case IC_MVE_LOAD:
    case IC_MVE_STORE:
        return 0;
    case IC_MVE_INT:
        return 1;
    case IC_MVE_FPMUL:
        return 2;
    case IC_MVE_SYS:
        return 3;
    default:
        return -1;
    }
}

static int32_t max32(int32_t a, int32_t b) { return a > b ? a : b; }

static unsigned cost_m55(const struct timing_model *m, struct tm_state *st,
                         const struct insn_info *in) {
    int32_t operands = 0; /* when the operands are ready */
    for (int r = 0; r < 15; ++r) { /* PC is always ready */
        if (in->src & (1u << r)) {
            operands = max32(operands, st->ready_core[r]);
        }
    }
    /* an MVE store reads the vector it stores a cycle late (LLVM: M55Read1) */
    int32_t advance = in->cls == IC_MVE_STORE ? m->param[TP_STORE_DATA_ADVANCE] : 0;
    for (int s = 0; s < 32; ++s) {
        if (in->fsrc & (1u << s)) {
            operands = max32(operands, st->ready_fp[s] - advance);
        }
    }
    int32_t t = max32(st->now, operands);
    int pipe = mve_pipe(in);
    if (pipe >= 0) {
        t = max32(t, st->pipe_busy[pipe]);
    }
    const struct insn_info *p = st->prev_valid ? &st->prev : NULL;
    unsigned issue = tm_base_cost(m, in);
    if (pipe >= 0 && pipe < 3 && m->param[TP_MVE_BEATS]) { /* VPST/VCTP: one cycle */
        issue = m->param[TP_MVE_BEATS];
    }
    int paired = 0;
    if (m->param[TP_DUAL_ISSUE] && p && !st->prev_paired && in->size == 2 && p->size == 2 &&
        ((in->flags | p->flags) & IF_DUAL_ISSUE) && mve_pipe(p) < 0 && pipe < 0 &&
        !(in->src & p->dst) && !(in->dst & (p->dst | p->src)) && operands <= st->prev_issue &&
        !(p->flags & IF_CONTROL)) {
        t = st->prev_issue; /* issued beside the previous instruction */
        paired = 1;
    }
    uint16_t lat = (in->flags & IF_DOUBLE) && m->latency_double[in->cls] ? m->latency_double[in->cls]
                                                                         : m->latency[in->cls];
    if (lat == 0) {
        lat = (uint16_t)issue;
    }
    for (int r = 0; r < 15; ++r) {
        if (in->dst & (1u << r)) {
            st->ready_core[r] = t + lat;
        }
    }
    for (int s = 0; s < 32; ++s) {
        if (in->fdst & (1u << s)) {
            st->ready_fp[s] = t + lat;
        }
    }
    int32_t done = t + (int32_t)issue;
    if (pipe >= 0) {
        st->pipe_busy[pipe] = done;
        st->now = t + 1; /* the next instruction may start beside this one's second beat */
    } else if (!paired) {
        st->now = done;
    }
    int32_t end = max32(st->end, done);
    unsigned c = (unsigned)(end - st->end);
    st->end = end;
    st->prev = *in;
    st->prev_valid = 1;
    st->prev_paired = paired;
    st->prev_issue = t;
    return c;
}

unsigned tm_cost(const struct timing_model *m, struct tm_state *st, const struct insn_info *in) {
    switch (m->engine) {
    case TM_M55:
        return cost_m55(m, st, in);
    case TM_M33:
        return tm_cost_m33(m, st, in);
    case TM_M7:
        return tm_cost_m7(m, st, in);
    default:
        return cost_m4(m, st, in);
    }
}

unsigned tm_refill(const struct timing_model *m, const struct insn_info *before,
                   const struct insn_info *branch, const struct insn_info *target,
                   uint64_t target_addr) {
    unsigned p;
    switch (branch->cls) {
    case IC_LOOP_END:
        return m->param[TP_REFILL_LOOP_END];
    case IC_LOAD_PC:
    case IC_LOAD_MULTI:
    case IC_TABLE_BRANCH:
        p = m->param[TP_REFILL_LOAD];
        break;
    case IC_BRANCH_REG:
        p = m->param[TP_REFILL_REGISTER];
        break;
    case IC_BRANCH:
        p = m->param[TP_REFILL_DIRECT];
        /* m33: the flags were ready early (not set right before, or not read at all) */
        if (m->engine == TM_M33 && !((branch->flags & IF_CONDITIONAL) && branch->src == 0 &&
                                     (!before || (before->flags & IF_SETS_FLAGS)))) {
            p = m->param[TP_REFILL_FLAGS_READY];
        }
        break;
    default:
        p = m->param[TP_REFILL_DIRECT];
        break;
    }
    if (target && target->size == 4 && (target_addr & 3u) == 2) {
        p += m->param[TP_REFILL_UNALIGNED_WIDE];
    }
    if (m->param[TP_REFILL_MAX] && p > m->param[TP_REFILL_MAX]) {
        p = m->param[TP_REFILL_MAX];
    }
    return p;
}

int tm_entry_delta(const struct timing_model *m, const struct insn_info *prev, size_t n_prev,
                   const struct insn_info *next, size_t n_next) {
    struct tm_state alone, after;
    tm_reset(&alone);
    tm_reset(&after);
    long base = 0, joined = 0;
    for (size_t i = 0; i < n_prev; ++i) {
        (void)tm_cost(m, &after, &prev[i]);
    }
    for (size_t i = 0; i < n_next; ++i) {
        base += tm_cost(m, &alone, &next[i]);
        joined += tm_cost(m, &after, &next[i]);
    }
    return (int)(joined - base);
}
