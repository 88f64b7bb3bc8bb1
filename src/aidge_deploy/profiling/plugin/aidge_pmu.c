/*
 * aidge_pmu: an emulated PMU for QEMU TCG (plugin API v1, QEMU >= 7.2).
 *
 * QEMU models no cycle counter and no Armv8-M PMU, so emulated boards get deterministic
 * guest event counts from this plugin instead. Counted, for the whole guest (all vCPUs
 * into one set of counters; Cortex-M machines have one):
 *
 *   instructions    guest instructions executed (see "Counting per block" below)
 *   loads           guest memory reads, one per access QEMU performs (an LDM of 4 words
 *                   counts 4, a literal-pool LDR counts 1; MMIO reads included)
 *   stores          guest memory writes, likewise (PUSH/STM count once per word)
 *   branches_taken  control transfers: each time a translation block starts executing at
 *                   an address other than the end of the block executed just before it.
 *                   Every branch, call, return, LE loop-back, exception entry and
 *                   exception return ends a block in QEMU, so this counts taken branches
 *                   (conditional ones only when taken) plus exception entries/returns;
 *                   blocks split for other reasons continue sequentially and count 0 (a
 *                   block cut short by an I/O access resumes sequentially too).
 *   estimated_cycles  with timing=FILE: the core's timing model (timing_model.h). Each
 *                   instruction is decoded and priced when its block is translated (the
 *                   block's static cycles are summed then), and the dynamic parts are added as
 *                   they happen: the pipeline refill of each taken control transfer, what
 *                   a block entered sequentially costs more or less after the block before
 *                   it (the two priced as one run: QEMU also splits straight-line code at
 *                   each 1 KB page end, which must not change the estimate), exception
 *                   entry, and memory wait states of the ws= regions (instruction fetch
 *                   after a taken branch into the region, each data read from it). Without
 *                   timing= the column is 0 and the header says "model none".
 *
 * Instruction lengths come from each instruction's first halfword (thumb_insn_length), never
 * from qemu_plugin_insn_size, which QEMU 7.2 inflates for an instruction that ends 2 bytes
 * before a page end: the blocks' ends, and so what counts as a taken branch, depend on it.
 *
 * Counting per block: QEMU translates each block once but may run it many times, so the
 * static part of the counts (its instructions, their summed costs) is added per block
 * run, by the callback that already runs at the start of every block (for the dynamic
 * part), for the block that ran before it: no op per instruction, nor per block, is
 * translated for it (a warm deploy's QEMU spends most of its time translating). The last
 * block is added at exit. A block stops early only when an instruction in it aborts: an
 * I/O access under -icount (QEMU replays that one instruction alone, in a block that runs
 * no plugin callbacks but memory ones, then resumes after it) or a fault. Then the part
 * that did run is added: up to and including the replayed instruction, found by a memory
 * callback on every one-instruction block (the replay is one); after a fault, the whole
 * block, and the entry into the fault handler as any other change of block (the run then
 * ends in the fault report). Blocks holding a boundary are counted
 * instruction by instruction (an inline +1 and +cost before each, the boundary's callback
 * for itself), so a snapshot inside a block sees exactly what ran before it; a snapshot
 * sees the block before it whole, as it was added when its own block started.
 *
 * Arguments (-plugin libaidge_pmu.so,boundary=0x...,out=FILE[,timing=FILE][,ws=...][,mem=off]):
 *   boundary=ADDR  (repeatable, up to 16) snapshot the counters each time execution
 *                  reaches ADDR (bit 0, the Thumb bit, is ignored). A snapshot holds the
 *                  counts of everything executed *before* the instruction at ADDR,
 *                  including the branch that reached it.
 *   boundaries=FILE  the same addresses, one per line, read when the first block is
 *                  translated instead of at start-up: a deploy starts QEMU (halted) before
 *                  its firmware is built or found in the cache, and writes the file once it
 *                  knows the firmware's symbols, before the core runs. A missing or bad
 *                  file then stops QEMU with status 3 and a message on stderr.
 *   out=FILE       where snapshots go (default: QEMU's plugin log, -d plugin).
 *   timing=FILE    the core's cost table ("name value" lines, written from the data file).
 *   ws=START:SIZE:N  (repeatable, up to 8) N wait states on the memory region.
 *   mem=off        do not count loads and stores (their columns stay 0): no memory
 *                  callback unless a ws= region needs one.
 *   blocks=FILE    at exit, every block that ran: its address range, instructions, runs and
 *                  static cycles (what a cross-check of the model needs, hot blocks first
 *                  by runs x cycles).
 *
 * Output, one record per line, flushed as written (nothing lost if QEMU is killed):
 *   # aidge_pmu 2 instructions loads stores branches_taken estimated_cycles
 *   M <core>|none
 *   B <boundary-index> 0x<address>
 *   S <seq> <boundary-index> <instructions> <loads> <stores> <branches_taken> <cycles>
 *   T <instructions> <loads> <stores> <branches_taken> <cycles>      (at exit)
 *
 * Build: gcc -O2 -shared -fPIC -fvisibility=hidden -o libaidge_pmu.so aidge_pmu.c
 *        thumb_decode.c timing_model.c timing_inorder.c
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_api.h"
#include "thumb_decode.h"
#include "timing_model.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = AIDGE_QEMU_PLUGIN_VERSION;

#define MAX_BOUNDARIES 16
#define MAX_WS_REGIONS 8

static uint64_t n_insns, n_loads, n_stores, n_taken, n_cycles;
static uint64_t seq;
static uint64_t boundaries[MAX_BOUNDARIES];
static int n_boundaries;
static char *boundaries_path; /* boundaries=FILE, read at the first translation */
static FILE *out;

