/*
 * aidge_pmu: an emulated PMU for QEMU TCG (plugin API v1, QEMU >= 7.2).
 *
 * QEMU models no cycle counter and no Armv8-M PMU, so emulated boards get deterministic
 * guest event counts from this plugin instead. Counted, for the whole guest (all vCPUs
 * into one set of counters; Cortex-M machines have one):
 *
 *   instructions    guest instructions executed (an inline +1 before each instruction,
 *                   so an instruction that faults is still counted once)
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
 *                   instruction is decoded and priced when its block is translated (an
 *                   inline add of its cost before it), and the dynamic parts are added as
 *                   they happen: the pipeline refill of each taken control transfer, the
 *                   pairing of a block's first instruction with the last one of the block
 *                   before when execution continues sequentially, exception entry, and
 *                   memory wait states of the ws= regions (instruction fetch after a taken
 *                   branch into the region, each data read from it). Without timing= the
 *                   column is 0 and the header says "model none".
 *
 * Arguments (-plugin libaidge_pmu.so,boundary=0x...,out=FILE[,timing=FILE][,ws=...][,mem=off]):
 *   boundary=ADDR  (repeatable, up to 16) snapshot the counters each time execution
 *                  reaches ADDR (bit 0, the Thumb bit, is ignored). A snapshot holds the
 *                  counts of everything executed *before* the instruction at ADDR,
 *                  including the branch that reached it.
 *   out=FILE       where snapshots go (default: QEMU's plugin log, -d plugin).
 *   timing=FILE    the core's cost table ("name value" lines, written from the data file).
 *   ws=START:SIZE:N  (repeatable, up to 8) N wait states on the memory region.
 *   mem=off        do not count loads and stores (their columns stay 0): no memory
 *                  callback unless a ws= region needs one.
 *
 * Output, one record per line, flushed as written (nothing lost if QEMU is killed):
 *   # aidge_pmu 2 instructions loads stores branches_taken estimated_cycles
 *   M <core>|none
 *   B <boundary-index> 0x<address>
 *   S <seq> <boundary-index> <instructions> <loads> <stores> <branches_taken> <cycles>
 *   T <instructions> <loads> <stores> <branches_taken> <cycles>      (at exit)
 *
 * Build: gcc -O2 -shared -fPIC -fvisibility=hidden -o libaidge_pmu.so aidge_pmu.c
 *        thumb_decode.c timing_model.c
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
static FILE *out;

static struct timing_model model;
static int timing_on;
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
    struct insn_info first, last;
};

static const struct block *last_block;
static uint64_t insns_at_block_start;

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

static void on_block(unsigned int vcpu, void *udata) {
    (void)vcpu;
    const struct block *b = udata;
    const struct block *prev = last_block;
    if (prev) {
        uint64_t executed = n_insns - insns_at_block_start;
        if (executed < prev->n_insns) {
            /* cut short by an I/O access replayed on its own: execution resumes right
             * after it, sequentially (no branch, no pairing across the replay) */
        } else if (b->start == prev->end) {
            if (timing_on) {
                n_cycles += (uint64_t)(int64_t)tm_entry_delta(&model, &prev->last, &b->first);
            }
        } else {
            ++n_taken;
            if (timing_on) {
                if (prev->last.flags & IF_CONTROL) {
                    n_cycles += tm_refill(&model, &prev->last, &b->first, b->start);
                    n_cycles += b->fetch_wait_states;
                } else { /* entered without a branch: an exception */
                    n_cycles += model.param[TP_EXCEPTION_ENTRY] + b->fetch_wait_states;
                }
            }
        }
    }
    last_block = b;
    insns_at_block_start = n_insns;
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

static void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata) {
    (void)vcpu;
    (void)udata;
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

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) {
        return;
    }
    struct block *b = calloc(1, sizeof *b);
    if (!b) {
        abort();
    }
    struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
    b->start = qemu_plugin_tb_vaddr(tb);
    b->end = qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last);
    b->n_insns = (uint32_t)n;
    b->fetch_wait_states = (uint16_t)wait_states_at(b->start);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
    struct tm_state state;
    tm_reset(&state);
    int memory_cb = count_memory || n_ws;
    for (size_t i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        struct insn_info info;
        thumb_decode(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn), &info);
        unsigned cost = timing_on ? tm_cost(&model, &state, &info) : 0;
        if (i == 0) {
            b->first = info;
        }
        b->last = info;
        int index = n_boundaries ? boundary_index(vaddr) : -1;
        if (index >= 0) {
            uintptr_t packed = (uintptr_t)index | ((uintptr_t)cost << 8);
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_boundary, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)packed);
        } else {
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &n_insns, 1);
            if (cost) {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                           &n_cycles, cost);
            }
        }
        if (memory_cb) {
            /* reads and writes: QEMU 7.2 never calls a QEMU_PLUGIN_MEM_R callback */
            qemu_plugin_register_vcpu_mem_cb(insn, on_access, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, NULL);
        }
    }
}

static void on_plugin_exit(qemu_plugin_id_t id, void *udata) {
    (void)id;
    (void)udata;
    char line[160];
    snprintf(line, sizeof line, "T %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
             n_insns, n_loads, n_stores, n_taken, n_cycles);
    emit(line);
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
            char *end = NULL;
            unsigned long long addr = strtoull(arg + 9, &end, 0);
            if (end == arg + 9 || *end != '\0' || n_boundaries >= MAX_BOUNDARIES) {
                fprintf(stderr, "aidge_pmu: bad or too many boundary arguments: %s\n", arg);
                return -1;
            }
            boundaries[n_boundaries++] = (uint64_t)addr & ~1ull; /* drop the Thumb bit */
        } else if (strncmp(arg, "out=", 4) == 0) {
            out_path = arg + 4;
        } else if (strncmp(arg, "timing=", 7) == 0) {
            if (tm_load(&model, arg + 7, stderr) != 0) {
                return -1;
            }
            timing_on = 1;
        } else if (strncmp(arg, "ws=", 3) == 0) {
            if (parse_ws(arg + 3) != 0) {
                fprintf(stderr, "aidge_pmu: bad or too many ws arguments: %s\n", arg);
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
    for (int i = 0; i < n_boundaries; ++i) {
        snprintf(line, sizeof line, "B %d 0x%" PRIx64 "\n", i, boundaries[i]);
        emit(line);
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