static struct timing_model model;
static int timing_on;
static int predicting; /* the model has a branch predictor (m7) */
static struct tm_predictor predictor;
static int count_memory = 1;

struct ws_region {
    uint64_t start, end;
    unsigned wait_states;
};
static struct ws_region ws_regions[MAX_WS_REGIONS];
static int n_ws;

/* What on_block needs of a translated block: it lives as long as QEMU (a block may run
 * until the emulator exits). */
struct block {
    uint64_t start, end;
    uint32_t n_insns;
    uint16_t fetch_wait_states; /* of the region holding the block's first instruction */
    uint8_t per_insn;           /* counted instruction by instruction (it holds a boundary) */
    const struct block *seq_pred; /* the block this one last continued sequentially ... */
    const struct block *seq_head; /* ... the first block of that straight run ... */
    int seq_delta;                /* ... and tm_entry_delta of that pairing */
    uint8_t entered_seq;          /* its last start continued seq_pred sequentially */
    /* per instruction i: what the timing model knows of it, its offset from start, and the
     * static cycles of instructions 0..i-1 (cycles_before[n_insns]: the whole block) */
    struct insn_info *insns;
    uint32_t *offset;
    uint64_t *cycles_before;
    uint64_t runs;              /* times the block started (blocks=FILE) */
    struct block *translated;   /* the block translated before this one (blocks=FILE) */
};

static const struct insn_info *first_of(const struct block *b) { return &b->insns[0]; }
static const struct insn_info *last_of(const struct block *b) { return &b->insns[b->n_insns - 1]; }

static struct block *last_block;
static struct block *all_blocks; /* the last translated, for blocks=FILE */
static char *blocks_path;
static uint64_t insns_at_block_start;
/* start of the last instruction QEMU replayed alone after an I/O access (0: none since the
 * last block started) */
static uint64_t replayed_at;

static void emit(const char *line) {
    if (out) {
        fputs(line, out);
        fflush(out);
    } else {
        qemu_plugin_outs(line);
    }
}

static unsigned wait_states_at(uint64_t addr) {
    for (int i = 0; i < n_ws; ++i) {
        if (addr >= ws_regions[i].start && addr < ws_regions[i].end) {
            return ws_regions[i].wait_states;
        }
    }
    return 0;
}

/* How many instructions of a block counted as a whole ran: all of them, unless one was
 * replayed alone after an I/O access (then up to and including it: execution resumed right
 * after it, in another block). A fault ends the run; its block counts whole. */
static uint32_t ran_of(const struct block *b) {
    if (replayed_at >= b->start && replayed_at < b->end) {
        uint32_t offset = (uint32_t)(replayed_at - b->start);
        for (uint32_t i = 0; i < b->n_insns; ++i) {
            if (b->offset[i] == offset) {
                return i + 1; /* the replayed instruction was counted before it aborted */
            }
        }
    }
    return b->n_insns;
}

/* The counts of the block that ran last, added once the next one starts (or at exit). */
static int add_last_block(const struct block *b) {
    if (b->per_insn) { /* counted instruction by instruction as they ran */
        return n_insns - insns_at_block_start < b->n_insns;
    }
    uint32_t ran = ran_of(b);
    n_insns += ran;
    n_cycles += b->cycles_before[ran];
    return ran < b->n_insns;
}

/* the instruction before the last one of ``b``, NULL when the block holds one */
static const struct insn_info *before_last_of(const struct block *b) {
    return b->n_insns >= 2 ? &b->insns[b->n_insns - 2] : NULL;
}

static uint64_t last_addr_of(const struct block *b) { return b->start + b->offset[b->n_insns - 1]; }

/* A straight run QEMU split into several blocks: a page end splits it, and an instruction
 * across the page end is a block of its own, so one run can be three blocks. */
#define MAX_RUN_BLOCKS 4
#define MAX_RUN_INSNS 2048
static struct insn_info run_insns[MAX_RUN_INSNS];

/* The instructions of the straight run ``prev`` ends (prev and the blocks it continued
 * sequentially this time, oldest first) into run_insns; their count, and the run's first
 * block in *head. */
static size_t straight_run(const struct block *prev, const struct block **head) {
    const struct block *chain[MAX_RUN_BLOCKS];
    size_t depth = 0, total = 0;
    for (const struct block *c = prev; c && depth < MAX_RUN_BLOCKS &&
                                       total + c->n_insns <= MAX_RUN_INSNS;
         c = c->entered_seq ? c->seq_pred : NULL) {
        chain[depth++] = c;
        total += c->n_insns;
    }
    size_t at = 0;
    for (size_t i = depth; i-- > 0;) {
        memcpy(&run_insns[at], chain[i]->insns, chain[i]->n_insns * sizeof *run_insns);
        at += chain[i]->n_insns;
    }
    *head = chain[depth - 1];
    return total;
}

static void on_block(unsigned int vcpu, void *udata) {
    (void)vcpu;
    struct block *b = udata;
    const struct block *prev = last_block;
    int sequential = 0; /* b continues prev's straight run */
    if (prev) {
        if (add_last_block(prev)) {
            /* cut short by an I/O access replayed on its own: execution resumes right
             * after it, sequentially (no branch, no pairing across the replay) */
        } else if (b->start == prev->end) {
            if (timing_on && predicting && (last_of(prev)->flags & IF_CONTROL)) {
                /* a branch that fell through: mispredicted if it was predicted taken */
                n_cycles += tm_predict(&model, &predictor, last_addr_of(prev), 0, 0);
            }
            if (timing_on) {
                /* the blocks priced as the one straight run they are: QEMU splits
                 * straight-line code where the layout puts a page end, so this keeps the
                 * estimate independent of where the code lies */
                const struct block *head;
                size_t n_run = straight_run(prev, &head);
                if (b->seq_pred != prev || b->seq_head != head) {
                    b->seq_pred = prev;
                    b->seq_head = head;
                    b->seq_delta = tm_entry_delta(&model, run_insns, n_run, b->insns, b->n_insns);
                }
                n_cycles += (uint64_t)(int64_t)b->seq_delta;
            }
            sequential = 1;
        } else {
            ++n_taken;
            if (timing_on) {
                if ((last_of(prev)->flags & IF_CONTROL) && predicting) {
                    n_cycles += tm_predict(&model, &predictor, last_addr_of(prev), 1, b->start);
                    n_cycles += b->fetch_wait_states;
                } else if (last_of(prev)->flags & IF_CONTROL) {
                    n_cycles += tm_refill(&model, before_last_of(prev), last_of(prev),
                                          first_of(b), b->start);
                    n_cycles += b->fetch_wait_states;
                } else { /* entered without a branch: an exception */
                    n_cycles += model.param[TP_EXCEPTION_ENTRY] + b->fetch_wait_states;
                }
            }
        }
    }
    b->entered_seq = (uint8_t)sequential;
    last_block = b;
    ++b->runs;
    insns_at_block_start = n_insns;
    replayed_at = 0;
}

/* udata of a boundary instruction: its boundary index and its own cost */
static void on_boundary(unsigned int vcpu, void *udata) {
    (void)vcpu;
    uintptr_t packed = (uintptr_t)udata;
    int index = (int)(packed & 0xFF);
    char line[192];
    snprintf(line, sizeof line,
             "S %" PRIu64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
             seq++, index, n_insns, n_loads, n_stores, n_taken, n_cycles);
    emit(line);
    ++n_insns; /* the boundary instruction itself: counted after the snapshot */
    n_cycles += packed >> 8;
}

/* udata: the block, when it holds one instruction (it may be the replay of an I/O access) */
static void note_replay(const struct block *b) {
    if (b && b != last_block) { /* its on_block never ran: QEMU's replay of one instruction */
        replayed_at = b->start;
    }
}

static void on_replay(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata) {
    (void)vcpu;
    (void)info;
    (void)vaddr;
    note_replay(udata);
}

static void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata) {
    (void)vcpu;
    note_replay(udata);
    int store = qemu_plugin_mem_is_store(info);
    if (count_memory) {
        if (store) {
            ++n_stores;
        } else {
            ++n_loads;
        }
    }
    if (!store && n_ws) {
        n_cycles += wait_states_at(vaddr);
    }
}

static int boundary_index(uint64_t vaddr) {
    for (int i = 0; i < n_boundaries; ++i) {
        if (boundaries[i] == vaddr) {
            return i;
        }
    }
    return -1;
}

static int add_boundary(const char *text) {
    char *end = NULL;
    unsigned long long addr = strtoull(text, &end, 0);
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') {
        ++end;
    }
    if (end == text || *end != '\0' || n_boundaries >= MAX_BOUNDARIES) {
        return -1;
    }
    boundaries[n_boundaries++] = (uint64_t)addr & ~1ull; /* drop the Thumb bit */
    return 0;
}

static void emit_boundaries(void) {
    char line[96];
    for (int i = 0; i < n_boundaries; ++i) {
        snprintf(line, sizeof line, "B %d 0x%" PRIx64 "\n", i, boundaries[i]);
        emit(line);
    }
}

/* boundaries=FILE: nothing has run yet (the first block is being translated), so every
 * boundary is in place before the first instruction executes. */
static void load_boundaries_file(void) {
    FILE *f = fopen(boundaries_path, "r");
    if (!f) {
        fprintf(stderr, "aidge_pmu: cannot read the boundaries file %s\n", boundaries_path);
        exit(3);
    }
    char line[64];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '\n' || line[0] == '\0') {
            continue;
        }
        if (add_boundary(line) != 0) {
            fprintf(stderr, "aidge_pmu: bad or too many boundaries in %s: %s", boundaries_path,
                    line);
            exit(3);
        }
    }
    fclose(f);
    free(boundaries_path);
    boundaries_path = NULL;
    emit_boundaries();
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    if (boundaries_path) {
        load_boundaries_file();
    }
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) {
        return;
    }
    /* one allocation per block (it lives as long as QEMU): the block, then its per-
     * instruction tables; a warm deploy translates thousands of blocks */
    struct block *b = calloc(1, sizeof *b + (n + 1) * sizeof(uint64_t) +
                                    n * (sizeof(uint32_t) + sizeof(struct insn_info)));
    /* per-instruction scratch: a block holds at most a few hundred instructions */
    unsigned *cost = calloc(n, sizeof *cost + sizeof(int));
    if (!b || !cost) {
        abort();
    }
    uint64_t *cycles_before = (uint64_t *)(b + 1);
    struct insn_info *insns = (struct insn_info *)(cycles_before + n + 1);
    uint32_t *offset = (uint32_t *)(insns + n);
    int *index = (int *)(cost + n);
    b->start = qemu_plugin_tb_vaddr(tb);
    b->n_insns = (uint32_t)n;
    b->insns = insns;
    b->translated = all_blocks;
    all_blocks = b;
    b->fetch_wait_states = (uint16_t)wait_states_at(b->start);
    b->offset = offset;
    b->cycles_before = cycles_before;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
    struct tm_state state;
    tm_reset(&state);
    for (size_t i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        /* the length from the instruction's first halfword, never qemu_plugin_insn_size
         * (thumb_insn_length says why): the block's end and every decode depend on it */
        thumb_decode(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn), &insns[i]);
        cost[i] = timing_on ? tm_cost(&model, &state, &insns[i]) : 0;
        offset[i] = (uint32_t)(vaddr - b->start);
        if (i == n - 1) {
            b->end = vaddr + insns[i].size;
        }
        cycles_before[i + 1] = cycles_before[i] + cost[i];
        index[i] = n_boundaries ? boundary_index(vaddr) : -1;
        if (index[i] >= 0) {
            b->per_insn = 1;
        }
    }
    for (size_t i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (index[i] >= 0) {
            uintptr_t packed = (uintptr_t)index[i] | ((uintptr_t)cost[i] << 8);
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_boundary, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)packed);
        } else if (b->per_insn) {
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &n_insns, 1);
            if (cost[i]) {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                           &n_cycles, cost[i]);
            }
        }
        void *block_of_one = n == 1 ? b : NULL;
        if (count_memory || n_ws) {
            /* reads and writes: QEMU 7.2 never calls a QEMU_PLUGIN_MEM_R callback */
            qemu_plugin_register_vcpu_mem_cb(insn, on_access, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, block_of_one);
        } else if (block_of_one) {
            qemu_plugin_register_vcpu_mem_cb(insn, on_replay, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, block_of_one);
        }
    }
    free(cost);
}

/* blocks=FILE: each translated block that ran, "H <start> <end> <instructions> <runs>
 * <static cycles>" (a block retranslated is listed once per translation) */
static void write_blocks(void) {
    FILE *f = fopen(blocks_path, "w");
    if (!f) {
        fprintf(stderr, "aidge_pmu: cannot write %s\n", blocks_path);
        return;
    }
    fputs("# aidge_pmu blocks start end instructions runs static_cycles\n", f);
    for (const struct block *b = all_blocks; b; b = b->translated) {
        if (b->runs) {
            fprintf(f, "H 0x%" PRIx64 " 0x%" PRIx64 " %" PRIu32 " %" PRIu64 " %" PRIu64 "\n",
                    b->start, b->end, b->n_insns, b->runs, b->cycles_before[b->n_insns]);
        }
    }
    fclose(f);
}

static void on_plugin_exit(qemu_plugin_id_t id, void *udata) {
    (void)id;
    (void)udata;
    if (last_block) {
        add_last_block(last_block); /* the block the run stopped in */
    }
    char line[160];
    snprintf(line, sizeof line, "T %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
             n_insns, n_loads, n_stores, n_taken, n_cycles);
    emit(line);
    if (blocks_path) {
        write_blocks();
    }
    if (out) {
        fclose(out);
        out = NULL;
    }
}

static int parse_ws(const char *spec) {
    char *end = NULL;
    unsigned long long start = strtoull(spec, &end, 0);
    if (*end != ':') {
        return -1;
    }
    unsigned long long size = strtoull(end + 1, &end, 0);
    if (*end != ':') {
        return -1;
    }
    unsigned long wait = strtoul(end + 1, &end, 0);
    if (*end != '\0' || n_ws >= MAX_WS_REGIONS || wait > 1000) {
        return -1;
    }
    ws_regions[n_ws].start = start;
    ws_regions[n_ws].end = start + size;
    ws_regions[n_ws].wait_states = (unsigned)wait;
    ++n_ws;
    return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv) {
    (void)info;
    const char *out_path = NULL;
    for (int i = 0; i < argc; ++i) {
        const char *arg = argv[i];
        if (strncmp(arg, "boundary=", 9) == 0) {
            if (add_boundary(arg + 9) != 0) {
                fprintf(stderr, "aidge_pmu: bad or too many boundary arguments: %s\n", arg);
                return -1;
            }
        } else if (strncmp(arg, "boundaries=", 11) == 0) {
            boundaries_path = strdup(arg + 11);
            if (!boundaries_path) {
                return -1;
            }
        } else if (strncmp(arg, "out=", 4) == 0) {
            out_path = arg + 4;
        } else if (strncmp(arg, "timing=", 7) == 0) {
            if (tm_load(&model, arg + 7, stderr) != 0) {
                return -1;
            }
            timing_on = 1;
            predicting = model.param[TP_PREDICTOR] != 0;
        } else if (strncmp(arg, "ws=", 3) == 0) {
            if (parse_ws(arg + 3) != 0) {
                fprintf(stderr, "aidge_pmu: bad or too many ws arguments: %s\n", arg);
                return -1;
            }
        } else if (strncmp(arg, "blocks=", 7) == 0) {
            blocks_path = strdup(arg + 7);
            if (!blocks_path) {
                return -1;
            }
        } else if (strcmp(arg, "mem=off") == 0) {
            count_memory = 0;
        } else {
            fprintf(stderr, "aidge_pmu: unknown argument %s\n", arg);
            return -1;
        }
    }
    if (out_path) {
        out = fopen(out_path, "w");
        if (!out) {
            fprintf(stderr, "aidge_pmu: cannot write %s\n", out_path);
            return -1;
        }
    }
    emit("# aidge_pmu 2 instructions loads stores branches_taken estimated_cycles\n");
    char line[96];
    snprintf(line, sizeof line, "M %s\n", timing_on ? model.core : "none");
    emit(line);
    if (boundaries_path && n_boundaries) {
        fprintf(stderr, "aidge_pmu: boundary= and boundaries= exclude each other\n");
        return -1;
    }
    emit_boundaries(); /* boundaries=FILE: when the file is read */
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
